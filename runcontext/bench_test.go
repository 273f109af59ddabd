package runcontext

import "testing"

func BenchmarkValidateInvokeRequest(b *testing.B) {
	r := fixtureRequest(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeInvokeRequest(b *testing.B) {
	data := readFixture(b, "invoke.support-refund.json")
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := DecodeInvokeRequest(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMeterChargeToolCall(b *testing.B) {
	budget := DefaultRunBudget()
	budget.MaxToolCalls = 1 << 62
	m := NewMeter(budget, testNow)
	b.ReportAllocs()
	for b.Loop() {
		if err := m.ChargeToolCall(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMaterialize: the run context of the refund request from a host
// context that names no agent (the request's agent is checked once, with
// the request) and from one that names its own (both agents checked).
func BenchmarkMaterialize(b *testing.B) {
	req := fixtureRequest(b)
	for _, tc := range []struct {
		name  string
		agent bool
	}{{"host names no agent", false}, {"host names its agent", true}} {
		b.Run(tc.name, func(b *testing.B) {
			host, err := DecodeRunContext(readFixture(b, "run-context.support.json"))
			if err != nil {
				b.Fatal(err)
			}
			if !tc.agent {
				host.Agent = AgentIdentity{}
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Materialize(req, host, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
