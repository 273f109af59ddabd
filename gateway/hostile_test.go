package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// The secrets hostile adapters return: a Luhn-valid card number and an
// email address (the fixture's pack redacts credit_card and pan; the
// hostile runs add email).
const (
	hostileCard  = "4111111111111111"
	hostileEmail = "jane.doe@example.com"
)

// withEmailRedaction adds the email rule to the pack's redaction rules.
func withEmailRedaction(fx *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
	fx.editPack = func(p *pack.Pack) {
		p.PolicyLayer.Guardrails.RedactionRules = append(p.PolicyLayer.Guardrails.RedactionRules, "email")
	}
}

// observedRun binds f's compiled run to a gateway whose one adapter,
// adp_orders, serves lookup with ad; the attempts the gateway reports are
// collected in the returned list.
func observedRun(t testing.TB, f *fixture, ad gateway.Adapter, lookup gateway.Capability) (*gateway.Run, *[]gateway.Attempt) {
	t.Helper()
	gw, err := gateway.New([]gateway.Registration{{AdapterID: "adp_orders", Adapter: ad, Capabilities: map[string]gateway.Capability{"lookup": lookup}}},
		&gateway.Options{Transcript: canonChecked{t, f.recorder}})
	if err != nil {
		t.Fatal(err)
	}
	seen := &[]gateway.Attempt{}
	run, err := gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: f.cc, Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)}, &gateway.RunOptions{
		Observe: func(a gateway.Attempt) { *seen = append(*seen, a) }})
	if err != nil {
		t.Fatal(err)
	}
	return run, seen
}

// nested returns a value nested n objects deep.
func nested(n int) map[string]any {
	v := map[string]any{"leaf": true}
	for range n {
		v = map[string]any{"n": v}
	}
	return v
}

// adapterReturning is an adapter that returns out (a fresh copy per call)
// or err.
func adapterReturning(out func() *gateway.Outcome, err func() error) gateway.Adapter {
	return gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
		if err != nil {
			return nil, err()
		}
		return out(), nil
	})
}

// claimsRedacted is an adapter that reports its outcomes as already
// redacted (as replay's playback does) while they are not.
type claimsRedacted struct{ gateway.Adapter }

func (claimsRedacted) RedactedAttempt(*gateway.Call) bool { return true }

// TestHostileAdapterResults: whatever an adapter returns — secrets in any
// member of an outcome or an error, outputs and errors over
// max_payload_bytes, values nested without end, numbers JSON cannot hold —
// the call fails closed or is redacted, and no secret and no oversized
// value reaches the result, the transcript or what the gateway reports to
// its observer (what a replay packet and a checkpoint keep).
func TestHostileAdapterResults(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("x", 4096)
	bigList := make([]string, 200)
	for i := range bigList {
		bigList[i] = "mutation:" + strings.Repeat("m", 20)
	}
	cyclic := map[string]any{"a": 1.0}
	cyclic["self"] = cyclic
	tests := []struct {
		name    string
		out     func() *gateway.Outcome
		err     func() error
		max     int64 // max_payload_bytes; 0 leaves the fixture's (none: the default bound)
		status  gateway.Status
		code    string // the result's error code, "" for none
		mention string // the error message names it
		// redacted: metadata.redaction_applied must be true.
		redacted bool
	}{
		{name: "card number in an output value", out: func() *gateway.Outcome {
			return &gateway.Outcome{Output: map[string]any{"note": "paid with " + hostileCard}}
		}, status: gateway.StatusOK, redacted: true},
		{name: "email in a nested output list", out: func() *gateway.Outcome {
			return &gateway.Outcome{Output: map[string]any{"contacts": []any{map[string]any{"to": hostileEmail}}}}
		}, status: gateway.StatusOK, redacted: true},
		{name: "card number as an output map key", out: func() *gateway.Outcome {
			return &gateway.Outcome{Output: map[string]any{hostileCard: "visa"}}
		}, status: gateway.StatusOK, redacted: true},
		{name: "email as a nested output map key", out: func() *gateway.Outcome {
			return &gateway.Outcome{Output: map[string]any{"by_contact": map[string]any{hostileEmail: 1}}}
		}, status: gateway.StatusOK, redacted: true},
		{name: "card number as a JSON number", out: func() *gateway.Outcome {
			return &gateway.Outcome{Output: map[string]any{"pan": 4111111111111111.0}}
		}, status: gateway.StatusOK, redacted: true},
		{name: "card number in mutations", out: func() *gateway.Outcome {
			return &gateway.Outcome{Output: map[string]any{}, Mutations: []string{"card:" + hostileCard}}
		}, status: gateway.StatusOK, redacted: true},
		{name: "email in artifacts", out: func() *gateway.Outcome {
			return &gateway.Outcome{Output: map[string]any{}, Artifacts: []string{"mailto:" + hostileEmail}}
		}, status: gateway.StatusOK, redacted: true},
		{name: "card number in a citation", out: func() *gateway.Outcome {
			return &gateway.Outcome{Output: map[string]any{}, Citations: []gateway.Citation{{EvidenceRef: "kg:card:" + hostileCard}}}
		}, status: gateway.StatusOK, redacted: true},
		{name: "email in risk tags", out: func() *gateway.Outcome {
			return &gateway.Outcome{Output: map[string]any{}, RiskTags: []string{"owner " + hostileEmail}}
		}, status: gateway.StatusOK, redacted: true},
		{name: "card number in signals", out: func() *gateway.Outcome {
			return &gateway.Outcome{Output: map[string]any{}, Signals: []string{"fraud " + hostileCard}}
		}, status: gateway.StatusOK, redacted: true},
		{name: "card number in an error message", err: func() error {
			return gateway.NewToolError(gateway.CodeExecutionFailed, false, "card "+hostileCard+" declined", nil)
		}, status: gateway.StatusFailed, code: gateway.CodeExecutionFailed, redacted: true},
		{name: "email in an error reason", err: func() error {
			return &gateway.ToolError{Code: gateway.CodeExecutionFailed, Reason: "bounced to " + hostileEmail, Message: "failed"}
		}, status: gateway.StatusFailed, code: gateway.CodeExecutionFailed, redacted: true},
		{name: "card number in error details", err: func() error {
			return gateway.NewToolError(gateway.CodeExecutionFailed, false, "declined", map[string]any{"body": map[string]any{"card": hostileCard}})
		}, status: gateway.StatusFailed, code: gateway.CodeExecutionFailed, redacted: true},
		{name: "card number as an error details key", err: func() error {
			return gateway.NewToolError(gateway.CodeExecutionFailed, false, "declined", map[string]any{hostileCard: "declined"})
		}, status: gateway.StatusFailed, code: gateway.CodeExecutionFailed, redacted: true},
		{name: "card number in an error code", err: func() error {
			return &gateway.ToolError{Code: "declined " + hostileCard, Message: "failed"}
		}, status: gateway.StatusError, redacted: true},
		{name: "card number in a retryable error, then success", err: nil, out: nil, status: gateway.StatusOK, redacted: false},
		{name: "oversized output", out: func() *gateway.Outcome {
			return &gateway.Outcome{Output: map[string]any{"blob": huge + hostileCard}}
		}, max: 1024, status: gateway.StatusFailed, code: gateway.CodeExecutionFailed, mention: "max_payload_bytes"},
		{name: "oversized mutations", out: func() *gateway.Outcome {
			return &gateway.Outcome{Output: map[string]any{}, Mutations: bigList}
		}, max: 1024, status: gateway.StatusFailed, code: gateway.CodeExecutionFailed, mention: "max_payload_bytes"},
		{name: "oversized citations", out: func() *gateway.Outcome {
			return &gateway.Outcome{Output: map[string]any{}, Citations: []gateway.Citation{{EvidenceRef: huge}}}
		}, max: 1024, status: gateway.StatusFailed, code: gateway.CodeExecutionFailed, mention: "max_payload_bytes"},
		{name: "huge error details", err: func() error {
			return gateway.NewToolError(gateway.CodeTimeout, false, "upstream said", map[string]any{"body": huge + hostileCard})
		}, max: 1024, status: gateway.StatusFailed, code: gateway.CodeTimeout, mention: "max_payload_bytes"},
		{name: "huge error message with an unknown code", err: func() error {
			return &gateway.ToolError{Code: "weird_" + huge, Message: huge}
		}, max: 1024, status: gateway.StatusFailed, code: gateway.CodeExecutionFailed, mention: "max_payload_bytes"},
		{name: "output over the default bound when the budget sets none", out: func() *gateway.Outcome {
			return &gateway.Outcome{Output: map[string]any{"blob": strings.Repeat(huge, 300)}}
		}, status: gateway.StatusFailed, code: gateway.CodeExecutionFailed, mention: "max_payload_bytes (1048576)"},
		{name: "output nested deeper than the gateway reads", out: func() *gateway.Outcome {
			return &gateway.Outcome{Output: nested(1500)}
		}, status: gateway.StatusFailed, code: gateway.CodeExecutionFailed, mention: "nests deeper"},
		{name: "output that contains itself", out: func() *gateway.Outcome {
			return &gateway.Outcome{Output: cyclic}
		}, status: gateway.StatusFailed, code: gateway.CodeExecutionFailed, mention: "nests deeper"},
		{name: "error details that contain themselves", err: func() error {
			return gateway.NewToolError(gateway.CodeExecutionFailed, false, "loop", cyclic)
		}, status: gateway.StatusFailed, code: gateway.CodeExecutionFailed, mention: "nest deeper"},
		{name: "error details holding NaN", err: func() error {
			return gateway.NewToolError(gateway.CodeExecutionFailed, true, "nan", map[string]any{"score": math.NaN()})
		}, status: gateway.StatusFailed, code: gateway.CodeExecutionFailed, mention: "not finite"},
		{name: "adapter claiming its outcome is already redacted", out: func() *gateway.Outcome {
			return &gateway.Outcome{Output: map[string]any{"note": hostileCard}}
		}, status: gateway.StatusOK, redacted: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, withEmailRedaction, func(_ *fixture, rc *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
				rc.RunBudget.MaxPayloadBytes = tc.max
			})
			var ad gateway.Adapter = adapterReturning(tc.out, tc.err)
			switch tc.name {
			case "adapter claiming its outcome is already redacted":
				ad = claimsRedacted{ad}
			case "card number in a retryable error, then success":
				ad = gateway.AdapterFunc(func(_ context.Context, c *gateway.Call) (*gateway.Outcome, error) {
					if c.Attempt == 1 {
						return nil, gateway.NewToolError(gateway.CodeExecutionFailed, true, "card "+hostileCard, map[string]any{"to": hostileEmail})
					}
					return &gateway.Outcome{Output: map[string]any{"ok": true}}, nil
				})
			}
			run, seen := observedRun(t, f, ad, gateway.Capability{ArgsSchema: lookupSchema, HonorsContext: true})
			res, err := run.Call(ctx, lookupCall())
			if err != nil {
				t.Fatalf("Call = %v, want the outcome as a result", err)
			}
			if res.Status != tc.status {
				t.Errorf("status = %s (%+v), want %s", res.Status, res.Error, tc.status)
			}
			if tc.code != "" && (res.Error == nil || res.Error.Code != tc.code) {
				t.Errorf("error = %+v, want code %s", res.Error, tc.code)
			}
			if tc.mention != "" && (res.Error == nil || !strings.Contains(res.Error.Message, tc.mention)) {
				t.Errorf("error = %+v, want a message naming %s", res.Error, tc.mention)
			}
			if tc.redacted && !res.Metadata.RedactionApplied {
				t.Error("metadata.redaction_applied is false")
			}
			if len(*seen) == 0 {
				t.Fatal("the observer saw no attempt")
			}
			surfaces := map[string]any{"result": res, "transcript": f.recorder.Entries(), "observed attempts": *seen}
			for name, v := range surfaces {
				b, err := json.Marshal(v)
				if err != nil {
					t.Fatalf("%s has no JSON form: %v", name, err)
				}
				for _, secret := range []string{hostileCard, hostileEmail, "xxxxxxxxxxxxxxxx", "weird_"} {
					if strings.Contains(string(b), secret) {
						t.Errorf("%s holds %q", name, secret)
					}
				}
				if len(b) > 16<<10 {
					t.Errorf("%s is %d bytes: an oversized value was kept", name, len(b))
				}
			}
			if _, err := gateway.VerifyTranscript(f.recorder.Entries()); err != nil {
				t.Errorf("transcript chain: %v", err)
			}
		})
	}
}

// A delegated or destructive call needs the user's delegation with its
// token_ref (seed 000): an empty or blank token_ref blocks the call before
// the adapter runs, with a message naming token_ref.
func TestHostileDelegation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		tokenRef string
	}{
		{"delegated call with an empty token_ref", ""},
		{"delegated call with a blank token_ref", " \t\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, lowValue, func(_ *fixture, rc *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
				rc.User.Delegation.TokenRef = tc.tokenRef
			})
			res, err := f.run.Call(ctx, refundCall(1200))
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != gateway.StatusBlocked || res.Error == nil || res.Error.Code != gateway.CodePermissionDenied || !strings.Contains(res.Error.Message, "token_ref") {
				t.Errorf("refund = %s %+v, want blocked permission_denied naming token_ref", res.Status, res.Error)
			}
			if n := f.payments.CallCount("issue_refund"); n != 0 {
				t.Errorf("the adapter ran %d times", n)
			}
		})
	}
	// With its token_ref the same call runs, and the adapter gets it.
	f := newFixture(t, lowValue)
	if res, err := f.run.Call(ctx, refundCall(1200)); err != nil || res.Status != gateway.StatusCompleted {
		t.Fatalf("refund with a token_ref = %+v, %v", res, err)
	}
	if calls := f.payments.Calls(); len(calls) != 1 || calls[0].Delegation == nil || calls[0].Delegation.TokenRef != "tok_user_7a" {
		t.Errorf("the adapter got %+v", calls)
	}
}

// An outcome refused for its size is not kept under a write's idempotency
// key either: the refusal is, and the write never runs twice.
func TestOversizedWriteOutcomeKeptAsRefusal(t *testing.T) {
	f := newFixture(t, lowValue, func(fx *fixture, rc *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		rc.RunBudget.MaxPayloadBytes = 2048
		fx.payments = gatewaytest.NewScriptedAdapter()
		fx.payments.On("issue_refund").Return(&gateway.Outcome{Output: map[string]any{"receipt": strings.Repeat("r", 4096) + hostileCard}, Mutations: []string{"refund:t"}})
	})
	res, err := f.run.Call(ctx, refundCall(1200))
	if err != nil || res.Status != gateway.StatusFailed || res.Error == nil || !strings.Contains(res.Error.Message, "max_payload_bytes") || len(res.Output) != 0 {
		t.Fatalf("refund = %s %+v output %d members, %v", res.Status, res.Error, len(res.Output), err)
	}
	again, err := f.run.Call(ctx, refundCall(1200))
	if err != nil || !again.Metadata.Duplicate || again.Status != gateway.StatusFailed || f.payments.CallCount("issue_refund") != 1 {
		t.Errorf("again = %s duplicate %v, %v; adapter ran %d times", again.Status, again.Metadata.Duplicate, err, f.payments.CallCount("issue_refund"))
	}
	b, _ := json.Marshal(f.recorder.Entries())
	if strings.Contains(string(b), hostileCard) || strings.Contains(string(b), "rrrrrrrr") {
		t.Error("the transcript holds the oversized outcome")
	}
}

// The gateway's copy of an outcome is its own: an adapter that keeps a
// reference to what it returned and writes a secret into it afterwards
// changes neither the result nor what the observer kept.
func TestAdapterRewritingItsOutcomeAfterReturn(t *testing.T) {
	f := newFixture(t)
	var kept *gateway.Outcome
	run, seen := observedRun(t, f, gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
		kept = &gateway.Outcome{Output: map[string]any{"note": "fine"}, Mutations: []string{"m:1"}, Signals: []string{"s"}, Citations: []gateway.Citation{{EvidenceRef: "kg:x"}}}
		return kept, nil
	}), gateway.Capability{ArgsSchema: lookupSchema, HonorsContext: true})
	res, err := run.Call(ctx, lookupCall())
	if err != nil {
		t.Fatal(err)
	}
	kept.Output["note"], kept.Mutations[0], kept.Signals[0], kept.Citations[0].EvidenceRef = hostileCard, hostileCard, hostileCard, hostileCard
	for name, v := range map[string]any{"result": res, "observed": *seen} {
		if b, _ := json.Marshal(v); strings.Contains(string(b), hostileCard) {
			t.Errorf("the %s changed with the adapter's outcome: %s", name, b)
		}
	}
}

// The observer sees every attempt once, in order, with what the gateway
// made of it: a retried failure and the success, a panic without its
// value, an invalid outcome without its output.
func TestObserveReportsEveryAttempt(t *testing.T) {
	f := newFixture(t)
	run, seen := observedRun(t, f, gateway.AdapterFunc(func(_ context.Context, c *gateway.Call) (*gateway.Outcome, error) {
		switch c.Attempt {
		case 1:
			return nil, gateway.NewToolError(gateway.CodeExecutionFailed, true, "busy", nil)
		case 2:
			panic("secret " + hostileCard)
		}
		return nil, errors.New("unreachable")
	}), gateway.Capability{ArgsSchema: lookupSchema, HonorsContext: true, MaxAttempts: 3})
	res, err := run.Call(ctx, lookupCall())
	if !errors.Is(err, gateway.ErrAdapterPanic) || res.Status != gateway.StatusFailed {
		t.Fatalf("Call = %s, %v", res.Status, err)
	}
	a := *seen
	if len(a) != 2 || a[0].Attempt != 1 || a[0].Error == nil || a[0].Error.Message != "busy" || a[1].Attempt != 2 || !a[1].Panicked || a[1].Error != nil || a[1].Outcome != nil {
		t.Fatalf("observed %+v", a)
	}
	if a[0].ToolCallID != res.ToolCallID || a[0].RunID != f.rc.RunID || a[0].CapabilityID != "adp_orders.lookup" {
		t.Errorf("observed ids %+v", a[0])
	}

	f = newFixture(t)
	run, seen = observedRun(t, f, gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
		return &gateway.Outcome{Output: map[string]any{"n": math.Inf(1), "card": hostileCard}, CostCents: 0.25}, nil
	}), gateway.Capability{ArgsSchema: lookupSchema, HonorsContext: true})
	if res, err := run.Call(ctx, lookupCall()); err != nil || res.Status != gateway.StatusError {
		t.Fatalf("Call = %+v, %v", res, err)
	}
	if a := *seen; len(a) != 1 || len(a[0].Invalid) != 1 || a[0].Invalid[0] != "output" || a[0].Outcome == nil || a[0].Outcome.Output != nil || a[0].Outcome.CostCents != 0.25 || a[0].Error != nil {
		t.Errorf("observed %+v", a)
	}
}
