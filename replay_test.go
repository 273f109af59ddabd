package contextos_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/schemas"
)

// approvedRun runs the 4200 refund through approval and returns its packet.
func approvedRun(t testing.TB, opts *contextostest.Options) (*contextostest.Harness, *replay.Packet) {
	t.Helper()
	h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), opts)
	req, rc := refundRequest(t, 4200, true)
	done := h.Approve(h.Invoke(req, rc), contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"})
	p, err := h.Replays.Get(context.Background(), done.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	return h, p
}

func TestReplayPacketValidatesAgainstSchema(t *testing.T) {
	_, p := approvedRun(t, nil)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas.Validate("replay-packet", b); err != nil {
		t.Fatal(err)
	}
	if p.SourceKind != replay.SourceDecisionRecord || p.SideEffectPolicy != replay.TranscriptOnly || len(p.PlannerOutput) != 2 || len(p.Resumes) != 1 {
		t.Errorf("packet = %+v", p)
	}
}

func TestReplayChangedToolResultIsMismatchAtThatStep(t *testing.T) {
	h, p := approvedRun(t, nil)
	// One byte of the recorded policy-eval result: true → "true".
	for i, o := range p.Outcomes {
		if o.CapabilityID == "adp_policy.eval" {
			b, _ := json.Marshal(o.Outcome.Output)
			b = []byte(strings.Replace(string(b), "true", `"t"`, 1))
			var out map[string]any
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
			p.Outcomes[i].Outcome.Output = out
		}
	}
	// Edited in place, the packet is tampered; sealed again (a packet
	// recorded with that result), it replays as a mismatch at that step.
	if res, err := h.Runtime.Replay(context.Background(), p); !errors.Is(err, replay.ErrTamper) || res.Status != replay.Invalid {
		t.Fatalf("an edited packet replays: %+v (%v)", res, err)
	}
	if err := p.Seal(); err != nil {
		t.Fatal(err)
	}
	res, err := h.Runtime.Replay(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != replay.ReplayMismatch || len(res.Diffs) == 0 || res.Diffs[0].Kind != replay.DiffToolTranscript {
		t.Fatalf("replay = %+v", res)
	}
	// Entries: lookup call, result (0, 1), eval call, result (2, 3).
	if res.Diffs[0].Step != 3 || !strings.Contains(res.Diffs[0].Detail, "adp_policy.eval") {
		t.Errorf("first difference = %+v, want transcript step 3 (adp_policy.eval)", res.Diffs[0])
	}
}

func TestReplayRefusesTamperedPackets(t *testing.T) {
	for name, tamper := range map[string]func(p *replay.Packet){
		"transcript result byte": func(p *replay.Packet) { p.Transcript[1].Result.Output["order_id"] = "ord_882" },
		"transcript entry dropped": func(p *replay.Packet) {
			p.Transcript = append(p.Transcript[:2:2], p.Transcript[4:]...)
		},
		"invoke envelope byte": func(p *replay.Packet) {
			p.Invoke = json.RawMessage(strings.Replace(string(p.Invoke), "4200", "4201", 1))
		},
		"decision record": func(p *replay.Packet) {
			p.Record = json.RawMessage(strings.Replace(string(p.Record), `"approved"`, `"denied"`, 1))
		},
	} {
		t.Run(name, func(t *testing.T) {
			h, p := approvedRun(t, nil)
			tamper(p)
			res, err := h.Runtime.Replay(context.Background(), p)
			if !errors.Is(err, replay.ErrTamper) || res == nil || res.Status != replay.Invalid || res.Diffs[0].Kind != replay.DiffTamper {
				t.Fatalf("Replay = %+v, %v", res, err)
			}
		})
	}
}

func TestReplayNeverCallsLiveAdapters(t *testing.T) {
	var live atomic.Bool
	live.Store(true)
	guard := func(inner gateway.Adapter) gateway.Adapter {
		return gateway.AdapterFunc(func(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
			if !live.Load() {
				t.Errorf("replay called the live adapter for %s", c.Envelope.CapabilityID)
			}
			return inner.Call(ctx, c)
		})
	}
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), nil)
	scriptDefaults(h, "")
	h2 := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), &contextostest.Options{Runtime: contextos.Options{
		Evidence: evidence(t), ReplaySampleRate: 1,
		Adapters: []gateway.Registration{
			{AdapterID: "adp_orders", Adapter: guard(h.Adapter("adp_orders")), Capabilities: map[string]gateway.Capability{"lookup": {}}},
			{AdapterID: "adp_policy", Adapter: guard(h.Adapter("adp_policy")), Capabilities: map[string]gateway.Capability{"eval": {}}},
			{AdapterID: "adp_payments", Adapter: guard(h.Adapter("adp_payments")), Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
		}}})
	req, rc := refundRequest(t, 4200, true)
	done := h2.Approve(h2.Invoke(req, rc), contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"})
	live.Store(false)
	contextostest.AssertReplayEqual(t, h2.Replay(done))
	// A packet whose planner asks for a call that was never recorded:
	// a mismatch, and still no live call.
	p, _ := h2.Replays.Get(context.Background(), done.ReplayPacketID)
	var plan contextos.Plan
	json.Unmarshal(p.PlannerOutput[0], &plan)
	plan.Steps[0].Args["order_id"] = "ord_999"
	p.PlannerOutput[0], _ = json.Marshal(&plan)
	if err := p.Seal(); err != nil {
		t.Fatal(err)
	}
	res, err := h2.Runtime.Replay(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != replay.ReplayMismatch || res.Diffs[0].Kind != replay.DiffToolTranscript || res.Diffs[0].Step != 0 {
		t.Errorf("replay = %+v", res)
	}
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
}

func TestCaptureAfterTheFactForACorrection(t *testing.T) {
	// Sampling off: a DECIDED run captures nothing by itself.
	h := contextostest.New(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), [][]byte{readTestdata(t, "ctxpack.support-1.0.0.json")},
		&contextostest.Options{Runtime: contextos.Options{Evidence: evidence(t)}, Scopes: map[string][]string{"adp_payments.issue_refund": {"payments.refund"}}})
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	if res.ReplayPacketID != "" {
		t.Fatalf("a DECIDED run was captured with sampling at 0 (%s)", res.ReplayPacketID)
	}
	ctx := context.Background()
	if _, err := h.Runtime.Capture(ctx, res.RunID, "bogus"); !errors.Is(err, contextos.ErrConfig) {
		t.Errorf("bad kind: %v", err)
	}
	p, err := h.Runtime.Capture(ctx, res.RunID, replay.SourceOperatorCorrection)
	if err != nil {
		t.Fatal(err)
	}
	if p.SourceKind != replay.SourceOperatorCorrection || p.SourceRef != res.Record.RecordID || p.CompiledContextHash != res.Compiled.Hash() {
		t.Errorf("packet = %+v", p)
	}
	out, err := h.Runtime.Replay(ctx, p)
	if err != nil || out.Status != replay.ReplayEqual {
		t.Errorf("replay of the captured run = %+v, %v", out, err)
	}
	if _, err := h.Replays.Get(ctx, p.ReplayPacketID); err != nil {
		t.Errorf("the packet was not stored: %v", err)
	}
}

func TestReplaySamplingIsByRunID(t *testing.T) {
	// At rate 0.5 about half of the run ids are captured (by a hash of the
	// run id, so a replica decides the same way for the same run).
	captured := 0
	for i := range 40 {
		h := contextostest.New(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), [][]byte{readTestdata(t, "ctxpack.support-1.0.0.json")},
			&contextostest.Options{Runtime: contextos.Options{Evidence: evidence(t), ReplaySampleRate: 0.5}, Scopes: map[string][]string{"adp_payments.issue_refund": {"payments.refund"}}})
		scriptDefaults(h, "")
		req, rc := refundRequest(t, 1200, true)
		rc.RunID = "run_sample_" + strconv.Itoa(i)
		if h.Invoke(req, rc).ReplayPacketID != "" {
			captured++
		}
	}
	if captured < 8 || captured > 32 {
		t.Errorf("captured %d of 40 at rate 0.5", captured)
	}
}
