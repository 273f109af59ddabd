package contextos_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/replay"
)

// leakyRun runs the 1200 refund with the leaky adapters and returns its
// packet, decoded from its JSON form as a store hands it back.
func leakyRun(t *testing.T) (*leakHarness, *contextos.Result, *replay.Packet) {
	t.Helper()
	lh := newLeakHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
	scriptLeaks(lh.Harness)
	req, rc := refundRequest(t, 1200, true)
	res := lh.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	stored, err := lh.Replays.Get(context.Background(), res.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	var p replay.Packet
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return lh, res, &p
}

// lookupOutcome is the packet's recorded order lookup outcome.
func lookupOutcome(t *testing.T, p *replay.Packet) *replay.AdapterOutcome {
	t.Helper()
	for i := range p.Outcomes {
		if p.Outcomes[i].CapabilityID == "adp_orders.lookup" && p.Outcomes[i].Outcome != nil {
			return &p.Outcomes[i]
		}
	}
	t.Fatal("the packet records no order lookup outcome")
	return nil
}

// replayed replays p and fails the test on an error, or when the result
// or the logs (at debug) hold a leak or more than limit bytes.
func replayed(t *testing.T, lh *leakHarness, p *replay.Packet) *replay.Report {
	t.Helper()
	out, err := lh.Runtime.Replay(context.Background(), p)
	if err != nil {
		t.Fatalf("Replay = %v", err)
	}
	assertNoLeak(t, map[string]any{"replay result": out, "logs": lh.logs.String()})
	return out
}

// TestHostileRecording: what the runtime records of a run (replay packets,
// checkpoints) never holds an adapter's raw value, whatever the adapter
// does; and a packet edited to carry one — or an oversized value — is
// refused, or replayed without the value reaching anything.
func TestHostileRecording(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"tampered packet carrying a raw card number", func(t *testing.T) {
			lh, _, p := leakyRun(t)
			lookupOutcome(t, p).Outcome.Output["payment"] = map[string]any{"card": "visa " + leakCard}
			out, err := lh.Runtime.Replay(ctx, p)
			if !errors.Is(err, replay.ErrTamper) || out == nil || out.Status != replay.Invalid {
				t.Fatalf("Replay = %+v, %v; want it refused as tampered", out, err)
			}
			assertNoLeak(t, map[string]any{"error": err.Error(), "replay result": out})
		}},
		{"resealed packet carrying a raw card number", func(t *testing.T) {
			// A packet rewritten with a raw value and sealed again: the
			// replay's gateway redacts what playback serves, as the live
			// run's did, so the replay is equal and holds no raw value.
			lh, _, p := leakyRun(t)
			lookupOutcome(t, p).Outcome.Output["payment"] = map[string]any{"card": "visa " + leakCard, "history": []any{"paid by " + leakEmail}}
			if err := p.Seal(); err != nil {
				t.Fatal(err)
			}
			if out := replayed(t, lh, p); out.Status != replay.ReplayEqual {
				t.Errorf("replay = %+v, want replay_equal", out)
			}
		}},
		{"packet recorded before redaction moved under the recorder", func(t *testing.T) {
			// Packets recorded by the adapter-wrapping recorder hold raw
			// outcomes and no redacted flag: they still replay equal.
			lh, _, p := leakyRun(t)
			b, err := json.Marshal(p.Outcomes)
			if err != nil {
				t.Fatal(err)
			}
			// What scriptLeaks returned, where the recorder kept it redacted.
			raw := strings.NewReplacer(`,"redacted":true`, "",
				"visa [REDACTED]", "visa "+leakCard, "paid by [REDACTED]", "paid by "+leakEmail, "kg:card:[REDACTED]", "kg:card:"+leakCard,
				"mailto:[REDACTED]", "mailto:"+leakEmail, "owner [REDACTED]", "owner "+leakEmail, "seen [REDACTED]", "seen "+leakCard,
				"card [REDACTED]", "card "+leakCard, "write to [REDACTED]", "write to "+leakEmail, `"card":"[REDACTED]"`, `"card":"`+leakCard+`"`,
				`"to":["[REDACTED]"]`, `"to":["`+leakEmail+`"]`, `"contact":"[REDACTED]"`, `"contact":"`+leakEmail+`"`,
				`"receipt_to":"[REDACTED]"`, `"receipt_to":"`+leakEmail+`"`, "charged:[REDACTED]", "charged:"+leakCard).Replace(string(b))
			if strings.Contains(raw, gateway.Redacted) || strings.Contains(raw, `"redacted"`) {
				t.Fatalf("scriptLeaks changed: %s", raw)
			}
			p.Outcomes = nil
			if err := json.Unmarshal([]byte(raw), &p.Outcomes); err != nil {
				t.Fatal(err)
			}
			if err := p.Seal(); err != nil {
				t.Fatal(err)
			}
			if out := replayed(t, lh, p); out.Status != replay.ReplayEqual {
				t.Errorf("replay = %+v, want replay_equal", out)
			}
		}},
		{"resealed packet that drops the redacted flags", func(t *testing.T) {
			// The recorded outcome is already redacted: without its flag the
			// replayed results would not say redaction was applied, and the
			// replay says where it differs.
			lh, _, p := leakyRun(t)
			for i := range p.Outcomes {
				p.Outcomes[i].Redacted = false
			}
			if err := p.Seal(); err != nil {
				t.Fatal(err)
			}
			out := replayed(t, lh, p)
			if out.Status != replay.ReplayMismatch || len(out.Diffs) == 0 || out.Diffs[0].Kind != replay.DiffToolTranscript || out.Diffs[0].Step != 1 {
				t.Errorf("replay = %+v, want a mismatch at the lookup's result (step 1)", out)
			}
		}},
		{"resealed packet with an oversized adapter outcome", func(t *testing.T) {
			lh, _, p := leakyRun(t)
			lookupOutcome(t, p).Outcome.Output["blob"] = strings.Repeat("x", 2<<20)
			if err := p.Seal(); err != nil {
				t.Fatal(err)
			}
			out := replayed(t, lh, p)
			if out.Status != replay.ReplayMismatch {
				t.Errorf("replay = %+v, want a mismatch (the replay refuses the outcome)", out)
			}
			if b, _ := json.Marshal(out); len(b) > 8<<10 {
				t.Errorf("the replay result is %d bytes", len(b))
			}
		}},
		{"resealed packet with huge error details", func(t *testing.T) {
			lh, _, p := leakyRun(t)
			found := false
			for i := range p.Outcomes {
				if e := p.Outcomes[i].Error; e != nil {
					e.Details = map[string]any{"body": strings.Repeat("y", 2<<20) + leakCard}
					found = true
				}
			}
			if !found {
				t.Fatal("the packet records no failed attempt")
			}
			if err := p.Seal(); err != nil {
				t.Fatal(err)
			}
			out := replayed(t, lh, p)
			if b, _ := json.Marshal(out); len(b) > 8<<10 {
				t.Errorf("the replay result is %d bytes", len(b))
			}
		}},
		{"adapter reporting its raw outcome as already redacted", func(t *testing.T) {
			lh := newLeakHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
			scriptLeaks(lh.Harness)
			h := lh.Harness
			req, rc := refundRequest(t, 1200, true)
			lh2 := newLeakHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{
				Adapters: []gateway.Registration{
					{AdapterID: "adp_orders", Adapter: claimsRedacted{h.Adapter("adp_orders")}, Capabilities: map[string]gateway.Capability{"lookup": {}}},
					{AdapterID: "adp_policy", Adapter: h.Adapter("adp_policy"), Capabilities: map[string]gateway.Capability{"eval": {}}},
					{AdapterID: "adp_payments", Adapter: h.Adapter("adp_payments"), Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
				}}})
			res := lh2.Invoke(req, rc)
			contextostest.AssertStatus(t, res, decision.Decided)
			assertNoLeak(t, lh2.surfaces(t, res))
			p, _ := lh2.Replays.Get(ctx, res.ReplayPacketID)
			if out := replayed(t, lh2, p); out.Status != replay.ReplayEqual {
				t.Errorf("replay = %+v", out)
			}
		}},
		{"failed refund whose error carries a card number", func(t *testing.T) {
			lh := newLeakHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
			scriptDefaults(lh.Harness, "adp_payments")
			lh.Adapter("adp_payments").On("issue_refund").FailWith(gateway.NewToolError(gateway.CodeExecutionFailed, false,
				"card "+leakCard+" declined", map[string]any{"card": leakCard, "notify": leakEmail}))
			req, rc := refundRequest(t, 1200, true)
			res := lh.Invoke(req, rc)
			if res.Status == decision.Decided && res.Record.Outcome == "approved" {
				t.Fatalf("a failed refund decided %s", res.Record.Outcome)
			}
			assertNoLeak(t, lh.surfaces(t, res))
			p, _ := lh.Replays.Get(ctx, res.ReplayPacketID)
			if out := replayed(t, lh, p); out.Status != replay.ReplayEqual {
				t.Errorf("replay = %+v", out)
			}
		}},
		{"caller gone after a refund whose receipt carries a card number", func(t *testing.T) {
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			lh := newLeakHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200), approvedAgain()), nil)
			scriptDefaults(lh.Harness, "adp_payments")
			lh.Adapter("adp_payments").On("issue_refund").When(func(map[string]any) bool { cancel(); return true }).
				ReturnOutput(map[string]any{"transaction_id": "txn_q9", "card": leakCard}, "refund:txn_q9")
			req, rc := refundRequest(t, 1200, true)
			res, err := lh.Runtime.Invoke(cctx, req, rc)
			if err != nil || res.Status != decision.Escalated {
				t.Fatalf("Invoke = %+v, %v; want ESCALATED", res, err)
			}
			cp, err := loadState(ctx, lh.Checkpoints, res.RunID)
			if err != nil || cp.Stopped == "" {
				t.Fatalf("checkpoint = %+v, %v; want a stopped one", cp, err)
			}
			assertNoLeak(t, lh.surfaces(t, res))
			next, err := lh.Runtime.Resume(ctx, res.RunID, contextos.ResumeInput{})
			if err != nil {
				t.Fatal(err)
			}
			contextostest.AssertCalls(t, lh.Adapter("adp_payments"), "issue_refund", 1)
			assertNoLeak(t, lh.surfaces(t, next))
			p, _ := lh.Replays.Get(ctx, next.ReplayPacketID)
			if out := replayed(t, lh, p); out.Status != replay.ReplayEqual {
				t.Errorf("replay = %+v", out)
			}
		}},
		{"refund receipt over max_payload_bytes", func(t *testing.T) {
			lh := newLeakHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
			scriptDefaults(lh.Harness, "adp_payments")
			lh.Adapter("adp_payments").On("issue_refund").ReturnOutput(map[string]any{"receipt": strings.Repeat("r", 8192) + leakCard}, "refund:txn_q9")
			req, rc := refundRequest(t, 1200, true)
			rc.RunBudget.MaxPayloadBytes = 4096
			res := lh.Invoke(req, rc)
			var refund *gateway.ToolResultEnvelope
			for _, tr := range res.ToolResults {
				if tr.CapabilityID == "adp_payments.issue_refund" {
					refund = tr
				}
			}
			if refund == nil || refund.Status != gateway.StatusFailed || refund.Error == nil || !strings.Contains(refund.Error.Message, "max_payload_bytes") {
				t.Fatalf("refund result = %+v", refund)
			}
			if res.Status == decision.Decided && res.Record.Outcome == "approved" {
				t.Errorf("a refund whose outcome was refused decided %s", res.Record.Outcome)
			}
			surfaces := lh.surfaces(t, res)
			assertNoLeak(t, surfaces)
			for name, v := range surfaces {
				if b, _ := json.Marshal(v); strings.Contains(string(b), "rrrrrrrrrrrrrrrr") {
					t.Errorf("%s holds the oversized receipt", name)
				}
			}
			p, _ := lh.Replays.Get(ctx, res.ReplayPacketID)
			if out := replayed(t, lh, p); out.Status != replay.ReplayEqual {
				t.Errorf("replay = %+v", out)
			}
		}},
		{"delegated refund with an empty token_ref", func(t *testing.T) {
			h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)).RepeatLast(), nil)
			req, rc := refundRequest(t, 1200, true)
			rc.User.Delegation.TokenRef = ""
			res, err := h.Runtime.Invoke(ctx, req, rc)
			if err != nil {
				t.Fatal(err)
			}
			contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 0)
			if res.Status == decision.Decided && res.Record.Outcome == "approved" {
				t.Errorf("a refund without the delegation's token_ref decided %s", res.Record.Outcome)
			}
			blocked := false
			for _, tr := range res.ToolResults {
				if tr.CapabilityID == "adp_payments.issue_refund" && tr.Status == gateway.StatusBlocked && tr.Error != nil &&
					tr.Error.Code == gateway.CodePermissionDenied && strings.Contains(tr.Error.Message, "token_ref") {
					blocked = true
				}
			}
			if !blocked {
				t.Errorf("no refund result blocked for its token_ref: %v", resultStatuses(res))
			}
		}},
		{"adapter panicking with a card number", func(t *testing.T) {
			lh := newLeakHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
			scriptDefaults(lh.Harness, "adp_payments")
			req, rc := refundRequest(t, 1200, true)
			lh2 := newLeakHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{
				Adapters: []gateway.Registration{
					{AdapterID: "adp_orders", Adapter: lh.Adapter("adp_orders"), Capabilities: map[string]gateway.Capability{"lookup": {}}},
					{AdapterID: "adp_policy", Adapter: lh.Adapter("adp_policy"), Capabilities: map[string]gateway.Capability{"eval": {}}},
					{AdapterID: "adp_payments", Adapter: gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
						panic("card " + leakCard + " for " + leakEmail)
					}), Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
				}}})
			res := lh2.Invoke(req, rc)
			assertNoLeak(t, lh2.surfaces(t, res))
			p, _ := lh2.Replays.Get(ctx, res.ReplayPacketID)
			b, _ := json.Marshal(p.Outcomes)
			if !strings.Contains(string(b), `"panic":true`) {
				t.Errorf("the packet does not record the panic: %s", b)
			}
			if out := replayed(t, lh2, p); out.Status != replay.ReplayEqual {
				t.Errorf("replay = %+v", out)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
}

// claimsRedacted is an adapter that reports every attempt as already
// redacted (as replay's playback does) while its outcomes are raw.
type claimsRedacted struct{ gateway.Adapter }

func (claimsRedacted) RedactedAttempt(*gateway.Call) bool { return true }

// An attempt that times out (the adapter honours its context) and is
// retried replays equal: the recorder keeps the gateway's timeout, not the
// adapter's context error, and the attempt's context running out is not
// the caller going away (the replay retries as the live run did).
func TestTimedOutAttemptReplaysEqual(t *testing.T) {
	lh := newLeakHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
	scriptDefaults(lh.Harness, "")
	orders := gatewaytest.NewScriptedAdapter()
	orders.On("lookup").ReturnOutput(map[string]any{"order_id": "ord_881"}).Delay(time.Minute).
		ReturnOutput(map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200})
	lh2 := newLeakHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &contextostest.Options{Runtime: contextos.Options{
		Adapters: []gateway.Registration{
			{AdapterID: "adp_orders", Adapter: orders, Capabilities: map[string]gateway.Capability{"lookup": {Timeout: 20 * time.Millisecond, HonorsContext: true}}},
			{AdapterID: "adp_policy", Adapter: lh.Adapter("adp_policy"), Capabilities: map[string]gateway.Capability{"eval": {}}},
			{AdapterID: "adp_payments", Adapter: lh.Adapter("adp_payments"), Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
		}}})
	req, rc := refundRequest(t, 1200, true)
	res := lh2.Invoke(req, rc)
	contextostest.AssertStatus(t, res, decision.Decided)
	if a := res.ToolResults[0].Metadata.Attempts; a != 2 {
		t.Fatalf("the lookup took %d attempts, want 2 (a timeout, then the answer)", a)
	}
	p, err := lh2.Replays.Get(context.Background(), res.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	if e := p.Outcomes[0].Error; e == nil || e.Code != gateway.CodeTimeout || p.Outcomes[0].Canceled {
		t.Errorf("recorded first attempt %+v, want the gateway's timeout, not canceled", p.Outcomes[0])
	}
	if out := replayed(t, lh2, p); out.Status != replay.ReplayEqual {
		t.Errorf("replay = %+v", out)
	}
}
