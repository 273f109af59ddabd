package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// Checkpoint is what a CheckpointStore keeps of a paused or running run.
// It is opaque to the store: the runtime owns the encoding of Data and says
// which encoding it is with Version; a store keeps RunID, Version and Data
// as given and manages Revision and Lease.
type Checkpoint struct {
	// RunID is the run the checkpoint belongs to: the store's key.
	RunID string
	// Revision is the revision the checkpoint was loaded at (0 for a run
	// without one); a successful Save sets it to the new revision.
	Revision int
	// Version is the encoding of Data. A runtime reads every version it
	// lists as supported and refuses any other with a
	// *CheckpointVersionError.
	Version int
	// Data is the run's state in the encoding Version names. A store
	// returns it byte for byte as it was saved.
	Data []byte
	// Lease is how long the claim of a runtime continuing the run lasts,
	// counted on the store's clock. On Save it is the claim's length from
	// the save (0: the checkpoint holds no claim); on Load it is what is
	// left of it at the load (0 when it has lapsed or there is none). A
	// takeover is refused while it lasts. A store with a clock of its own
	// (a database server's) counts on that clock, so whether a claim is
	// live does not depend on the clocks of the runtimes sharing the store.
	Lease time.Duration
	// Awaiting is, on Save, the approval the checkpoint leaves the run
	// waiting for, or whose decision a runtime has just claimed the run to
	// carry out (until that runtime's next save); nil: neither — the run
	// is running, ended or was never paused. A store that is a PendingIndex keeps it
	// with the checkpoint in the same atomic save; any other store may
	// ignore it. Load leaves it nil.
	Awaiting *AwaitedApproval
}

// AwaitedApproval is what a PendingIndex keeps of a run paused at an
// approval gate: enough to find the run, of a tenant or of every tenant,
// without reading its checkpoint.
type AwaitedApproval struct {
	// TenantID is the run's tenant.
	TenantID string
	// GateID is the gate the run paused at.
	GateID string
}

// CheckpointStore persists checkpoints so a run can resume on any runtime
// sharing the store. A store never interprets Version or Data.
//
// Save stores cp.RunID's checkpoint (its Version, a copy of its Data, and
// the end of its Lease: the store's time now plus cp.Lease, or none)
// atomically when the stored revision equals cp.Revision (a run without a
// checkpoint is at revision 0), and then sets cp.Revision to the new
// revision, cp.Revision+1. A save over another revision fails with an
// error wrapping ErrCheckpointConflict and stores nothing.
//
// Load returns the run's last saved checkpoint: its Revision, its Version,
// its Data byte for byte, in a value that shares no memory with the store,
// and as Lease the time left until the saved lease ends, on the store's
// clock (0 once it has ended, or when the save had none). It returns an
// error wrapping ErrNotFound for an unknown run.
//
// Both honour ctx (a cancelled ctx is an error wrapping ctx.Err()) and
// are safe for concurrent use.
type CheckpointStore interface {
	Save(ctx context.Context, cp *Checkpoint) error
	Load(ctx context.Context, runID string) (*Checkpoint, error)
}

// ErrCheckpointConflict reports a save over a revision another runtime
// has already moved past: the run is being continued elsewhere.
var ErrCheckpointConflict = errors.New("contextos: checkpoint was changed by another runtime")

// ErrCheckpointVersion reports a checkpoint in an encoding this runtime
// does not read (one written by a newer runtime, say). The error is a
// *CheckpointVersionError.
var ErrCheckpointVersion = errors.New("contextos: checkpoint version not supported")

// CheckpointVersionError is the error for a checkpoint whose Version this
// runtime cannot read. It matches ErrCheckpointVersion with errors.Is.
type CheckpointVersionError struct {
	// RunID is the checkpoint's run.
	RunID string
	// Version is the checkpoint's version.
	Version int
	// Supported lists the versions this runtime reads, oldest first.
	Supported []int
}

func (e *CheckpointVersionError) Error() string {
	return fmt.Sprintf("contextos: checkpoint of %s has version %d; this runtime reads versions %s", e.RunID, e.Version, joinInts(e.Supported))
}

// Unwrap returns ErrCheckpointVersion.
func (e *CheckpointVersionError) Unwrap() error { return ErrCheckpointVersion }

func joinInts(xs []int) string {
	var b bytes.Buffer
	for i, x := range xs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(x))
	}
	return b.String()
}

// ErrLedgerMismatch reports a resume whose runtime compiles the run's
// context under other packs than the run's checkpoint pins (another
// environment overlay, or other pack content under the same ref) than the
// run started under. Such a run is not continued: the error wraps
// ErrNotResumable too.
var ErrLedgerMismatch = errors.New("contextos: the context ledger differs from the one the checkpoint pins")

// Checkpoint encodings. Version 1 is the JSON of the exported Checkpoint
// struct of the runtimes before checkpoints were versioned (its "rev"
// member is ignored: the store's Revision is the revision). Version 2 is
// the JSON of checkpointState: version 1 without "rev", with
// "ledger_packs" (the run's pinned packs and overlays). Version 3 is
// version 2 with "unconfirmed_record": a run whose terminal record the
// decision store did not confirm. A runtime that reads only versions 1
// and 2 must refuse it (it would plan the run again and could record a
// second decision), so a checkpoint holding one is written at version 3
// and every other at version 2, which such a runtime still reads.
// Version 4 is version 3 with "spent_since_point": what the run's
// planner turns spent after the state the checkpoint holds (run.saveSpent).
// A runtime that reads only versions 1 to 3 would ignore it and take the
// run over without charging that spend, so such a runtime must refuse it:
// a checkpoint holding it is written at version 4. Version 5 is version 4
// with "call_in_progress": what the attempts of the run's tool call in
// progress spent before the gateway retried it, which the transcript
// records only with the call's result (run.SaveAttemptsSpent). A runtime
// that reads only versions 1 to 4 would take the run over without
// charging it, so a checkpoint holding it is written at version 5.
// Version 6 is version 5 with "store_failures_since_point": the store
// requests of the run's calls that failed after the state it holds
// (run.storeFailed). A runtime that reads only versions 1 to 5 would take
// the run over and capture a packet that does not name them, so a
// checkpoint holding them is written at version 6. The members are dropped at the run's next state save (snapshotInto), which
// is written at version 2 or 3 again.
const (
	checkpointV1 = 1
	checkpointV2 = 2
	checkpointV3 = 3
	checkpointV4 = 4
	checkpointV5 = 5
	checkpointV6 = 6
)

// checkpointVersions lists the versions this runtime reads, oldest first.
func checkpointVersions() []int {
	return []int{checkpointV1, checkpointV2, checkpointV3, checkpointV4, checkpointV5, checkpointV6}
}

// callInProgress is what the attempts of a run's tool call spent before
// the gateway retried it: the call's tool call id and the transcript
// sequence of its call entry, and the cost (each attempt's declared cost
// and what it reported) and tokens of its attempts so far. The call's
// result entry, once recorded, carries all of it: a takeover charges it
// only when the transcript holds no result of the call after its call
// entry (callOwed).
type callInProgress struct {
	ToolCallID string  `json:"tool_call_id"`
	Seq        int     `json:"seq"`
	Tokens     int     `json:"tokens,omitempty"`
	CostCents  float64 `json:"cost_cents,omitempty"`
}

// unconfirmedRecord is a run's terminal record that the decision store
// failed without saying whether it stored it, and the stop the run was
// at when it was built (a hard stop's, or none).
type unconfirmedRecord struct {
	Record  *decision.Record `json:"record"`
	Stopped string           `json:"stopped,omitempty"`
}

// checkpointState is a paused or long-running run's resumable state, as
// the runtime encodes it into Checkpoint.Data.
type checkpointState struct {
	RunID string `json:"run_id"`
	// rev is the revision the state was loaded or last saved at: a store
	// saves a checkpoint only over it (optimistic concurrency), so two
	// runtimes cannot both continue one run.
	rev int
	// lease is what was left of the run's claim when the state was
	// loaded, on the store's clock (Checkpoint.Lease): a takeover is
	// refused while it lasts.
	lease time.Duration
	// heldAt is when this runtime last saved the state with its claim,
	// on its clock (zero: it holds none): the claim is renewed once half
	// of its lease has passed since (run.holdClaim). Only the time since
	// is read, so the runtime's clock need not agree with the store's.
	heldAt time.Time
	// spentAt is when this runtime last saved its spend (saveSpent),
	// which renews the claim too but is no takeover point: the claim
	// checks of a tool call (HoldClaim, SaveAttemptsSpent) count from the
	// later of the two (renewedAt), a takeover point's from heldAt.
	spentAt time.Time
	// unanswered are this runtime's own saves (putOwn) that the store
	// failed and that it could not find kept (the store's answer lost,
	// and its load failed too), each with the revision it was made over
	// (rev, or past it for a save made again over an earlier one of them
	// found kept): the store may hold one of them, at the revision after,
	// and a later save over rev is then refused though nobody else
	// wrote. Any save that moves rev drops them.
	unanswered []unansweredSave
	// enc keeps the JSON of the request and run contexts between saves
	// (marshalCheckpoint).
	enc checkpointCache
	// saved is the Data this runtime last saved (its state, and its
	// spent_since_point member when it has one), and cut the offset in it
	// where that member starts (the closing brace when there is none):
	// run.saveSpent saves saved[:cut] with a new member, so the state a
	// takeover continues from stays the one saved.
	saved []byte
	cut   int
	// Active marks a run a runtime is continuing (claimed and not yet
	// paused, stopped or ended): another Resume is refused, and a
	// takeover is refused while the claim's lease lasts.
	Active  bool                      `json:"active,omitempty"`
	Request *runcontext.InvokeRequest `json:"request"`
	Run     *runcontext.RunContext    `json:"run_context"`
	// LedgerPacks is the digest of the packs section of the context
	// ledger the run compiled (each pack's ref, content hash and applied
	// overlay): empty before the run's first compile and in a version-1
	// checkpoint. A resume whose compile gives another is refused with
	// ErrLedgerMismatch. The rest of the ledger is not pinned: a resume
	// with a new budget changes the run context's digest in it.
	LedgerPacks string `json:"ledger_packs,omitempty"`
	// Turn counts the planner turns made so far; the plan in progress was
	// made at turn Turn-1.
	Turn      int          `json:"turn"`
	Replans   int          `json:"replans"`
	Plan      *Plan        `json:"plan"`
	StepIndex int          `json:"step_index"`
	Results   []StepResult `json:"results"`
	Usage     PlanUsage    `json:"usage"`
	// MeterUsage is the run-budget meter's reading (tokens, tool calls,
	// spend) so a resumed run keeps counting from where it paused.
	MeterUsage runcontext.Usage         `json:"meter_usage"`
	StartedAt  string                   `json:"started_at"`
	Pending    *gateway.ApprovalRequest `json:"pending,omitempty"`
	// Deferred is the run's latest DEFERRED record (or a hard stop's
	// ESCALATED one) that a resume closes.
	Deferred string `json:"deferred_record_id,omitempty"`
	// Open lists, in order, every record of the run a CLOSED record must
	// close when the run reaches its terminal record: its IN_FLIGHT and
	// DEFERRED records and a hard stop's ESCALATED record.
	Open []string `json:"open_record_ids,omitempty"`
	// InFlight is the IN_FLIGHT record of a long_running run's latest
	// progress checkpoint.
	InFlight string `json:"in_flight_record_id,omitempty"`
	// LeaseUntil is when a long_running run's claim lapses unless a
	// heartbeat renews it, as the runtime that saved the checkpoint read
	// its clock (RFC 3339). It is for information (heartbeat events say
	// it): takeovers are decided by the store's lease (Checkpoint.Lease),
	// counted on the store's clock.
	LeaseUntil string  `json:"lease_until,omitempty"`
	Plans      []*Plan `json:"plans"`
	Seq        int     `json:"seq"`
	Terminal   bool    `json:"terminal,omitempty"`
	// Chain is where the run's transcript chain stands.
	Chain gateway.ChainState `json:"chain"`
	// Replay inputs recorded so far: adapter outcomes, clock readings and
	// the approvals of each resume.
	Outcomes []replay.AdapterOutcome `json:"outcomes,omitempty"`
	Clock    []time.Time             `json:"clock,omitempty"`
	Resumes  []replay.Resume         `json:"resumes,omitempty"`
	// Denials are the approvers' refusals the run met, as its records
	// list them (denials.go).
	Denials []decision.Approval `json:"denials,omitempty"`
	// Stopped is why a hard stop ended the run; such a run resumes like a
	// paused one (with a new budget, say).
	Stopped string `json:"stopped,omitempty"`
	// Origin is the run context the run was invoked with, kept when a
	// resume replaced its budget (a replay starts from it).
	Origin *runcontext.RunContext `json:"origin_run_context,omitempty"`
	// PlannerCalls and Checks count planner calls and interruption checks;
	// PlannerErrors and Interrupts are the failed calls and the
	// cancellations seen, so a replay fails and stops where the run did.
	PlannerCalls  int                   `json:"planner_calls"`
	PlannerErrors []replay.PlannerError `json:"planner_errors,omitempty"`
	Checks        int                   `json:"checks"`
	Interrupts    []replay.Interrupt    `json:"interrupts,omitempty"`
	// StoreFailures are the store requests of the run's calls that
	// failed, so a replay's stores fail them too.
	StoreFailures []replay.StoreFailure `json:"store_failures,omitempty"`
	// Unconfirmed is the run's terminal record when the decision store
	// failed it and could not say whether it stored it (the run stopped
	// record_not_stored). The run's decision is made: a resume or a
	// repeated Invoke settles it by storing this very record.
	Unconfirmed *unconfirmedRecord `json:"unconfirmed_record,omitempty"`
	// Points counts the places the run passed where a takeover may
	// continue it (its claims, and the points of its loop where it
	// checkpoints or renews its claim: run.point); a taken-over run's
	// packet names the one its takeover continued from, so a replay
	// stops there (replay.Takeover).
	Points int `json:"points,omitempty"`
	// Priors are the results of writes that the run got from the
	// idempotency store without having run them itself (a runtime that
	// died ran them before a takeover continued the run): replay inputs,
	// a replay's idempotency store holds them.
	Priors []replay.PriorResult `json:"prior_results,omitempty"`
	// InputsLost marks a run a takeover settled with a decision its dead
	// runtime had stored: that runtime's replay inputs died with it, so
	// the run has no packet and Capture refuses it.
	InputsLost bool `json:"inputs_lost,omitempty"`
	// SpentSincePoint is what the run's planner turns spent (tokens, cost)
	// after the state this checkpoint holds, and the wall clock the run
	// had used after it, as of the run's last spend save: it is in
	// neither MeterUsage nor the transcript, and a takeover charges it
	// (run.saveSpent). Nil: none. It and CallInProgress are the last
	// members, so a save of the same state with other values differs only
	// at the end.
	SpentSincePoint *replay.Spent `json:"spent_since_point,omitempty"`
	// CallInProgress is what the attempts of the run's tool call in
	// progress spent before the gateway retried it, as of its last retry
	// (run.SaveAttemptsSpent): a takeover charges it unless the transcript
	// holds the call's result. Nil: none. It follows spent_since_point,
	// and is saved with it.
	CallInProgress *callInProgress `json:"call_in_progress,omitempty"`
	// FailedSincePoint are the store requests of the run's calls that
	// failed after the state this checkpoint holds, as of the run's last
	// save of them (run.storeFailed): a takeover's packet names them
	// (replay.Takeover.StoreFailures). Nil: none. It follows
	// call_in_progress, and is saved with it.
	FailedSincePoint []replay.StoreFailure `json:"store_failures_since_point,omitempty"`
}

// planTurn is the turn the plan in progress was made at.
func (cp *checkpointState) planTurn() int { return max(cp.Turn-1, 0) }

// encodeCheckpoint encodes st in the current version, at the revision it
// was loaded or last saved at.
func encodeCheckpoint(st *checkpointState) (*Checkpoint, error) {
	b, err := marshalCheckpoint(st)
	if err != nil {
		return nil, fmt.Errorf("contextos: encode checkpoint of %s: %w", st.RunID, err)
	}
	v := checkpointV2
	switch {
	case len(st.FailedSincePoint) > 0:
		v = checkpointV6
	case st.CallInProgress != nil:
		v = checkpointV5
	case st.SpentSincePoint != nil:
		v = checkpointV4
	case st.Unconfirmed != nil:
		v = checkpointV3
	}
	return &Checkpoint{RunID: st.RunID, Revision: st.rev, Version: v, Data: b, Awaiting: st.indexed()}, nil
}

// indexed is what a pending index keeps of st: its awaiting approval,
// or, for a run a runtime claimed to carry out the decision of its pause
// (Active, still at that pause: ClaimedPauseOf), that pause's, so a
// service finds a decided run whose runtime died after the claim (to take
// it over) in proportion to the runs at a pause, not to the stored runs.
// The run leaves the index with the claiming runtime's next save.
func (st *checkpointState) indexed() *AwaitedApproval {
	if st.Pending != nil && st.Active && !st.Terminal && st.Deferred != "" {
		a := &AwaitedApproval{GateID: st.Pending.GateID}
		if st.Run != nil {
			a.TenantID = st.Run.TenantID
		}
		return a
	}
	return st.awaiting()
}

// awaiting is the approval st waits for when it is paused at a gate (not
// being continued, not ended), nil otherwise. PendingApprovals lists
// exactly these runs.
func (st *checkpointState) awaiting() *AwaitedApproval {
	if st.Pending == nil || st.Active || st.Terminal {
		return nil
	}
	a := &AwaitedApproval{GateID: st.Pending.GateID}
	if st.Run != nil {
		a.TenantID = st.Run.TenantID
	}
	return a
}

// decodeCheckpoint decodes a stored checkpoint of any supported version.
func decodeCheckpoint(c *Checkpoint) (*checkpointState, error) {
	if !slices.Contains(checkpointVersions(), c.Version) {
		return nil, &CheckpointVersionError{RunID: c.RunID, Version: c.Version, Supported: checkpointVersions()}
	}
	// Versions 1 to 5 share their members (version 1's "rev" is ignored,
	// and it has no "ledger_packs"; only versions 3 to 5 have
	// "unconfirmed_record", only versions 4 and 5 "spent_since_point",
	// only version 5 "call_in_progress"), so one decoder reads them all.
	var st checkpointState
	if err := json.Unmarshal(c.Data, &st); err != nil {
		return nil, fmt.Errorf("contextos: checkpoint of %s is corrupt: %w", c.RunID, err)
	}
	if st.RunID != c.RunID {
		return nil, fmt.Errorf("contextos: checkpoint of %s is corrupt: it holds run %q", c.RunID, st.RunID)
	}
	if c.Version == checkpointV1 {
		st.LedgerPacks = ""
	}
	if c.Version < checkpointV3 {
		st.Unconfirmed = nil
	}
	if c.Version < checkpointV4 {
		st.SpentSincePoint = nil
	}
	if c.Version < checkpointV5 {
		st.CallInProgress = nil
	}
	if c.Version < checkpointV6 {
		st.FailedSincePoint = nil
	}
	st.rev, st.lease = c.Revision, c.Lease
	return &st, nil
}

// saveCheckpoint saves st over the revision it holds and moves it to the
// new one. An active run's checkpoint carries this runtime's claim, with
// a lease of Options.HeartbeatTTL from the save on the store's clock.
func (rt *Runtime) saveCheckpoint(ctx context.Context, st *checkpointState) error {
	c, err := rt.encodeForSave(st)
	if err != nil {
		return err
	}
	if err := rt.put(ctx, c); err != nil {
		return err
	}
	rt.savedAs(st, c)
	return nil
}

// saveOwnCheckpoint is saveCheckpoint for a state save of a run this
// runtime continues under its claim (a takeover point's, never the claim
// itself, which two runtimes may race to write byte for byte): a save the
// store kept but whose answer it lost is the run's (putOwn), and the
// run goes on at the store's revision, over which its next save is made
// (over the old one, that save would be refused as a takeover's).
func (rt *Runtime) saveOwnCheckpoint(ctx context.Context, st *checkpointState) error {
	c, err := rt.encodeForSave(st)
	if err != nil {
		return err
	}
	if err := rt.putOwn(ctx, st, c); err != nil {
		return err
	}
	rt.savedAs(st, c)
	return nil
}

// unansweredSave is a save of the run's own whose answer the store may
// have lost (checkpointState.unanswered).
type unansweredSave struct {
	// over is the revision the save was made over: kept, the store holds
	// it at over+1.
	over    int
	version int
	data    []byte
}

// putOwn saves c, a save of the run this runtime continues (st) over
// st.rev, whose bytes no other runtime could have written (see
// keptAnyway), and reports nil when the store holds it. A save the store
// fails is the run's when the store holds its very bytes at a newer
// revision (keptAnyway); one it refuses because the checkpoint moved on
// is made again over the store's revision when what moved it is an
// earlier save of this runtime's that the store kept though it could not
// be found then (st.unanswered, at exactly the revision after the one it
// was made over: a takeover's claim would be past it). A save the store
// fails and that could not be looked for (the load failed too) joins
// st.unanswered, with the revision it was made over (st.rev, or past it
// when it was made again over an earlier one kept).
func (rt *Runtime) putOwn(ctx context.Context, st *checkpointState, c *Checkpoint) error {
	over := c.Revision
	err := rt.put(ctx, c)
	if errors.Is(err, ErrCheckpointConflict) && len(st.unanswered) > 0 {
		if at, ok := rt.keptEarlier(ctx, st); ok {
			c.Revision = at
			over = at
			err = rt.put(ctx, c)
		}
	}
	if err == nil {
		st.unanswered = nil
		return nil
	}
	if errors.Is(err, ErrCheckpointConflict) {
		return err
	}
	kept, unknown := rt.keptAnyway(ctx, over, c)
	if kept {
		st.unanswered = nil
		return nil
	}
	if unknown {
		// At most the last few are kept: a run whose saves and loads
		// all fail stops once half of its lease has passed anyway.
		if len(st.unanswered) == maxUnanswered {
			st.unanswered = slices.Delete(st.unanswered, 0, 1)
		}
		st.unanswered = append(st.unanswered, unansweredSave{over: over, version: c.Version, data: c.Data})
	}
	return err
}

// maxUnanswered bounds checkpointState.unanswered.
const maxUnanswered = 4

// keptEarlier reports whether the store holds one of st.unanswered at
// the revision after the one it was made over, and returns that revision
// (at): a save of this runtime's, so nobody else wrote the run's
// checkpoint since st.rev. (One made over a revision past st.rev was
// made again over a save of this runtime's found kept there, and so on
// down to st.rev.)
func (rt *Runtime) keptEarlier(ctx context.Context, st *checkpointState) (at int, ok bool) {
	got, err := rt.opts.Checkpoints.Load(ctx, st.RunID)
	if err != nil || got == nil || got.Revision <= st.rev {
		return 0, false
	}
	ok = slices.ContainsFunc(st.unanswered, func(u unansweredSave) bool {
		return u.over+1 == got.Revision && u.version == got.Version && bytes.Equal(u.data, got.Data)
	})
	return got.Revision, ok
}

// put saves c over c.Revision (with the module's own store, keeping
// c.Data as it is: its caller made it for this save alone). A host's
// store is handed a copy of c with its own Data: the run keeps reading
// c.Data (the next save's request and run context JSON, a spend save's
// state), and what the store does to the bytes it was handed is not the
// run's. The revision the store moves its copy to is c's.
func (rt *Runtime) put(ctx context.Context, c *Checkpoint) error {
	if m, ok := rt.opts.Checkpoints.(*InMemoryCheckpoints); ok {
		return m.save(ctx, c, false)
	}
	hc := *c
	hc.Data = bytes.Clone(c.Data)
	err := rt.opts.Checkpoints.Save(ctx, &hc)
	c.Revision = hc.Revision
	return err
}

// encodeForSave is st as the checkpoint a save sends: an active run's
// carries this runtime's claim, with a lease of Options.HeartbeatTTL.
// Its Data is the encoder's own copy and nobody else holds it: the
// module's own store keeps it as it is rather than copy it again (put).
func (rt *Runtime) encodeForSave(st *checkpointState) (*Checkpoint, error) {
	c, err := encodeCheckpoint(st)
	if err != nil {
		return nil, err
	}
	if st.Active {
		c.Lease = rt.heartbeatTTL()
	}
	return c, nil
}

// savedAs moves st to c, the save of it the store kept.
func (rt *Runtime) savedAs(st *checkpointState, c *Checkpoint) {
	st.saved, st.cut = c.Data, st.enc.cut
	st.rev, st.heldAt, st.spentAt, st.unanswered = c.Revision, time.Time{}, time.Time{}, nil
	if st.Active {
		st.heldAt = rt.opts.Now()
	}
}

// keptAnyway reports whether the store kept c, a save over revision rev
// it failed, and lost its answer (a commit whose reply was cut off): it
// holds these very bytes at a newer revision, which c is then moved to.
// Only a save no other runtime could have written byte for byte may ask:
// a running run's own (a takeover's claim adds its resume, and a spend
// save's members are this runtime's), never a claim two runtimes may race
// for. The same bytes at rev are a previous save's, not this one's.
// unknown reports a load that failed: the store may hold c or not. (A
// load at rev or before it, a stale one, is not this save's either.)
func (rt *Runtime) keptAnyway(ctx context.Context, rev int, c *Checkpoint) (kept, unknown bool) {
	got, err := rt.opts.Checkpoints.Load(ctx, c.RunID)
	if err != nil || got == nil {
		return false, true
	}
	if got.Revision <= rev || got.Version != c.Version || !bytes.Equal(got.Data, c.Data) {
		return false, false
	}
	c.Revision = got.Revision
	return true, false
}

// pinLedgerPacks pins, on the run's first compile, the packs section of
// its context ledger, and refuses a later compile (a resume's) under
// other packs or overlays.
func (r *run) pinLedgerPacks(cc *compiler.CompiledContext) error {
	d, err := canon.Digest(cc.ContextLedger.Packs)
	if err != nil {
		return err
	}
	switch r.cp.LedgerPacks {
	case "":
		r.cp.LedgerPacks = d
	case d:
	default:
		return fmt.Errorf("%w: %w: run %s pins packs %s and this runtime compiles %s (is its environment overlay the run's?)", ErrNotResumable, ErrLedgerMismatch, r.rc.RunID, r.cp.LedgerPacks, d)
	}
	return nil
}

// loadCheckpoint loads and decodes a run's checkpoint.
func (rt *Runtime) loadCheckpoint(ctx context.Context, runID string) (*checkpointState, error) {
	c, err := rt.opts.Checkpoints.Load(ctx, runID)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("%w: no checkpoint for run %q (the store returned none)", ErrNotFound, runID)
	}
	return decodeCheckpoint(c)
}

// InMemoryCheckpoints is the in-memory CheckpointStore. It counts leases
// on its Now.
type InMemoryCheckpoints struct {
	// Now is the clock leases are counted on (default: time.Now). Set it
	// before the store is used; the runtime's default store uses
	// Options.Now.
	Now func() time.Time

	mu  sync.Mutex
	cps map[string]memCheckpoint
	// awaiting indexes the runs whose checkpoint awaits an approval, by
	// tenant (PendingIndex).
	awaiting map[string]map[string]bool
}

// memCheckpoint is a stored checkpoint and the end of its lease (zero:
// none).
type memCheckpoint struct {
	c        Checkpoint
	until    time.Time
	awaiting *AwaitedApproval
}

var _ CheckpointStore = (*InMemoryCheckpoints)(nil)

// NewInMemoryCheckpoints returns an empty store.
func NewInMemoryCheckpoints() *InMemoryCheckpoints {
	return &InMemoryCheckpoints{cps: map[string]memCheckpoint{}}
}

func (m *InMemoryCheckpoints) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Save implements CheckpointStore. The store keeps its own copy of
// cp.Data.
func (m *InMemoryCheckpoints) Save(ctx context.Context, cp *Checkpoint) error {
	return m.save(ctx, cp, true)
}

// save is Save; with copyData false the store keeps cp.Data itself, which
// its caller must never write again (the runtime's saveCheckpoint, whose
// encoder made the bytes for this save alone).
func (m *InMemoryCheckpoints) save(ctx context.Context, cp *Checkpoint, copyData bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("contextos: save checkpoint: %w", err)
	}
	var until time.Time
	if cp.Lease > 0 {
		until = m.now().Add(cp.Lease)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if at := m.cps[cp.RunID].c.Revision; at != cp.Revision {
		return fmt.Errorf("%w: run %s is at revision %d, the save is over %d", ErrCheckpointConflict, cp.RunID, at, cp.Revision)
	}
	if old := m.cps[cp.RunID].awaiting; old != nil {
		delete(m.awaiting[old.TenantID], cp.RunID)
		if len(m.awaiting[old.TenantID]) == 0 {
			delete(m.awaiting, old.TenantID)
		}
	}
	var aw *AwaitedApproval
	if cp.Awaiting != nil {
		c := *cp.Awaiting
		aw = &c
		if m.awaiting == nil {
			m.awaiting = map[string]map[string]bool{}
		}
		if m.awaiting[c.TenantID] == nil {
			m.awaiting[c.TenantID] = map[string]bool{}
		}
		m.awaiting[c.TenantID][cp.RunID] = true
	}
	data := cp.Data
	if copyData {
		data = bytes.Clone(data)
	}
	m.cps[cp.RunID] = memCheckpoint{c: Checkpoint{RunID: cp.RunID, Revision: cp.Revision + 1, Version: cp.Version, Data: data}, until: until, awaiting: aw}
	cp.Revision++
	return nil
}

// Load implements CheckpointStore.
func (m *InMemoryCheckpoints) Load(ctx context.Context, runID string) (*Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("contextos: load checkpoint: %w", err)
	}
	m.mu.Lock()
	s, ok := m.cps[runID]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: no checkpoint for run %q", ErrNotFound, runID)
	}
	c := s.c
	c.Data = bytes.Clone(c.Data)
	if !s.until.IsZero() {
		c.Lease = max(s.until.Sub(m.now()), 0)
	}
	return &c, nil
}

// renewedAt is when this runtime last saved the run's claim, with its
// state or with its spend alone (heldAt, spentAt).
func (st *checkpointState) renewedAt() time.Time {
	if st.spentAt.After(st.heldAt) {
		return st.spentAt
	}
	return st.heldAt
}
