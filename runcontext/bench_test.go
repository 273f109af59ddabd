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
