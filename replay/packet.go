// Package replay owns the ReplayPacket (replay-packet.v1): what a run
// pins so it can be replayed offline, how a packet is sealed and checked
// for tampering, and what a replay of it reports. Re-running a packet
// needs the loop, so it is Runtime.Replay in the root package, which runs
// it through the same loop, policy, gateway and critic code as a live run;
// the machinery that records a run and plays it back (the recorder, the
// playback adapter, the clocks, the transcript comparison) is internal to
// the module.
//
// The package's nouns:
//   - a [Packet] is one ReplayPacket, the wire document;
//   - an [AdapterOutcome] is one recorded adapter attempt in a packet
//     (adapter_outcomes): what the adapter returned for a call, as the
//     gateway took it (its Outcome member is the gateway.Outcome) — not
//     the outcome of a run or of a replay;
//   - a [Report] is what one replay of a packet found (Runtime.Replay
//     returns it): a [Status] and the typed differences ([Diff]) from
//     the packet. It is not the root package's Result (the outcome of a
//     live run) nor policy's (an evaluated rule);
//   - a [Status] is a replay's status: replay_equal, replay_mismatch or
//     invalid for a Report, and any of the replay-packet.v1 statuses for
//     the [LatestResult] an evaluation writes into a stored packet;
//   - a [Diff] is one typed difference, of a [DiffKind], naming the
//     transcript step that diverged when there is one.
//
// A packet pins its inputs separately from its reference: the sealed tool
// transcript (entries, hashes, final chain hash) is the reference the
// replay is compared with and must verify (else the packet is refused as
// tampered); the adapter outcomes are what playback serves, so a changed
// outcome makes the replayed transcript diverge from the reference at that
// step (replay_mismatch).
//
// A packet is sealed ([Packet.Seal]) once it is built: packet_hash is the
// digest of everything else in it (but latest_result), so a change to any
// member after capture — the expected status, the source, the trace, the
// pinned packs, the planner outputs, the adapter outcomes, the clock, the
// evidence, … — is refused by [Packet.CheckIntegrity] as tampering
// ([ErrTamper]), not replayed. The digest is a checksum, not a signature:
// it catches a changed packet, and whoever may rewrite packets wholesale
// must be kept out by the store that keeps them.
package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/problem"
	"github.com/contextos/contextos/internal/storefail"
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

// Statuses lists the statuses in schema order.
func Statuses() []Status {
	return []Status{NotRun, ReplayEqual, ReplayMismatch, Fixed, StillFailing, Invalid, Superseded}
}

// SideEffectPolicy declares how replay treats side effects.
type SideEffectPolicy string

// Side-effect policies (replay-packet.v1).
const (
	TranscriptOnly SideEffectPolicy = "transcript_only"
	Sandbox        SideEffectPolicy = "sandbox"
	LiveDisallowed SideEffectPolicy = "live_disallowed"
)

// Status is the status of a replay of a packet: a [Report]'s (one of
// ReplayEqual, ReplayMismatch and Invalid) or a [LatestResult]'s.
type Status string

// Statuses (replay-packet.v1 latest_result.status).
const (
	NotRun         Status = "not_run"
	ReplayEqual    Status = "replay_equal"
	ReplayMismatch Status = "replay_mismatch"
	Fixed          Status = "fixed"
	StillFailing   Status = "still_failing"
	Invalid        Status = "invalid"
	Superseded     Status = "superseded"
)

// Expected is what the replay must reproduce.
type Expected struct {
	Status             string         `json:"status" jsonschema:"required"`
	DecisionRecordHash string         `json:"decision_record_hash,omitempty"`
	Scorecard          map[string]any `json:"scorecard,omitempty"`
	Properties         []string       `json:"properties,omitempty"`
}

// LatestResult is what the latest replay of a packet gave, as an
// evaluation run or a CI gate records it in the stored packet
// (latest_result).
type LatestResult struct {
	Status    Status   `json:"status"`
	EvalRunID string   `json:"eval_run_id,omitempty"`
	Score     float64  `json:"score,omitempty"`
	DiffRefs  []string `json:"diff_refs,omitempty"`
	UpdatedAt string   `json:"updated_at,omitempty"`
}

// Packet is a ReplayPacket.
//
// Lists are written so that a JSON round trip never changes what a packet
// means, its digest or what its replay compiles:
//   - evidence and memory are written as the live run's sources returned
//     them: left out when the source returned nil (or there was no source),
//     [] when it returned an empty list. The compiler's ledger hashes that
//     difference (evidence_hash, memory_hash), so the replay must see the
//     same one; decoding gives back nil or an empty list.
//   - pack_refs, pack_content_hashes, planner_outputs, adapter_outcomes,
//     clock and transcript are always present: nil is written as [] (or {}),
//     as an empty one is. Nothing reads a difference between them.
//   - planner_errors, interrupts, store_failures, resumes and
//     prior_results are left out when empty, nil or not. Nothing reads a difference between them
//     either.
//
// A packet is replayable only once sealed: [Packet.Seal] sets packet_hash,
// which [Packet.CheckIntegrity] recomputes.
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
	// LatestResult is what the latest replay of the packet gave. It is the
	// one member packet_hash leaves out: it is written into a stored packet
	// after capture (by whoever replays it: an evaluation run, a CI gate),
	// and no replay reads it.
	LatestResult *LatestResult `json:"latest_result,omitempty"`

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
	StoreFailures []StoreFailure            `json:"store_failures,omitempty"`
	Outcomes      []AdapterOutcome          `json:"adapter_outcomes"`
	Clock         []time.Time               `json:"clock"`
	Resumes       []Resume                  `json:"resumes,omitempty"`
	PriorResults  []PriorResult             `json:"prior_results,omitempty"`
	Transcript    []gateway.TranscriptEntry `json:"transcript"`
	// Record is the decision record as the decision store holds it, its
	// prev_record_hash and record_hash included, so its record_hash is
	// expected.decision_record_hash. (Packets recorded before carry it
	// without either, and expected.decision_record_hash is its hash
	// without them.)
	Record json.RawMessage `json:"decision_record"`
	// Ledger is the run's context ledger (its last compile), which a
	// replay must rebuild to the same ledger_hash: compiled_context_hash
	// covers only what the compile produced, and leaves out the overlay
	// applied to each pack (id and digest), the environment the compile
	// used, the data classification, the tools withheld and the inputs'
	// digests. A replay on a runtime with another environment overlay, or
	// none, is a compiled_context mismatch. CheckIntegrity checks it
	// against its ledger_hash and compiled_context_hash. Packets recorded
	// before it was pinned have none, and replay without the check.
	Ledger *compiler.ContextLedger `json:"context_ledger,omitempty"`

	// PacketHash is "sha256:<hex>" over the RFC 8785 canonical JSON of the
	// packet without packet_hash and latest_result, as the packet encodes
	// after a JSON round trip (see [Packet.Seal]). Empty until sealed.
	PacketHash string `json:"packet_hash,omitempty" jsonschema:"required"`
}

// packetFields is Packet without its methods, for MarshalJSON.
type packetFields Packet

// MarshalJSON writes the packet with its lists as the [Packet] doc says.
func (p Packet) MarshalJSON() ([]byte, error) {
	w := struct {
		packetFields
		PackRefs      []string                  `json:"pack_refs"`
		PackHashes    map[string]string         `json:"pack_content_hashes"`
		Evidence      *[]compiler.EvidenceItem  `json:"evidence,omitempty"`
		Memory        *[]compiler.MemoryItem    `json:"memory,omitempty"`
		PlannerOutput []json.RawMessage         `json:"planner_outputs"`
		Outcomes      []AdapterOutcome          `json:"adapter_outcomes"`
		Clock         []time.Time               `json:"clock"`
		Transcript    []gateway.TranscriptEntry `json:"transcript"`
	}{
		packetFields:  packetFields(p),
		PackRefs:      orEmpty(p.PackRefs),
		PackHashes:    p.PackHashes,
		PlannerOutput: orEmpty(p.PlannerOutput),
		Outcomes:      orEmpty(p.Outcomes),
		Clock:         orEmpty(p.Clock),
		Transcript:    orEmpty(p.Transcript),
	}
	if w.PackHashes == nil {
		w.PackHashes = map[string]string{}
	}
	if p.Evidence != nil {
		w.Evidence = &p.Evidence
	}
	if p.Memory != nil {
		w.Memory = &p.Memory
	}
	return json.Marshal(&w)
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Interrupt is a cancellation the live run saw at its Check-th
// interruption check; a replay stops at the same check.
type Interrupt struct {
	Check  int    `json:"check"`
	Reason string `json:"reason"`
}

// Stores a [StoreFailure] names, and what the gateway asked of them.
const (
	// StoreIdempotency is the gateway's idempotency store; its ops are
	// StoreOpClaim and StoreOpComplete.
	StoreIdempotency = storefail.Idempotency
	// StoreTranscript is the gateway's transcript sink; its op is
	// StoreOpAppend.
	StoreTranscript = storefail.Transcript

	StoreOpClaim    = storefail.OpClaim
	StoreOpComplete = storefail.OpComplete
	StoreOpAppend   = storefail.OpAppend
)

// StoreFailure is a store the gateway needed for a tool call that failed
// it in the live run: an idempotency store's claim or completion of the
// write's key (IdempotencyKey), or a transcript sink's append of the
// call's entry (Kind "call" or "result", at sequence Seq). The replay's
// own stores fail that request of that call once, as the live ones did,
// and the replay is compared against the failures it met. The store's
// error is not kept (it may name anything, secrets included): what the
// run recorded of the failure is the gateway's own fixed message.
//
// It is the type the gateway reports the failure with (an alias: the
// gateway cannot import replay).
type StoreFailure = storefail.StoreFailure

// PlannerError is a planner call that failed (the Call-th call of the run,
// from 0) and the hard-stop reason it gave. Tokens and CostCents are the
// usage the run charged for the failed turn (the model answered, or
// answered late), which a replay charges again.
type PlannerError struct {
	Call      int     `json:"call"`
	Reason    string  `json:"reason"`
	Tokens    int     `json:"tokens,omitempty"`
	CostCents float64 `json:"cost_cents,omitempty"`
}

// Resume is what one resume of the run was given. Takeover marks a
// takeover: a resume of a run whose runtime died while continuing it.
type Resume struct {
	Approvals []gateway.Approval    `json:"approvals,omitempty"`
	Budget    *runcontext.RunBudget `json:"run_budget,omitempty"`
	Takeover  *Takeover             `json:"takeover,omitempty"`
}

// Takeover says where a takeover continued a run whose runtime had died:
// from the checkpoint the run saved at its Point-th takeover point (its
// claims, and the points of its loop where it checkpoints or renews its
// claim, counted from 1 over the run), with the run's transcript at
// TranscriptEntries entries. A replay stops the run at that point, takes
// the transcript entries the dead runtime recorded after it as recorded
// (they are in the chain), and continues as the takeover did. What the
// dead runtime did after the point is not replayed; a write it completed
// that the run met again is answered from PriorResults. Spent is what the
// dead runtime had saved of its spend after the point that the transcript
// does not show (nil: none); the takeover charged it, and a replay charges
// it as recorded. StoreFailures are the store requests of the dead
// runtime's calls after the point that failed (the runtime saved each as
// it failed): a replay does not meet them, since it does not replay that
// part of the run, and the packet's own StoreFailures are the ones it
// meets.
type Takeover struct {
	Point             int            `json:"point"`
	TranscriptEntries int            `json:"transcript_entries"`
	Spent             *Spent         `json:"spent,omitempty"`
	StoreFailures     []StoreFailure `json:"store_failures,omitempty"`
}

// Spent is a runtime's spend after a run's takeover point that the run's
// transcript does not record: the tokens and cost (cents) its planner
// turns reported and that the attempts of a tool call it retried spent
// (the call's result, which would record them, never was), and the wall
// clock (ms) the run had used by its last save of that spend.
type Spent struct {
	Tokens      int     `json:"tokens,omitempty"`
	CostCents   float64 `json:"cost_cents,omitempty"`
	WallClockMS int64   `json:"wall_clock_ms,omitempty"`
}

// PriorResult is a write's result that the run got from the idempotency
// store without having made the call itself (a runtime that died made
// it before a takeover continued the run); a replay's idempotency store
// answers the key with it.
type PriorResult struct {
	IdempotencyKey string                      `json:"idempotency_key"`
	Result         *gateway.ToolResultEnvelope `json:"result"`
}

// AdapterOutcome is one recorded adapter attempt (adapter_outcomes): what
// the adapter returned for a call (by tool call id and attempt) as the
// gateway took it — checked, bounded and redacted (see gateway.Attempt) —
// or that it panicked. Panic
// excludes the others; Outcome and Error are both set for a failed attempt
// that spent something, and Outcome then holds only its cost_cents and
// tokens; none means the adapter returned no outcome and no error (packets
// recorded before the gateway's own error for it was recorded).
type AdapterOutcome struct {
	ToolCallID   string             `json:"tool_call_id"`
	CapabilityID string             `json:"capability_id"`
	Attempt      int                `json:"attempt"`
	Outcome      *gateway.Outcome   `json:"outcome,omitempty"`
	Error        *gateway.ToolError `json:"error,omitempty"`
	// Panic records that the adapter panicked on this attempt. The panic
	// value is not kept (it may hold anything, secrets included); playback
	// panics with an error saying the recorded attempt panicked instead.
	Panic bool `json:"panic,omitempty"`
	// Invalid names what made the outcome one the gateway refuses
	// ("output": a number that is not finite; "cost_cents": a cost that is
	// not finite; "tokens": a negative count): such a value has no JSON
	// form or is not kept, so the outcome is kept without it and playback
	// serves an equally invalid one.
	Invalid []string `json:"invalid,omitempty"`
	// Canceled records that the caller's context was done when the
	// attempt returned: the gateway made no further attempt, and neither
	// does playback (the gateway asks the adapter whether to stop retrying).
	Canceled bool `json:"canceled,omitempty"`
	// Redacted records that the gateway's redaction changed the attempt's
	// outcome or error. What is recorded is the redacted attempt (never
	// the adapter's raw value); playback reports the flag back (the
	// gateway asks the adapter whether it redacted) so the replayed result's
	// redaction_applied is the recorded one. Packets recorded before it
	// existed hold the raw outcome and no flag: the replay's gateway
	// redacts them as the live run's did.
	Redacted bool `json:"redacted,omitempty"`
}

// ErrTamper reports a packet whose pinned inputs do not match their hashes,
// or whose members do not match its packet_hash.
var ErrTamper = errors.New("replay: packet tampered")

// ErrInvalid reports a packet that cannot be replayed: it lacks a required
// member, has an unknown side-effect policy, or is not sealed.
var ErrInvalid = errors.New("replay: packet invalid")

// Seal sets the packet's packet_hash: the digest of the packet without
// packet_hash and latest_result, over the packet as it encodes after a
// JSON round trip (encoded, decoded, encoded again), so a packet read back
// from any store digests as it did when sealed. Call it once the packet is
// complete; a member changed afterwards makes CheckIntegrity refuse the
// packet until it is sealed again.
//
// Seal refuses, with the error CheckIntegrity would give, a packet that
// CheckIntegrity would refuse for any reason other than its packet_hash:
// a sealed packet always passes.
func (p *Packet) Seal() error {
	if err := p.checkShape(); err != nil {
		return err
	}
	if err := p.checkPins(); err != nil {
		return err
	}
	h, err := p.digest()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	p.PacketHash = h
	return nil
}

// CheckIntegrity verifies a packet before it is replayed. In order:
//   - its shape: an id, a compiled context hash, an invoke envelope, pack
//     refs and a known side-effect policy, else ErrInvalid;
//   - that it is sealed: a packet without packet_hash is ErrInvalid;
//   - what it pins: the invoke envelope matches invoke_hash, the transcript
//     chain verifies and ends at tool_transcript_chain_hash, the decision
//     record matches expected.decision_record_hash (the record is pinned as
//     the decision store holds it, so that hash is the stored record_hash,
//     and the record's own record_hash and replay.record_hash, when it
//     carries them, are the same; its bytes are the canonical form of the
//     record they decode to, so no member is duplicated, respelled or
//     unknown), and expected.status is the record's status;
//   - packet_hash: the packet's digest (see [Packet.Seal]) equals it, so no
//     member but latest_result changed since it was sealed (a packet that
//     no longer encodes to JSON and back has changed too: it did when
//     sealed).
//
// Each failure after the shape and seal checks wraps ErrTamper. Errors
// name the member that failed, never its content.
func (p *Packet) CheckIntegrity() error {
	if err := p.checkShape(); err != nil {
		return err
	}
	if p.PacketHash == "" {
		return fmt.Errorf("%w: the packet is not sealed (no packet_hash)", ErrInvalid)
	}
	if err := p.checkPins(); err != nil {
		return err
	}
	h, err := p.digest()
	if err != nil {
		// It had one when it was sealed.
		return fmt.Errorf("%w: %w", ErrTamper, err)
	}
	if h != p.PacketHash {
		return fmt.Errorf("%w: the packet does not match packet_hash", ErrTamper)
	}
	return nil
}

// checkShape checks the members a replay cannot start without.
func (p *Packet) checkShape() error {
	switch {
	case p.ReplayPacketID == "" || p.CompiledContextHash == "" || len(p.Invoke) == 0 || len(p.PackRefs) == 0:
		return fmt.Errorf("%w: packet lacks its id, compiled context hash, invoke envelope or pack refs", ErrInvalid)
	case p.SideEffectPolicy != TranscriptOnly && p.SideEffectPolicy != LiveDisallowed && p.SideEffectPolicy != Sandbox:
		return fmt.Errorf("%w: unknown side_effect_policy", ErrInvalid)
	}
	return nil
}

// CheckRecord returns an error wrapping ErrTamper unless p is the packet
// of the stored record rec: rec's content hashes to its record_hash, rec
// names p (its replay.replay_packet_id is p's id), and p pins rec as
// stored (p's expected.decision_record_hash is rec's record_hash). With
// CheckIntegrity, which holds p's own record to that hash, a replay of p
// is then a replay of rec's decision. Runtime.ReplayRecord and
// `contextos replay --store RECORD_ID` check it.
func (p *Packet) CheckRecord(rec *decision.Record) error {
	if h, err := decision.Hash(rec); err != nil || h != rec.RecordHash {
		return fmt.Errorf("%w: the stored record %s does not hash to its record_hash", ErrTamper, problem.Clip(rec.RecordID))
	}
	if rec.Replay == nil || rec.Replay.ReplayPacketID != p.ReplayPacketID {
		return fmt.Errorf("%w: record %s does not name replay packet %s", ErrTamper, problem.Clip(rec.RecordID), problem.Clip(p.ReplayPacketID))
	}
	if p.Expected.DecisionRecordHash != rec.RecordHash {
		return fmt.Errorf("%w: replay packet %s does not pin record %s as stored", ErrTamper, problem.Clip(p.ReplayPacketID), problem.Clip(rec.RecordID))
	}
	return nil
}

// checkPins checks the members that carry their own hashes, and the
// expected status against the record.
func (p *Packet) checkPins() error {
	h, err := canon.Digest(p.Invoke)
	if err != nil || h != p.InvokeHash {
		return fmt.Errorf("%w: the invoke envelope does not match invoke_hash", ErrTamper)
	}
	chain, err := gateway.VerifyTranscript(p.Transcript)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrTamper, err)
	}
	if chain != p.ToolTranscriptChainHash {
		return fmt.Errorf("%w: the transcript does not end at tool_transcript_chain_hash", ErrTamper)
	}
	if l := p.Ledger; l != nil {
		if h, err := compiler.LedgerHash(l); err != nil || l.LedgerHash == "" || h != l.LedgerHash {
			return fmt.Errorf("%w: the context ledger does not match its ledger_hash", ErrTamper)
		}
		if l.CompiledContextHash != p.CompiledContextHash {
			return fmt.Errorf("%w: the context ledger's compiled_context_hash is not the packet's", ErrTamper)
		}
	}
	// A packet without a record writes decision_record as null, and reads
	// it back as the raw "null": both mean no record.
	if noRecord := len(p.Record) == 0 || string(bytes.TrimSpace(p.Record)) == "null"; !noRecord || p.Expected.DecisionRecordHash != "" {
		var rec decision.Record
		if err := json.Unmarshal(p.Record, &rec); err != nil {
			return fmt.Errorf("%w: the decision record does not decode", ErrTamper)
		}
		// The record is pinned as the store holds it, in its canonical
		// form: each member once, spelled as the record spells it. Bytes
		// whose canonical form is not the decoded record's hold a member
		// encoding/json reads otherwise than a case-sensitive reader
		// ("status" and "Status", the last kept) or not at all, and would
		// show that reader another decision than the one hashed.
		raw, rerr := canon.Digest(json.RawMessage(p.Record))
		dec, derr := canon.Digest(&rec)
		if rerr != nil || derr != nil || raw != dec {
			return fmt.Errorf("%w: the decision record is not the record it decodes to (a member duplicated, respelled or unknown)", ErrTamper)
		}
		if h, err := decision.Hash(&rec); err != nil || h != p.Expected.DecisionRecordHash {
			return fmt.Errorf("%w: the decision record does not match expected.decision_record_hash", ErrTamper)
		}
		// Packets recorded before records were pinned as stored carry
		// neither hash in the record.
		if rec.RecordHash != "" && rec.RecordHash != p.Expected.DecisionRecordHash {
			return fmt.Errorf("%w: the decision record's record_hash is not expected.decision_record_hash", ErrTamper)
		}
		if rec.Replay != nil && rec.Replay.RecordHash != "" && rec.Replay.RecordHash != p.Expected.DecisionRecordHash {
			return fmt.Errorf("%w: the decision record's replay.record_hash is not expected.decision_record_hash", ErrTamper)
		}
		// The record names the ledger its decision was made under: a
		// packet of it must carry that ledger (a resealed packet without
		// it would replay under any environment unchecked).
		if rec.Replay != nil && rec.Replay.LedgerHash != "" && (p.Ledger == nil || p.Ledger.LedgerHash != rec.Replay.LedgerHash) {
			return fmt.Errorf("%w: the packet's context_ledger is not the one its decision record names (replay.ledger_hash)", ErrTamper)
		}
		if string(rec.Status) != p.Expected.Status {
			return fmt.Errorf("%w: expected.status is not the decision record's status", ErrTamper)
		}
	}
	return nil
}

// digest is the packet's packet_hash: the canonical JSON of the packet as
// it encodes after a round trip, without packet_hash and latest_result.
func (p *Packet) digest() (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", errors.New("the packet has no JSON form")
	}
	var back Packet
	if err := json.Unmarshal(b, &back); err != nil {
		return "", errors.New("the packet does not decode from its JSON form")
	}
	if b, err = json.Marshal(&back); err != nil {
		return "", errors.New("the packet has no JSON form")
	}
	h, err := canon.DigestExcluding(json.RawMessage(b), []string{"packet_hash"}, []string{"latest_result"})
	if err != nil {
		return "", errors.New("the packet has no canonical JSON form")
	}
	return h, nil
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

// Report is what a replay of a packet found (Runtime.Replay returns it):
// ReplayEqual and no differences, ReplayMismatch and the differences, or
// Invalid with a DiffTamper difference for a packet refused as tampered.
type Report struct {
	Status Status `json:"status"`
	Diffs  []Diff `json:"diffs"`
}

// DecodePacket decodes a stored or transmitted packet's bytes. Beyond
// encoding/json, it refuses (ErrTamper) bytes that are not the packet they
// decode to: a member duplicated, spelled in another case (encoding/json
// matches names case-insensitively and keeps the last, so "status" then
// "Status" decodes to the second while every case-sensitive reader sees
// the first), or unknown. Such bytes would still pass CheckIntegrity,
// whose packet_hash is the digest of the decoded packet, while showing a
// reader of the file other values than the ones sealed. It does not check
// the packet's integrity: call CheckIntegrity (Runtime.Replay does).
func DecodePacket(data []byte) (*Packet, error) {
	var p Packet
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%w: the packet does not decode: %w", ErrInvalid, err)
	}
	again, err := json.Marshal(&p)
	if err != nil {
		return nil, fmt.Errorf("%w: the packet has no JSON form", ErrInvalid)
	}
	a, err := canon.JSON(json.RawMessage(data))
	if err != nil {
		return nil, fmt.Errorf("%w: the packet has no canonical JSON form (a member duplicated?)", ErrTamper)
	}
	b, err := canon.JSON(json.RawMessage(again))
	if err != nil || !bytes.Equal(a, b) {
		return nil, fmt.Errorf("%w: the packet's bytes are not the packet they decode to (a member respelled or unknown)", ErrTamper)
	}
	return &p, nil
}
