package contextos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

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
// The result is replay_equal when the compiled context hash, the tool
// transcript and the rebuilt DecisionRecord (its content, byte for byte)
// match the packet; otherwise replay_mismatch with typed differences naming
// the first step that diverged. A packet whose invoke envelope does not
// match its hash or whose transcript chain is broken is refused: the
// result is invalid with a tamper difference and the error wraps
// replay.ErrTamper. An error without a result means the packet could not
// be replayed at all.
func (rt *Runtime) Replay(ctx context.Context, p *replay.Packet) (*replay.Result, error) {
	if err := p.CheckIntegrity(); err != nil {
		if errors.Is(err, replay.ErrTamper) {
			return &replay.Result{Status: replay.Invalid, Diffs: []replay.Diff{{Kind: replay.DiffTamper, Step: -1, Detail: err.Error()}}}, err
		}
		return nil, err
	}
	req, err := runcontext.DecodeInvokeRequest(p.Invoke)
	if err != nil {
		return nil, fmt.Errorf("%w: invoke envelope: %v", replay.ErrInvalid, err)
	}
	var rc runcontext.RunContext
	if err := json.Unmarshal(p.RunContext, &rc); err != nil {
		return nil, fmt.Errorf("%w: run context: %v", replay.ErrInvalid, err)
	}
	out := &replay.Result{Status: replay.ReplayEqual, Diffs: []replay.Diff{}}
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
	planner := &recordedPlanner{outputs: p.PlannerOutput, errs: map[int]string{}}
	for _, e := range p.PlannerErrors {
		planner.errs[e.Call] = e.Reason
	}
	playback := replay.NewPlayback(p.Outcomes)
	o := rt.opts
	o.Adapters = make([]gateway.Registration, len(rt.opts.Adapters))
	for i, reg := range rt.opts.Adapters {
		o.Adapters[i] = reg
		o.Adapters[i].Adapter = playback
	}
	o.Gateway = gateway.Options{Redactors: rt.opts.Gateway.Redactors, Jitter: rt.opts.Gateway.Jitter,
		BaseBackoff: rt.opts.Gateway.BaseBackoff, MaxBackoff: rt.opts.Gateway.MaxBackoff, AttachmentScope: rt.opts.Gateway.AttachmentScope,
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}
	// The pinned items stand in for the sources, whatever the replaying
	// runtime has (a live run without a source pinned none).
	o.Evidence = compiler.StaticEvidence(p.Evidence)
	o.Memory = NewInMemoryMemory(p.Memory...)
	o.Checkpoints, o.Decisions, o.Replays = nil, nil, nil
	o.Logger = rt.opts.Logger
	o.TracerProvider = rt.opts.TracerProvider
	rp, err := newRuntime(planner, rt.packs, o)
	if err != nil {
		return nil, err
	}
	rp.isReplay = true
	rp.replayClock = replay.PlaybackClock(p.Clock)
	rp.replayInterrupts = p.Interrupts

	res, err := rp.Invoke(ctx, req, &rc)
	for i := 0; err == nil && i < len(p.Resumes); i++ {
		next, rerr := rp.Resume(ctx, res.RunID, ResumeInput{Approvals: p.Resumes[i].Approvals, Budget: p.Resumes[i].Budget})
		if errors.Is(rerr, ErrNotResumable) || errors.Is(rerr, ErrResumeInput) {
			out.Diffs = append(out.Diffs, replay.Diff{Kind: replay.DiffDecision, Step: -1,
				Detail: fmt.Sprintf("the replay ended %s where the packet's run was resumed", res.Status)})
			break
		}
		res, err = next, rerr
	}
	if err != nil {
		return nil, fmt.Errorf("replay: re-run failed: %w", err)
	}
	if res.Compiled.Hash() != p.CompiledContextHash {
		out.Diffs = append(out.Diffs, replay.Diff{Kind: replay.DiffCompiledContext, Step: -1,
			Detail: fmt.Sprintf("compiled context hash %s, the packet pins %s", res.Compiled.Hash(), p.CompiledContextHash)})
	}
	got, err := rp.gw.Transcript().(gateway.TranscriptReader).RunEntries(ctx, res.RunID)
	if err != nil {
		return nil, err
	}
	if d := replay.CompareTranscripts(p.Transcript, got); d != nil {
		out.Diffs = append(out.Diffs, *d)
	} else if d := compareEntryHashes(p.Transcript, got); d != nil {
		out.Diffs = append(out.Diffs, *d)
	}
	for _, u := range playback.Unserved() {
		out.Diffs = append(out.Diffs, replay.Diff{Kind: replay.DiffToolTranscript, Step: -1, Detail: "call with no recorded outcome (not made): " + u})
	}
	out.Diffs = append(out.Diffs, compareRecords(p.Record, res.Record)...)
	if len(out.Diffs) > 0 {
		out.Status = replay.ReplayMismatch
	}
	return out, nil
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

// compareRecords compares the packet's record with the rebuilt one, without
// the store's chain fields, and types the first difference.
func compareRecords(want json.RawMessage, got *decision.Record) []replay.Diff {
	var w decision.Record
	if err := json.Unmarshal(want, &w); err != nil {
		return []replay.Diff{{Kind: replay.DiffDecision, Step: -1, Detail: "the packet's decision record does not decode: " + err.Error()}}
	}
	g := *got
	g.PrevRecordHash, g.RecordHash = "", ""
	wb, _ := json.Marshal(&w)
	gb, _ := json.Marshal(&g)
	if string(wb) == string(gb) {
		return nil
	}
	var out []replay.Diff
	if !slices.Equal(w.EvidenceRefs, g.EvidenceRefs) {
		out = append(out, replay.Diff{Kind: replay.DiffEvidence, Step: -1, Detail: fmt.Sprintf("evidence refs %v, the packet has %v", g.EvidenceRefs, w.EvidenceRefs)})
	}
	pw, _ := json.Marshal(w.PolicyDecisions)
	pg, _ := json.Marshal(g.PolicyDecisions)
	if string(pw) != string(pg) {
		out = append(out, replay.Diff{Kind: replay.DiffPolicy, Step: -1, Detail: "the policy decisions differ"})
	}
	out = append(out, replay.Diff{Kind: replay.DiffDecision, Step: -1,
		Detail: fmt.Sprintf("the rebuilt decision record (%s %s) differs from the packet's (%s %s)", g.Status, g.Outcome, w.Status, w.Outcome)})
	return out
}

// recordedPlanner serves a packet's planner outcomes in call order: the
// recorded failures at their calls, the recorded plans in between.
type recordedPlanner struct {
	outputs []json.RawMessage
	errs    map[int]string
	next    int
}

// replayedPlanError is a recorded planner failure; its reason is the
// live run's hard-stop reason, verbatim.
type replayedPlanError struct{ reason string }

func (e *replayedPlanError) Error() string { return e.reason }

func (p *recordedPlanner) Plan(ctx context.Context, req *PlanRequest) (*Plan, error) {
	if why, ok := p.errs[req.call]; ok {
		return nil, &replayedPlanError{reason: why}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.next >= len(p.outputs) {
		return nil, fmt.Errorf("replay: the planner is asked for a plan the packet does not have (it recorded %d)", len(p.outputs))
	}
	var plan Plan
	if err := json.Unmarshal(p.outputs[p.next], &plan); err != nil {
		return nil, fmt.Errorf("%w: planner output %d: %v", replay.ErrInvalid, p.next, err)
	}
	p.next++
	return &plan, nil
}
