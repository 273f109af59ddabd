package contextos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/schemas"
)

// The replay corpus (issue 13, Temporal's replayer habit): packets recorded
// from the runtime, checked in under replay/testdata/corpus, that every
// later change must keep replaying as recorded. See the README.md there.
//
//	go test -run TestReplayCorpus .                  # replay every packet
//	go test -run TestReplayCorpus -update-corpus .   # record them again

var updateCorpus = flag.Bool("update-corpus", false, "record the replay corpus in replay/testdata/corpus again")

const corpusDir = "replay/testdata/corpus"

// TestReplayCorpus replays every packet of the corpus (its subdirectories
// included, where older recordings are kept): good-* replay equal, bad-* are
// refused as tampered, mismatch-* replay as mismatches.
func TestReplayCorpus(t *testing.T) {
	if *updateCorpus {
		files := recordCorpus(t)
		if err := os.MkdirAll(corpusDir, 0o755); err != nil {
			t.Fatal(err)
		}
		old, _ := filepath.Glob(filepath.Join(corpusDir, "*.json"))
		for _, f := range old {
			if _, keep := files[filepath.Base(f)]; !keep {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(corpusDir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("recorded %d packets in %s", len(files), corpusDir)
	}
	// The pack the packets pin, by content hash: the harness signs the
	// testdata pack with its fixed key, as when they were recorded.
	h := bareHarness(t, contextostest.NewPlanner(), nil)
	counts := map[string]int{}
	err := filepath.WalkDir(corpusDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		name := d.Name()
		kind, _, _ := strings.Cut(name, "-")
		counts[kind]++
		t.Run(strings.TrimPrefix(path, corpusDir+"/"), func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var p replay.Packet
			if err := json.Unmarshal(b, &p); err != nil {
				t.Fatalf("%s does not decode: %v", name, err)
			}
			out, err := h.Runtime.Replay(context.Background(), &p)
			switch kind {
			case "good":
				if err != nil || out.Status != replay.ReplayEqual {
					t.Fatalf("replay = %+v, %v; want replay_equal", out, err)
				}
				if err := schemas.Validate("replay-packet", b); err != nil {
					t.Errorf("not a replay-packet.v1: %v", err)
				}
			case "bad":
				if !errors.Is(err, replay.ErrTamper) || out == nil || out.Status != replay.Invalid {
					t.Fatalf("replay = %+v, %v; want it refused as tampered (replay.ErrTamper)", out, err)
				}
			case "mismatch":
				if err != nil || out.Status != replay.ReplayMismatch || len(out.Diffs) == 0 {
					t.Fatalf("replay = %+v, %v; want replay_mismatch", out, err)
				}
			default:
				t.Fatalf("%s: corpus files are named good-*, bad-* or mismatch-*", name)
			}
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if counts["good"] == 0 || counts["bad"] == 0 || counts["mismatch"] == 0 {
		t.Fatalf("the corpus in %s is missing a kind of packet: %v", corpusDir, counts)
	}
}

// TestReplayCorpusIsReproducible records the corpus again in memory and
// requires the checked-in files to be byte-identical, so a change in what
// the runtime records is noticed (and the corpus recorded again on
// purpose, keeping the old packets; see the README).
func TestReplayCorpusIsReproducible(t *testing.T) {
	if *updateCorpus {
		t.Skip("the corpus is being recorded")
	}
	files := recordCorpus(t)
	onDisk, _ := filepath.Glob(filepath.Join(corpusDir, "*.json"))
	for _, f := range onDisk {
		if _, ok := files[filepath.Base(f)]; !ok {
			t.Errorf("%s is checked in but no longer recorded (go test -run TestReplayCorpus -update-corpus .)", f)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		b, err := os.ReadFile(filepath.Join(corpusDir, name))
		if err != nil {
			t.Errorf("%s is recorded but not checked in: %v", name, err)
			continue
		}
		if !bytes.Equal(b, files[name]) {
			t.Errorf("%s: recording it again gives other bytes: the runtime records differently now (see %s/README.md)", name, corpusDir)
		}
	}
}

// corpusRun is one recorded run of the corpus.
type corpusRun struct {
	name string
	// want is the status and outcome the run ends with ("" for none).
	want string
	run  func(t *testing.T) (*contextostest.Harness, *contextos.Result)
}

// recordCorpus runs the corpus's runs and derives its bad and mismatch
// packets, and returns every file's bytes by name.
func recordCorpus(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	packets := map[string]*replay.Packet{}
	for _, c := range corpusRuns() {
		h, res := c.run(t)
		if got := strings.TrimSpace(string(res.Status) + " " + res.Record.Outcome); got != c.want {
			t.Fatalf("%s ended %s, want %s (%s)", c.name, got, c.want, res.Record.Rationale.Summary)
		}
		if res.ReplayPacketID == "" {
			t.Fatalf("%s: no packet captured (status %s)", c.name, res.Status)
		}
		p, err := h.Replays.Get(context.Background(), res.ReplayPacketID)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		packets[c.name] = p
		files["good-"+c.name+".json"] = encodePacket(t, p)
	}
	base := packets["decided-approved-1200"]
	paused := packets["paused-4200-approved"]
	for name, edit := range corpusTampers() {
		files["bad-"+name+".json"] = encodePacket(t, edited(t, base, paused, name, edit))
	}
	for name, edit := range corpusMismatches() {
		p := edited(t, base, paused, name, edit)
		if err := p.Seal(); err != nil {
			t.Fatalf("mismatch %s: %v", name, err)
		}
		files["mismatch-"+name+".json"] = encodePacket(t, p)
	}
	return files
}

type packetEdit struct {
	paused bool // edit the paused-then-approved packet (else the 1200 one)
	edit   func(t *testing.T, p *replay.Packet)
}

// edited is a copy of a recorded packet with edit applied.
func edited(t *testing.T, base, paused *replay.Packet, name string, e packetEdit) *replay.Packet {
	t.Helper()
	src := base
	if e.paused {
		src = paused
	}
	var p replay.Packet
	if err := json.Unmarshal(encodePacket(t, src), &p); err != nil {
		t.Fatal(err)
	}
	e.edit(t, &p)
	return &p
}

func encodePacket(t *testing.T, p *replay.Packet) []byte {
	t.Helper()
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// corpusHarness is the corpus's harness: the testdata pack, the fixed
// clock, retries without waiting, every run captured.
func corpusHarness(t *testing.T, planner contextos.Planner, o *contextostest.Options) *contextostest.Harness {
	t.Helper()
	if o == nil {
		o = &contextostest.Options{}
	}
	o.Runtime.Gateway.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	return bareHarness(t, planner, o)
}

func corpusRuns() []corpusRun {
	invoke := func(t *testing.T, h *contextostest.Harness, name string, amount int, verified bool, edit func(ctx map[string]any)) *contextos.Result {
		t.Helper()
		req, rc := refundRequest(t, amount, verified)
		rc.RunID = "run_corpus_" + strings.ReplaceAll(name, "-", "_")
		if edit != nil {
			edit(req.Input.Context)
		}
		return h.Invoke(req, rc)
	}
	simple := func(name, want string, amount int, verified bool, plans []*contextos.Plan, script func(h *contextostest.Harness)) corpusRun {
		return corpusRun{name: name, want: want, run: func(t *testing.T) (*contextostest.Harness, *contextos.Result) {
			h := corpusHarness(t, contextostest.NewPlanner(plans...), nil)
			skip := ""
			if script != nil {
				skip = "adp_payments"
				script(h)
			}
			scriptDefaults(h, skip)
			return h, invoke(t, h, name, amount, verified, nil)
		}}
	}
	return []corpusRun{
		simple("decided-approved-1200", "DECIDED approved", 1200, true, []*contextos.Plan{lookupPlan(), refundPlan(1200)}, nil),
		{name: "paused-4200-approved", want: "DECIDED approved", run: func(t *testing.T) (*contextostest.Harness, *contextos.Result) {
			h := corpusHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), nil)
			scriptDefaults(h, "")
			res := invoke(t, h, "paused-4200-approved", 4200, true, nil)
			contextostest.AssertPending(t, res, "GATE_FINANCE_APPROVAL")
			return h, h.Approve(res, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"})
		}},
		{name: "paused-4200-approval-denied", want: "DECIDED denied", run: func(t *testing.T) (*contextostest.Harness, *contextos.Result) {
			h := corpusHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200), deniedPlan()), nil)
			scriptDefaults(h, "")
			res := invoke(t, h, "paused-4200-approval-denied", 4200, true, nil)
			a := contextostest.Approval(res.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
			a.Denied = true
			out, err := h.Runtime.Resume(context.Background(), res.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
			if err != nil {
				t.Fatal(err)
			}
			return h, out
		}},
		simple("denied-identity-not-verified", "DECIDED denied", 1200, false, []*contextos.Plan{lookupPlan(), refundPlan(1200), deniedPlan()}, nil),
		{name: "rejected-guardrail-before-planning", want: "REJECTED", run: func(t *testing.T) (*contextostest.Harness, *contextos.Result) {
			h := corpusHarness(t, contextostest.NewPlanner(lookupPlan()), nil)
			scriptDefaults(h, "")
			return h, invoke(t, h, "rejected-guardrail-before-planning", 1200, true, func(c map[string]any) {
				c["signals"] = []any{"refund_without_identity"}
			})
		}},
		{name: "escalated-guardrail-from-tool", want: "ESCALATED", run: func(t *testing.T) (*contextostest.Harness, *contextos.Result) {
			h := corpusHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), nil)
			scriptDefaults(h, "adp_orders")
			h.Adapter("adp_orders").On("lookup").Return(&gateway.Outcome{Output: map[string]any{"order_id": "ord_881"}, Signals: []string{"fraud_signal_high"}})
			return h, invoke(t, h, "escalated-guardrail-from-tool", 1200, true, nil)
		}},
		simple("escalated-failed-refund", "ESCALATED", 1200, true, []*contextos.Plan{lookupPlan(), refundPlan(1200), approvedAgain(), approvedAgain(), approvedAgain()},
			func(h *contextostest.Harness) { h.Adapter("adp_payments").On("issue_refund").Fail("bank unavailable") }),
		simple("denied-after-failed-refund", "DECIDED denied", 1200, true, []*contextos.Plan{lookupPlan(), refundPlan(1200), approvedAgain(), deniedPlan()},
			func(h *contextostest.Harness) { h.Adapter("adp_payments").On("issue_refund").Fail("bank unavailable") }),
		simple("decided-after-retries", "DECIDED approved", 1200, true, []*contextos.Plan{lookupPlan(), refundPlan(1200)},
			func(h *contextostest.Harness) {
				h.Adapter("adp_payments").On("issue_refund").FailRetryable("bank busy").ReturnOutput(map[string]any{"transaction_id": "txn_q9"}, "refund:txn_q9")
			}),
		simple("escalated-adapter-panic", "ESCALATED", 1200, true, []*contextos.Plan{lookupPlan(), refundPlan(1200)},
			func(h *contextostest.Harness) { h.Adapter("adp_payments").On("issue_refund").Panic() }),
		simple("denied-after-rejected-arguments", "DECIDED denied", 1200, true, []*contextos.Plan{lookupPlan(), refundPlan(0), deniedPlan()}, nil),
		simple("escalated-planner-out-of-turns", "ESCALATED", 1200, true, []*contextos.Plan{lookupPlan()}, nil),
		{name: "escalated-canceled-after-refund", want: "ESCALATED", run: func(t *testing.T) (*contextostest.Harness, *contextos.Result) {
			h, res, _ := corpusCanceled(t, invoke, "escalated-canceled-after-refund")
			return h, res
		}},
		{name: "canceled-then-resumed", want: "DECIDED approved", run: func(t *testing.T) (*contextostest.Harness, *contextos.Result) {
			h, res, _ := corpusCanceled(t, invoke, "canceled-then-resumed")
			done, err := h.Runtime.Resume(context.Background(), res.RunID, contextos.ResumeInput{})
			if err != nil {
				t.Fatal(err)
			}
			return h, done
		}},
		{name: "escalated-deadline-in-planner", want: "ESCALATED", run: func(t *testing.T) (*contextostest.Harness, *contextos.Result) {
			ctx := newCancelCtx("deadline")
			planner := contextostest.NewPlanner(lookupPlan()).ThenFunc(func(*contextos.PlanRequest) (*contextos.Plan, error) {
				ctx.fire()
				return refundPlan(1200), nil
			})
			h := corpusHarness(t, planner, nil)
			scriptDefaults(h, "")
			req, rc := refundRequest(t, 1200, true)
			rc.RunID = "run_corpus_escalated_deadline_in_planner"
			res, err := h.Runtime.Invoke(ctx, req, rc)
			if err != nil {
				t.Fatal(err)
			}
			return h, res
		}},
		{name: "decided-with-memory", want: "DECIDED approved", run: func(t *testing.T) (*contextostest.Harness, *contextos.Result) {
			plan := refundPlan(1200)
			plan.Memory = []contextos.MemoryProposal{{WriteClass: "preference", Content: "prefers app", Confidence: 0.9}}
			h := corpusHarness(t, contextostest.NewPlanner(lookupPlan(), plan),
				&contextostest.Options{Runtime: contextos.Options{Memory: newRawMemory(propertyMemory(t)...)}})
			scriptDefaults(h, "")
			return h, invoke(t, h, "decided-with-memory", 1200, true, nil)
		}},
		{name: "denied-empty-evidence", want: "DECIDED denied", run: func(t *testing.T) (*contextostest.Harness, *contextos.Result) {
			h := corpusHarness(t, contextostest.NewPlanner(lookupPlan(), deniedPlan()),
				&contextostest.Options{Runtime: contextos.Options{Evidence: compiler.StaticEvidence{}}})
			scriptDefaults(h, "")
			return h, invoke(t, h, "denied-empty-evidence", 1200, false, nil)
		}},
		// long_running (issue 15): IN_FLIGHT checkpoints, a pause of 90
		// minutes on the injected clock (within the finance gate's
		// two-hour request TTL), and the CLOSED records.
		{name: "long-running-paused-4200-approved", want: "DECIDED approved", run: func(t *testing.T) (*contextostest.Harness, *contextos.Result) {
			return corpusLongRun(t, "long-running-paused-4200-approved", 90*time.Minute)
		}},
		// A long_running session whose approval comes after
		// max_session_duration_ms: ESCALATED, the refund never made.
		{name: "long-running-session-expired", want: "ESCALATED", run: func(t *testing.T) (*contextostest.Harness, *contextos.Result) {
			return corpusLongRun(t, "long-running-session-expired", 5*time.Hour)
		}},
	}
}

// corpusLongRun is a long_running 4200 refund whose approval comes after
// wait, in a session of four hours.
func corpusLongRun(t *testing.T, name string, wait time.Duration) (*contextostest.Harness, *contextos.Result) {
	t.Helper()
	clock := newFakeClock()
	h := corpusHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), &contextostest.Options{Now: clock.Now})
	scriptDefaults(h, "")
	req, rc := longRequest(t, 4200, 4*time.Hour)
	rc.RunID = "run_corpus_" + strings.ReplaceAll(name, "-", "_")
	res := h.Invoke(req, rc)
	contextostest.AssertPending(t, res, "GATE_FINANCE_APPROVAL")
	clock.Advance(wait)
	a := contextostest.Approval(res.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, clock.Now())
	done, err := h.Runtime.Resume(context.Background(), res.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
	if err != nil {
		t.Fatal(err)
	}
	return h, done
}

// corpusCanceled runs a 1200 refund whose caller goes away while the
// payment service executes it.
func corpusCanceled(t *testing.T, invoke func(*testing.T, *contextostest.Harness, string, int, bool, func(map[string]any)) *contextos.Result, name string) (*contextostest.Harness, *contextos.Result, error) {
	t.Helper()
	ctx := newCancelCtx("cancel")
	h := corpusHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200), approvedAgain()), nil)
	scriptDefaults(h, "adp_payments")
	h.Adapter("adp_payments").On("issue_refund").When(func(map[string]any) bool { ctx.fire(); return true }).
		ReturnOutput(map[string]any{"transaction_id": "txn_q9"}, "refund:txn_q9")
	req, rc := refundRequest(t, 1200, true)
	rc.RunID = "run_corpus_" + strings.ReplaceAll(name, "-", "_")
	res, err := h.Runtime.Invoke(ctx, req, rc)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != decision.Escalated {
		t.Fatalf("%s: status %s", name, res.Status)
	}
	return h, res, nil
}

// corpusTampers edit a packet without sealing it again: each must be
// refused as tampered.
func corpusTampers() map[string]packetEdit {
	return map[string]packetEdit{
		"expected-status": {edit: func(t *testing.T, p *replay.Packet) { p.Expected.Status = string(decision.Escalated) }},
		"source-ref":      {edit: func(t *testing.T, p *replay.Packet) { p.SourceRef += "0" }},
		"trace-id":        {edit: func(t *testing.T, p *replay.Packet) { p.TraceID = "4bf92f3577b34da6a3ce929d0e0e4737" }},
		"session-id":      {edit: func(t *testing.T, p *replay.Packet) { p.SessionID = "sess_other" }},
		"record-outcome":  {edit: func(t *testing.T, p *replay.Packet) { p.Record = replaceOnce(t, p.Record, `"approved"`, `"denied"`) }},
		"record-rehashed": {edit: func(t *testing.T, p *replay.Packet) { recordOutcome(t, p, "denied") }},
		"clock-reading": {edit: func(t *testing.T, p *replay.Packet) {
			p.Clock[len(p.Clock)-1] = p.Clock[len(p.Clock)-1].Add(time.Second)
		}},
		"planner-output": {edit: func(t *testing.T, p *replay.Packet) {
			p.PlannerOutput[1] = replaceOnce(t, p.PlannerOutput[1], "1200", "1300")
		}},
		"adapter-outcome":  {edit: func(t *testing.T, p *replay.Packet) { p.Outcomes[2].Outcome.Output["transaction_id"] = "txn_other" }},
		"invoke-envelope":  {edit: func(t *testing.T, p *replay.Packet) { p.Invoke = replaceOnce(t, p.Invoke, "1200", "1201") }},
		"transcript-entry": {edit: func(t *testing.T, p *replay.Packet) { p.Transcript = slices.Delete(p.Transcript, 2, 4) }},
		"pack-hash": {edit: func(t *testing.T, p *replay.Packet) {
			for k := range p.PackHashes {
				p.PackHashes[k] = "sha256:" + strings.Repeat("0", 64)
			}
		}},
		"resume-approver": {paused: true, edit: func(t *testing.T, p *replay.Packet) { p.Resumes[0].Approvals[0].Approver = "user_other" }},
		"packet-hash":     {edit: func(t *testing.T, p *replay.Packet) { p.PacketHash = "sha256:" + strings.Repeat("0", 64) }},
		"context-ledger":  {edit: func(t *testing.T, p *replay.Packet) { p.Ledger.Packs[0].Overlay = corpusOverlay() }},
	}
}

// corpusOverlay is an environment overlay the corpus's runs did not have.
func corpusOverlay() *pack.AppliedOverlay {
	return &pack.AppliedOverlay{OverlayID: "ov_prod", Environment: "prod", Hash: "sha256:" + strings.Repeat("0", 64)}
}

// corpusMismatches edit a packet and seal it again, as if it had been
// recorded so: each must replay as a mismatch.
func corpusMismatches() map[string]packetEdit {
	return map[string]packetEdit{
		"record-outcome": {edit: func(t *testing.T, p *replay.Packet) { recordOutcome(t, p, "denied") }},
		"adapter-outcome": {edit: func(t *testing.T, p *replay.Packet) {
			p.Outcomes[1].Outcome.Output["eligible"] = "t"
		}},
		"planner-output": {edit: func(t *testing.T, p *replay.Packet) {
			p.PlannerOutput[0] = replaceOnce(t, p.PlannerOutput[0], "ord_881", "ord_999")
		}},
		"pack-hash": {edit: func(t *testing.T, p *replay.Packet) {
			for k := range p.PackHashes {
				p.PackHashes[k] = "sha256:" + strings.Repeat("0", 64)
			}
		}},
		"resume-approver": {paused: true, edit: func(t *testing.T, p *replay.Packet) { p.Resumes[0].Approvals[0].Approver = "usr_771" }},
		// The run recorded as if under a prod overlay the replaying
		// runtime does not have: compiled_context_hash is the same, the
		// context ledger is not.
		"context-ledger-overlay": {edit: func(t *testing.T, p *replay.Packet) {
			p.Ledger.Packs[0].Overlay = corpusOverlay()
			h, err := compiler.LedgerHash(p.Ledger)
			if err != nil {
				t.Fatal(err)
			}
			p.Ledger.LedgerHash = h
			// ... and its record names that ledger, as it would have.
			editRecord(t, p, func(rec *decision.Record) { rec.Replay.LedgerHash = h })
		}},
	}
}

func replaceOnce(t *testing.T, b json.RawMessage, old, new string) json.RawMessage {
	t.Helper()
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%q not found", old)
	}
	return json.RawMessage(bytes.Replace(b, []byte(old), []byte(new), 1))
}

// recordOutcome changes the packet's record's outcome and its hash in
// expected (and the record's own copies of it), as a tamperer who knows the
// record hash would.
func recordOutcome(t *testing.T, p *replay.Packet, outcome string) {
	t.Helper()
	editRecord(t, p, func(rec *decision.Record) { rec.Outcome = outcome })
}

// editRecord changes the packet's record with edit and rehashes it in
// expected (and the record's own copies of the hash).
func editRecord(t *testing.T, p *replay.Packet, edit func(*decision.Record)) {
	t.Helper()
	var rec decision.Record
	if err := json.Unmarshal(p.Record, &rec); err != nil {
		t.Fatal(err)
	}
	edit(&rec)
	h, err := decision.Hash(&rec)
	if err != nil {
		t.Fatal(err)
	}
	if rec.RecordHash != "" {
		rec.RecordHash = h
	}
	if rec.Replay != nil && rec.Replay.RecordHash != "" {
		rec.Replay.RecordHash = h
	}
	b, err := json.Marshal(&rec)
	if err != nil {
		t.Fatal(err)
	}
	p.Record, p.Expected.DecisionRecordHash = b, h
}
