// Package replay owns the ReplayPacket (replay-packet.v1): what a run
// pins so it can be replayed offline, the capture of adapter outcomes and
// clock readings, the playback adapter that serves recorded outcomes and
// never calls a live system, and the typed differences a replay reports.
// The root package's Runtime.Replay re-runs a packet through the same
// loop, policy, gateway and critic code as a live run.
//
// A packet pins its inputs separately from its reference: the sealed tool
// transcript (entries, hashes, final chain hash) is the reference the
// replay is compared with and must verify (else the packet is refused as
// tampered); the adapter outcomes are what playback serves, so a changed
// outcome makes the replayed transcript diverge from the reference at that
// step (replay_mismatch).
package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/runcontext"
)

// SourceKind says where a packet came from.
type SourceKind string

// Source kinds (replay-packet.v1).
const (
	SourceDecisionRecord     SourceKind = "decision_record"
	SourceQualityReplayCase  SourceKind = "quality_replay_case"
	SourceEnvironmentEpisode SourceKind = "environment_episode"
	SourceOperatorCorrection SourceKind = "operator_correction"
	SourceGoldenCase         SourceKind = "golden_case"
)

// SourceKinds lists the source kinds in schema order.
func SourceKinds() []SourceKind {
	return []SourceKind{SourceDecisionRecord, SourceQualityReplayCase, SourceEnvironmentEpisode, SourceOperatorCorrection, SourceGoldenCase}
}

// SideEffectPolicies lists the side-effect policies in schema order.
func SideEffectPolicies() []SideEffectPolicy {
	return []SideEffectPolicy{TranscriptOnly, Sandbox, LiveDisallowed}
}

// ResultStatuses lists the latest-result statuses in schema order.
func ResultStatuses() []ResultStatus {
	return []ResultStatus{NotRun, ReplayEqual, ReplayMismatch, Fixed, StillFailing, Invalid, Superseded}
}

// SideEffectPolicy declares how replay treats side effects.
type SideEffectPolicy string

// Side-effect policies (replay-packet.v1).
const (
	TranscriptOnly SideEffectPolicy = "transcript_only"
	Sandbox        SideEffectPolicy = "sandbox"
	LiveDisallowed SideEffectPolicy = "live_disallowed"
)

// ResultStatus is a replay's result.
type ResultStatus string

// Latest-result statuses (replay-packet.v1).
const (
	NotRun         ResultStatus = "not_run"
	ReplayEqual    ResultStatus = "replay_equal"
	ReplayMismatch ResultStatus = "replay_mismatch"
	Fixed          ResultStatus = "fixed"
	StillFailing   ResultStatus = "still_failing"
	Invalid        ResultStatus = "invalid"
	Superseded     ResultStatus = "superseded"
)

// Expected is what the replay must reproduce.
type Expected struct {
	Status             string         `json:"status" jsonschema:"required"`
	DecisionRecordHash string         `json:"decision_record_hash,omitempty"`
	Scorecard          map[string]any `json:"scorecard,omitempty"`
	Properties         []string       `json:"properties,omitempty"`
}

// LatestResult is the outcome of the latest replay.
type LatestResult struct {
	Status    ResultStatus `json:"status"`
	EvalRunID string       `json:"eval_run_id,omitempty"`
	Score     float64      `json:"score,omitempty"`
	DiffRefs  []string     `json:"diff_refs,omitempty"`
	UpdatedAt string       `json:"updated_at,omitempty"`
}

// Packet is a ReplayPacket.
type Packet struct {
	ReplayPacketID          string           `json:"replay_packet_id" jsonschema:"required"`
	TraceID                 string           `json:"trace_id" jsonschema:"required"`
	SessionID               string           `json:"session_id,omitempty"`
	SourceKind              SourceKind       `json:"source_kind" jsonschema:"required"`
	SourceRef               string           `json:"source_ref" jsonschema:"required"`
	ContextPackRef          string           `json:"context_pack_ref" jsonschema:"required"`
	RunContextRef           string           `json:"run_context_ref,omitempty"`
	KnowledgeSnapshotRef    string           `json:"knowledge_snapshot_ref,omitempty"`
	CompiledContextHash     string           `json:"compiled_context_hash" jsonschema:"required"`
	ToolTranscriptChainHash string           `json:"tool_transcript_chain_hash,omitempty"`
	SideEffectPolicy        SideEffectPolicy `json:"side_effect_policy" jsonschema:"required"`
	Expected                Expected         `json:"expected" jsonschema:"required"`
	LatestResult            *LatestResult    `json:"latest_result,omitempty"`

	// Pinned inputs.
	PackRefs      []string                  `json:"pack_refs"`
	PackHashes    map[string]string         `json:"pack_content_hashes"`
	Invoke        json.RawMessage           `json:"invoke"`
	InvokeHash    string                    `json:"invoke_hash"`
	RunContext    json.RawMessage           `json:"run_context"`
	Evidence      []compiler.EvidenceItem   `json:"evidence,omitempty"`
	Memory        []compiler.MemoryItem     `json:"memory,omitempty"`
	PlannerOutput []json.RawMessage         `json:"planner_outputs"`
	PlannerErrors []PlannerError            `json:"planner_errors,omitempty"`
	Interrupts    []Interrupt               `json:"interrupts,omitempty"`
	Outcomes      []Outcome                 `json:"adapter_outcomes"`
	Clock         []time.Time               `json:"clock"`
	Resumes       []Resume                  `json:"resumes,omitempty"`
	Transcript    []gateway.TranscriptEntry `json:"transcript"`
	Record        json.RawMessage           `json:"decision_record"`
}

// Interrupt is a cancellation the live run saw at its Check-th
// interruption check; a replay stops at the same check.
type Interrupt struct {
	Check  int    `json:"check"`
	Reason string `json:"reason"`
}

// PlannerError is a planner call that failed (the Call-th call of the run,
// from 0) and the hard-stop reason it gave.
type PlannerError struct {
	Call   int    `json:"call"`
	Reason string `json:"reason"`
}

// Resume is what one resume of the run was given.
type Resume struct {
	Approvals []gateway.Approval    `json:"approvals,omitempty"`
	Budget    *runcontext.RunBudget `json:"run_budget,omitempty"`
}

// Outcome is one recorded adapter attempt: what the adapter returned for
// a call (by tool call id and attempt), or that it panicked. At most one of
// Outcome, Error and Panic is set; none means the adapter returned no
// outcome and no error.
type Outcome struct {
	ToolCallID   string             `json:"tool_call_id"`
	CapabilityID string             `json:"capability_id"`
	Attempt      int                `json:"attempt"`
	Outcome      *gateway.Outcome   `json:"outcome,omitempty"`
	Error        *gateway.ToolError `json:"error,omitempty"`
	// Panic records that the adapter panicked on this attempt. The panic
	// value is not kept (it may hold anything, secrets included); playback
	// panics with [ErrRecordedPanic] instead.
	Panic bool `json:"panic,omitempty"`
}

// ErrTamper reports a packet whose pinned inputs do not match their hashes.
var ErrTamper = errors.New("replay: packet tampered")

// ErrInvalid reports a packet that cannot be replayed.
var ErrInvalid = errors.New("replay: packet invalid")

// CheckIntegrity verifies what a packet pins: the invoke envelope's hash,
// the transcript's chain up to tool_transcript_chain_hash, and the decision
// record's hash. A failure
// wraps ErrTamper.
func (p *Packet) CheckIntegrity() error {
	switch {
	case p.ReplayPacketID == "" || p.CompiledContextHash == "" || len(p.Invoke) == 0 || len(p.PackRefs) == 0:
		return fmt.Errorf("%w: packet lacks its id, compiled context hash, invoke envelope or pack refs", ErrInvalid)
	case p.SideEffectPolicy != TranscriptOnly && p.SideEffectPolicy != LiveDisallowed && p.SideEffectPolicy != Sandbox:
		return fmt.Errorf("%w: side_effect_policy %q", ErrInvalid, p.SideEffectPolicy)
	}
	h, err := canon.Digest(p.Invoke)
	if err != nil || h != p.InvokeHash {
		return fmt.Errorf("%w: the invoke envelope does not match invoke_hash", ErrTamper)
	}
	chain, err := gateway.VerifyTranscript(p.Transcript)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrTamper, err)
	}
	if chain != p.ToolTranscriptChainHash {
		return fmt.Errorf("%w: the transcript does not end at tool_transcript_chain_hash", ErrTamper)
	}
	if len(p.Record) > 0 || p.Expected.DecisionRecordHash != "" {
		var rec decision.Record
		if err := json.Unmarshal(p.Record, &rec); err != nil {
			return fmt.Errorf("%w: the decision record does not decode: %v", ErrTamper, err)
		}
		if h, err := decision.Hash(&rec); err != nil || h != p.Expected.DecisionRecordHash {
			return fmt.Errorf("%w: the decision record does not match expected.decision_record_hash", ErrTamper)
		}
	}
	return nil
}

// DiffKind types a difference.
type DiffKind string

// Difference kinds.
const (
	DiffEvidence        DiffKind = "evidence"
	DiffPolicy          DiffKind = "policy"
	DiffToolTranscript  DiffKind = "tool_transcript"
	DiffCompiledContext DiffKind = "compiled_context"
	DiffDecision        DiffKind = "decision"
	DiffTamper          DiffKind = "tamper"
)

// Diff is one typed difference between a replay and its packet.
type Diff struct {
	Kind DiffKind `json:"kind"`
	// Step is the transcript step (entry index) that diverged, or -1.
	Step   int    `json:"step"`
	Detail string `json:"detail"`
}

// Result is a replay's outcome.
type Result struct {
	Status ResultStatus `json:"status"`
	Diffs  []Diff       `json:"diffs"`
}

// CompareTranscripts reports the first entry where got diverges from want
// (by entry kind, tool call, status, output, error code, mutations and
// policy decision; latency, attempts and transcript ids are not compared).
func CompareTranscripts(want, got []gateway.TranscriptEntry) *Diff {
	n := max(len(want), len(got))
	for i := 0; i < n; i++ {
		if i >= len(want) || i >= len(got) {
			return &Diff{Kind: DiffToolTranscript, Step: i, Detail: fmt.Sprintf("the replay has %d transcript entries, the packet %d", len(got), len(want))}
		}
		a, b := project(want[i]), project(got[i])
		if a != b {
			return &Diff{Kind: DiffToolTranscript, Step: i, Detail: fmt.Sprintf("transcript step %d (%s %s) differs", i, want[i].Kind, entryCapability(want[i]))}
		}
	}
	return nil
}

func entryCapability(e gateway.TranscriptEntry) string {
	if e.Call != nil {
		return e.Call.CapabilityID
	}
	if e.Result != nil {
		return e.Result.CapabilityID
	}
	return ""
}

// project is the byte-stable part of an entry.
func project(e gateway.TranscriptEntry) string {
	var v any
	switch {
	case e.Call != nil:
		v = map[string]any{"kind": e.Kind, "call": e.Call}
	case e.Result != nil:
		r := e.Result
		code := ""
		if r.Error != nil {
			code = r.Error.Code
		}
		v = map[string]any{"kind": e.Kind, "id": r.ToolCallID, "cap": r.CapabilityID, "status": r.Status, "output": r.Output,
			"code": code, "mutations": r.Mutations, "pol": r.PolicyDecisionID, "citations": r.Citations, "risk": r.RiskTags}
	}
	h, err := canon.Digest(v)
	if err != nil {
		return "unhashable"
	}
	return h
}
