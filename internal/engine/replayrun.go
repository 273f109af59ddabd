package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/playback"
	"github.com/contextos/contextos/internal/problem"
	"github.com/contextos/contextos/internal/sensitive"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// ReplayRecord is contextos.Runtime.ReplayRecord: Replay of the packet a
// stored record names, held to that record.
func (rt *Runtime) ReplayRecord(ctx context.Context, recordID string) (*replay.Report, error) {
	rec, err := rt.opts.Decisions.Get(ctx, recordID)
	if err != nil {
		return nil, err
	}
	// The store answers for the id asked: a record under another id (a
	// host store's row keyed wrongly) is not recordID's decision, however
	// genuine it and its packet are.
	if rec.RecordID != recordID {
		return nil, fmt.Errorf("%w: the store's record %s is another record (%s)", replay.ErrTamper, problem.Clip(recordID), problem.Clip(rec.RecordID))
	}
	if rec.Replay == nil || rec.Replay.ReplayPacketID == "" {
		return nil, fmt.Errorf("%w: record %s names no replay packet", ErrNotFound, problem.Clip(rec.RecordID))
	}
	p, err := rt.opts.Replays.Get(ctx, rec.Replay.ReplayPacketID)
	if err != nil {
		return nil, err
	}
	if err := p.CheckRecord(rec); err != nil {
		return nil, err
	}
	return rt.Replay(ctx, p)
}

// Replay re-runs a captured packet offline through the same loop, policy,
// gateway and critic code as a live run: the planner's recorded outputs
// stand in for the model, a playback adapter serves the recorded adapter
// outcomes in place of every registered adapter (a call with no recorded
// outcome is a mismatch, never a live call), the clock serves the recorded
// readings, evidence and memory are the pinned items, and every store is
// fresh and in memory. Packs are resolved from rt's registry for replay
// (deprecated and archived versions allowed) and must have the pinned
// content hashes.
//
// The result is replay_equal when the compiled context hash, the context
// ledger (when the packet pins one: its ledger_hash, which covers the
// environment overlay applied to each pack and the environment), the tool
// transcript and the rebuilt DecisionRecord (its content, byte for byte)
// match the packet; otherwise replay_mismatch with typed differences naming
// the first step that diverged. A packet whose invoke envelope does not
// match its hash or whose transcript chain is broken is refused: the
// result is invalid with a tamper difference and the error wraps
// replay.ErrTamper. An error without a result means the packet could not
// be replayed at all.
//
// Each replay counts in the contextos.replays metric by its status (its
// replay_equal share is the replay determinism rate).
func (rt *Runtime) Replay(ctx context.Context, p *replay.Packet) (report *replay.Report, err error) {
	defer func() { rt.observeReplay(ctx, p, report) }()
	if err := p.CheckIntegrity(); err != nil {
		if errors.Is(err, replay.ErrTamper) {
			return &replay.Report{Status: replay.Invalid, Diffs: []replay.Diff{{Kind: replay.DiffTamper, Step: -1, Detail: err.Error()}}}, err
		}
		return nil, err
	}
	req, err := runcontext.DecodeInvokeRequest(p.Invoke)
	if err != nil {
		return nil, fmt.Errorf("%w: invoke envelope: %w", replay.ErrInvalid, err)
	}
	var rc runcontext.RunContext
	if err := json.Unmarshal(p.RunContext, &rc); err != nil {
		return nil, fmt.Errorf("%w: run context: %w", replay.ErrInvalid, err)
	}
	out := &replay.Report{Status: replay.ReplayEqual, Diffs: []replay.Diff{}}
	for _, ref := range p.PackRefs {
		res, err := rt.packs.ResolveString(ctx, ref, pack.UseReplay)
		if err != nil {
			return nil, err
		}
		if want := p.PackHashes[ref]; res.ContentHash != want {
			out.Diffs = append(out.Diffs, replay.Diff{Kind: replay.DiffCompiledContext, Step: -1,
				Detail: fmt.Sprintf("pack %s has content hash %s in the registry, the packet pins %s", ref, res.ContentHash, want)})
		}
	}
	planner := &recordedPlanner{outputs: p.PlannerOutput, errs: map[int]replay.PlannerError{}, live: rt.planner}
	for _, e := range p.PlannerErrors {
		planner.errs[e.Call] = e
	}
	pb := playback.NewPlayback(p.Outcomes)
	rp, err := rt.replayRuntime(p, planner, pb)
	if err != nil {
		return nil, err
	}

	// A run taken over stops where its runtime died (the takeover point
	// the takeover continued from), and the replay takes it over there.
	rp.replayed.stopAt = takeoverPoint(p, 0)
	res, err := rp.Invoke(ctx, req, &rc)
	for i := 0; i < len(p.Resumes); i++ {
		rs := p.Resumes[i]
		if rs.Takeover == nil && err != nil {
			break
		}
		if rs.Takeover != nil {
			if !errors.Is(err, errReplayStopped) {
				if err == nil {
					out.Diffs = append(out.Diffs, replay.Diff{Kind: replay.DiffDecision, Step: -1,
						Detail: fmt.Sprintf("the replay ended %s before the point the packet's run was taken over at", res.Status)})
				}
				break
			}
			if d := rp.takeRecordedEntries(ctx, rc.RunID, p, rs.Takeover); d != nil {
				out.Diffs, err = append(out.Diffs, *d), nil
				break
			}
		}
		rp.replayed.stopAt, rp.replayed.spent = takeoverPoint(p, i+1), nil
		if rs.Takeover != nil {
			rp.replayed.spent = rs.Takeover.Spent
		}
		next, rerr := rp.Resume(ctx, rc.RunID, ResumeInput{Approvals: rs.Approvals, Budget: rs.Budget, Takeover: rs.Takeover != nil})
		if errors.Is(rerr, ErrNotResumable) || errors.Is(rerr, ErrResumeInput) {
			ended := "paused or stopped"
			if res != nil {
				ended = string(res.Status)
			}
			out.Diffs = append(out.Diffs, replay.Diff{Kind: replay.DiffDecision, Step: -1,
				Detail: fmt.Sprintf("the replay ended %s where the packet's run was resumed", ended)})
			err = nil
			break
		}
		res, err = next, rerr
	}
	if errors.Is(err, errReplayStopped) {
		err = fmt.Errorf("%w: it names a takeover point the replay stopped at without a takeover", replay.ErrInvalid)
	}
	if err != nil {
		return nil, fmt.Errorf("replay: re-run failed: %w", err)
	}
	if res == nil {
		// The replay stopped before the takeover point (a diff says so).
		out.Status = replay.ReplayMismatch
		return out, nil
	}
	if res.Compiled.Hash() != p.CompiledContextHash {
		out.Diffs = append(out.Diffs, replay.Diff{Kind: replay.DiffCompiledContext, Step: -1,
			Detail: fmt.Sprintf("compiled context hash %s, the packet pins %s", res.Compiled.Hash(), p.CompiledContextHash)})
	}
	if p.Ledger != nil {
		out.Diffs = append(out.Diffs, compareLedgers(p.Ledger, res.Compiled)...)
	}
	got, err := rp.gw.Transcript().(gateway.TranscriptReader).RunEntries(ctx, res.RunID)
	if err != nil {
		return nil, err
	}
	if d := playback.CompareTranscripts(p.Transcript, got); d != nil {
		out.Diffs = append(out.Diffs, *d)
	} else if d := compareEntryHashes(p.Transcript, got); d != nil {
		out.Diffs = append(out.Diffs, *d)
	}
	if f := rp.replayed.failures; f != nil {
		if d := f.diff(); d != nil {
			out.Diffs = append(out.Diffs, *d)
		}
	}
	for _, u := range pb.Unserved() {
		out.Diffs = append(out.Diffs, replay.Diff{Kind: replay.DiffToolTranscript, Step: -1, Detail: "call with no recorded outcome (not made): " + u})
	}
	out.Diffs = append(out.Diffs, compareRecords(p.Record, res.Record)...)
	if len(out.Diffs) > 0 {
		out.Status = replay.ReplayMismatch
	}
	return out, nil
}

// takeoverPoint is the takeover point the replay's run stops at before
// the packet's i-th resume: that resume's, when it is a takeover (0:
// none).
func takeoverPoint(p *replay.Packet, i int) int {
	if i < len(p.Resumes) && p.Resumes[i].Takeover != nil {
		return p.Resumes[i].Takeover.Point
	}
	return 0
}

// takeRecordedEntries appends to the replay's transcript the entries the
// packet's run recorded between the takeover point the replay stopped
// at and its takeover (a runtime that died recorded them), as recorded:
// the replay goes on from their chain, as the takeover did. The replay
// must have recorded no more than the packet's run had then.
func (rt *Runtime) takeRecordedEntries(ctx context.Context, runID string, p *replay.Packet, t *replay.Takeover) *replay.Diff {
	have, err := rt.transcripts.RunEntries(ctx, runID)
	if err != nil {
		return &replay.Diff{Kind: replay.DiffToolTranscript, Step: -1, Detail: "the replay's transcript cannot be read: " + err.Error()}
	}
	n := len(have)
	if n > t.TranscriptEntries || t.TranscriptEntries > len(p.Transcript) {
		return &replay.Diff{Kind: replay.DiffToolTranscript, Step: n,
			Detail: fmt.Sprintf("the replay recorded %d transcript entries up to the takeover point; the packet's run had %d when it was taken over, of %d", n, t.TranscriptEntries, len(p.Transcript))}
	}
	for _, e := range p.Transcript[n:t.TranscriptEntries] {
		if err := rt.transcripts.Append(ctx, e); err != nil {
			return &replay.Diff{Kind: replay.DiffToolTranscript, Step: e.Seq, Detail: "the replay's transcript refused a recorded entry: " + err.Error()}
		}
	}
	return nil
}

// replayRuntime is the runtime a replay of p runs on, in ModeReplay: rt's
// options, with
// the recorded planner, the playback adapter in place of every registered
// adapter, the gateway options of a live run with the replay's overrides
// (replayGatewayOptions), the pinned evidence and memory in place of the
// sources, fresh in-memory stores, and the packet's clock, compiled
// context hash and interruptions.
func (rt *Runtime) replayRuntime(p *replay.Packet, planner Planner, pb *playback.Playback) (*Runtime, error) {
	o := rt.opts
	o.Adapters = make([]gateway.Registration, len(rt.opts.Adapters))
	for i, reg := range rt.opts.Adapters {
		o.Adapters[i] = replayRegistration(p, reg, pb)
	}
	o.Gateway = replayGatewayOptions(gatewayOptions(&rt.opts), p)
	if len(p.PriorResults) > 0 {
		// The writes a runtime that died completed, which the run met
		// again after its takeover: the replay's idempotency store holds
		// their results, as the live run's did.
		idem := gateway.NewMemoryIdempotency()
		for _, pr := range p.PriorResults {
			if pr.Result == nil {
				return nil, fmt.Errorf("%w: prior result of %s has no result", replay.ErrInvalid, pr.IdempotencyKey)
			}
			if err := idem.Complete(context.Background(), pr.IdempotencyKey, pr.Result); err != nil {
				return nil, err
			}
		}
		o.Gateway.Idempotency = idem
	}
	var failures *replayedFailures
	if len(p.StoreFailures) > 0 {
		// The store requests the packet's run's stores failed fail
		// again, once each, in the replay's own in-memory stores.
		failures = newReplayedFailures(p.StoreFailures)
		idem, _ := o.Gateway.Idempotency.(*gateway.MemoryIdempotency)
		if idem == nil {
			idem = gateway.NewMemoryIdempotency()
		}
		o.Gateway.Idempotency = failingIdempotency{idem, failures}
		o.Gateway.Transcript = failingTranscript{gateway.NewMemoryTranscript(), failures}
	}
	// The pinned items stand in for the sources, whatever the replaying
	// runtime has (a live run without a source pinned none).
	o.Evidence = compiler.StaticEvidence(p.Evidence)
	o.Memory = recordedMemory(p.Memory)
	o.Checkpoints, o.Decisions, o.Replays, o.Transcripts = nil, nil, nil, nil
	// The replay's run is not live traffic: it records no metric (the
	// replay itself counts, on rt's metrics).
	o.MeterProvider = nil
	rp, err := newRuntime(planner, rt.packs, o)
	if err != nil {
		return nil, err
	}
	rp.mode = ModeReplay
	rp.replayed = &replaySource{hash: p.CompiledContextHash, clock: playback.PlaybackClock(p.Clock), interrupts: p.Interrupts, failures: failures}
	return rp, nil
}

// compareEntryHashes reports the first transcript entry whose hash differs
// where the entries compare equal: a member the comparison does not read
// (a result's metadata — attempts, cost, redaction_applied, signals —
// or approval) differs, and the replayed chain would not end at the
// packet's tool_transcript_chain_hash. A replay reproduces the transcript
// byte for byte.
func compareEntryHashes(want, got []gateway.TranscriptEntry) *replay.Diff {
	for i := range min(len(want), len(got)) {
		if want[i].EntryHash != got[i].EntryHash {
			return &replay.Diff{Kind: replay.DiffToolTranscript, Step: i,
				Detail: fmt.Sprintf("transcript step %d (%s) differs from the packet's in its metadata (entry hash)", i, want[i].Kind)}
		}
	}
	return nil
}

// compareRecords compares the packet's record with the rebuilt one and
// types the first difference. It leaves out what a replay cannot
// reproduce and the live run did not decide: the store's chain fields
// (prev_record_hash, record_hash, replay.record_hash: a replay stores into
// a fresh store) and the packet handle (replay.replay_packet_id,
// lineage.replay_packet_id: a replay captures no packet). A packet recorded
// before records carried a replay member is compared without the rebuilt
// one's.
func compareRecords(want json.RawMessage, got *decision.Record) []replay.Diff {
	var w decision.Record
	if err := json.Unmarshal(want, &w); err != nil {
		return []replay.Diff{{Kind: replay.DiffDecision, Step: -1, Detail: "the packet's decision record does not decode: " + err.Error()}}
	}
	g := *got
	if w.Replay == nil {
		g.Replay = nil
	} else if w.Replay.LedgerHash == "" && g.Replay != nil {
		// Recorded before records named their ledger.
		rp := *g.Replay
		rp.LedgerHash = ""
		g.Replay = &rp
	}
	if !slices.ContainsFunc(w.Approvals, decision.Approval.Denied) {
		// Recorded before records kept the approvers' refusals.
		g.Approvals = slices.DeleteFunc(slices.Clone(g.Approvals), decision.Approval.Denied)
	}
	for _, r := range []*decision.Record{&w, &g} {
		r.PrevRecordHash, r.RecordHash, r.Lineage.ReplayPacketID = "", "", ""
		if r.Replay != nil {
			rp := *r.Replay
			rp.RecordHash, rp.ReplayPacketID = "", ""
			r.Replay = &rp
		}
	}
	wb, _ := json.Marshal(&w)
	gb, _ := json.Marshal(&g)
	if string(wb) == string(gb) {
		return nil
	}
	var out []replay.Diff
	if !slices.Equal(w.EvidenceRefs, g.EvidenceRefs) {
		out = append(out, replay.Diff{Kind: replay.DiffEvidence, Step: -1, Detail: fmt.Sprintf("evidence refs %v, the packet has %v", quoted(g.EvidenceRefs...), quoted(w.EvidenceRefs...))})
	}
	pw, _ := json.Marshal(w.PolicyDecisions)
	pg, _ := json.Marshal(g.PolicyDecisions)
	if string(pw) != string(pg) {
		out = append(out, replay.Diff{Kind: replay.DiffPolicy, Step: -1, Detail: "the policy decisions differ"})
	}
	out = append(out, replay.Diff{Kind: replay.DiffDecision, Step: -1,
		Detail: fmt.Sprintf("the rebuilt decision record (%s %s) differs from the packet's (%s %s) in %s", g.Status, quoted(g.Outcome)[0], w.Status, quoted(w.Outcome)[0],
			strings.Join(namedDifferences(wb, gb), ", "))})
	return out
}

// quoted is record text (a decision's outcome, its evidence refs: the
// planner's words, which the record and the packet keep as given) as a
// replay report quotes it: with every built-in rule applied, since the
// report is shown wherever a replay is run.
func quoted(s ...string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i], _ = sensitive.Redact(v, sensitive.All)
	}
	return out
}

// namedDifferences names the top-level members whose JSON differs between
// the packet's record (want) and the rebuilt one (got); for budget_usage,
// whose members are numbers, it names each differing member with both
// values, so a mismatch says which budget dimension diverged.
func namedDifferences(want, got []byte) []string {
	names := membersDiffering(want, got)
	for i, n := range names {
		if n != "budget_usage" {
			continue
		}
		var w, g struct {
			BudgetUsage json.RawMessage `json:"budget_usage"`
		}
		if json.Unmarshal(want, &w) != nil || json.Unmarshal(got, &g) != nil {
			continue
		}
		var mw, mg map[string]json.RawMessage
		if json.Unmarshal(w.BudgetUsage, &mw) != nil || json.Unmarshal(g.BudgetUsage, &mg) != nil {
			continue
		}
		var parts []string
		for _, k := range membersDiffering(w.BudgetUsage, g.BudgetUsage) {
			parts = append(parts, fmt.Sprintf("%s %s, the packet has %s", k, orAbsent(mg[k]), orAbsent(mw[k])))
		}
		names[i] = n + " (" + strings.Join(parts, "; ") + ")"
	}
	return names
}

// orAbsent is a member's JSON, or "none" when it is absent.
func orAbsent(v json.RawMessage) string {
	if v == nil {
		return "none"
	}
	return string(v)
}

// membersDiffering names, in order, the top-level members whose JSON
// differs between the objects a and b.
func membersDiffering(a, b []byte) []string {
	var ma, mb map[string]json.RawMessage
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil {
		return []string{"its JSON form"}
	}
	seen := map[string]bool{}
	var names []string
	for _, m := range []map[string]json.RawMessage{ma, mb} {
		for k := range m {
			if !seen[k] && string(ma[k]) != string(mb[k]) {
				seen[k] = true
				names = append(names, k)
			}
		}
	}
	sort.Strings(names)
	return names
}

// recordedPlanner serves a packet's planner outcomes in call order: the
// recorded failures at their calls, the recorded plans in between.
type recordedPlanner struct {
	outputs []json.RawMessage
	errs    map[int]replay.PlannerError
	next    int
	// live is the replaying runtime's planner: a replayed turn's span
	// names its model (genai.go).
	live Planner
}

// PlannerModel implements PlannerModel: the live planner's model, if it
// names one.
func (p *recordedPlanner) PlannerModel() (provider, model string) {
	if pm, ok := p.live.(PlannerModel); ok {
		return pm.PlannerModel()
	}
	return "", ""
}

// replayedPlanError is a recorded planner failure; its reason is the
// live run's hard-stop reason, verbatim, and tokens and cents the usage
// the live run charged for the turn.
type replayedPlanError struct {
	reason string
	tokens int
	cents  float64
}

func (e *replayedPlanError) Error() string { return e.reason }

func (p *recordedPlanner) Plan(ctx context.Context, req *PlanRequest) (*Plan, error) {
	if e, ok := p.errs[req.call]; ok {
		return nil, &replayedPlanError{reason: e.Reason, tokens: e.Tokens, cents: e.CostCents}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.next >= len(p.outputs) {
		return nil, fmt.Errorf("replay: the planner is asked for a plan the packet does not have (it recorded %d)", len(p.outputs))
	}
	var plan Plan
	if err := json.Unmarshal(p.outputs[p.next], &plan); err != nil {
		return nil, fmt.Errorf("%w: planner output %d: %w", replay.ErrInvalid, p.next, err)
	}
	p.next++
	return &plan, nil
}

// pinLedger is the context ledger a packet pins of cc: a copy made by a
// JSON round trip (what a stored packet decodes to), checked against its
// ledger_hash. A context compiled in Form1 has no ledger_hash, and is not
// pinned.
func pinLedger(cc *compiler.CompiledContext) (*compiler.ContextLedger, error) {
	if cc == nil || cc.ContextLedger.LedgerHash == "" {
		return nil, nil
	}
	if err := cc.Verify(); err != nil {
		return nil, fmt.Errorf("contextos: pin the context ledger: %w", err)
	}
	b, err := json.Marshal(&cc.ContextLedger)
	if err != nil {
		return nil, err
	}
	var l compiler.ContextLedger
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, err
	}
	if h, err := compiler.LedgerHash(&l); err != nil || h != l.LedgerHash {
		return nil, fmt.Errorf("contextos: pin the context ledger: %w: it does not survive a JSON round trip", compiler.ErrHash)
	}
	return &l, nil
}

// compareLedgers compares the packet's context ledger with the rebuilt
// compiled context's, which must verify. The replay reproduces the run's
// ids (the packet pins its request and run context), so the ledgers must
// be equal, ledger_hash for ledger_hash; a difference is a
// compiled_context diff naming the overlays, environment or members that
// differ.
func compareLedgers(want *compiler.ContextLedger, cc *compiler.CompiledContext) []replay.Diff {
	if err := cc.Verify(); err != nil {
		return []replay.Diff{{Kind: replay.DiffCompiledContext, Step: -1, Detail: "the rebuilt compiled context does not verify: " + err.Error()}}
	}
	got := &cc.ContextLedger
	if got.LedgerHash == want.LedgerHash {
		return nil
	}
	var out []replay.Diff
	diff := func(format string, args ...any) {
		out = append(out, replay.Diff{Kind: replay.DiffCompiledContext, Step: -1, Detail: fmt.Sprintf(format, args...)})
	}
	overlays := func(l *compiler.ContextLedger) map[string]string {
		m := map[string]string{}
		for _, p := range l.Packs {
			m[p.Ref] = "no overlay"
			if o := p.Overlay; o != nil {
				m[p.Ref] = fmt.Sprintf("overlay %s (environment %s, %s)", o.OverlayID, o.Environment, o.Hash)
			}
		}
		return m
	}
	wo, gotOv := overlays(want), overlays(got)
	for _, p := range want.Packs {
		if g, ok := gotOv[p.Ref]; ok && g != wo[p.Ref] {
			diff("pack %s: the replay applied %s, the packet's run applied %s", p.Ref, g, wo[p.Ref])
		}
	}
	if we, ge := ledgerJSON(want.Environment), ledgerJSON(got.Environment); we != ge {
		diff("the replay's compile used environment %s, the packet's run used %s", ge, we)
	}
	if want.DataClassification != got.DataClassification {
		diff("the replay's data classification is %q, the packet's run had %q", got.DataClassification, want.DataClassification)
	}
	diff("the rebuilt context ledger differs from the packet's in %s (ledger_hash %s, the packet pins %s)",
		strings.Join(ledgerMembersDiffering(want, got), ", "), got.LedgerHash, want.LedgerHash)
	return out
}

// ledgerMembersDiffering names, in order, the ledger members (other than
// ledger_hash) whose JSON differs between a and b.
func ledgerMembersDiffering(a, b *compiler.ContextLedger) []string {
	return slices.DeleteFunc(membersDiffering([]byte(ledgerJSON(a)), []byte(ledgerJSON(b))), func(k string) bool { return k == "ledger_hash" })
}

func ledgerJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "unencodable"
	}
	return string(b)
}
