package contextos

import "github.com/contextos/contextos/internal/engine"

// The runtime's errors: the engine's own values, so errors.Is and
// errors.As match them whichever package a caller names.
var (
	// ErrNotFound reports an unknown run, checkpoint or packet.
	ErrNotFound = engine.ErrNotFound
	// ErrNotResumable reports a Resume of a run that is not paused.
	ErrNotResumable = engine.ErrNotResumable
	// ErrResumeInput reports a Resume whose input does not answer what
	// the run awaits.
	ErrResumeInput = engine.ErrResumeInput
	// ErrConfig reports invalid options.
	ErrConfig = engine.ErrConfig
	// ErrRunInProgress reports an Invoke of a run id (by default derived
	// from tenant and request_id) whose run is still going.
	ErrRunInProgress = engine.ErrRunInProgress
	// ErrRequestConflict reports an Invoke whose run id already ran with
	// another request.
	ErrRequestConflict = engine.ErrRequestConflict
	// ErrReplayInputsLost reports a Capture of a run that a takeover
	// settled with the decision its runtime had stored before dying: the
	// run's record and transcript are whole, but what a replay needs of
	// the part that runtime ran died with it.
	ErrReplayInputsLost = engine.ErrReplayInputsLost
	// ErrCheckpointConflict reports a save over a revision another
	// runtime has already moved past: the run is being continued
	// elsewhere.
	ErrCheckpointConflict = engine.ErrCheckpointConflict
	// ErrCheckpointVersion reports a checkpoint in an encoding this
	// runtime does not read (one written by a newer runtime, say). The
	// error is a *CheckpointVersionError.
	ErrCheckpointVersion = engine.ErrCheckpointVersion
	// ErrLedgerMismatch reports a resume whose runtime compiles the run's
	// context under other packs or overlays than the run's checkpoint
	// pins. The error wraps ErrNotResumable too.
	ErrLedgerMismatch = engine.ErrLedgerMismatch
	// ErrLeaseHeld reports a takeover of a run whose claim's lease has
	// not lapsed on the checkpoint store's clock: a live runtime may still
	// be continuing it (errors.Is also matches ErrNotResumable).
	ErrLeaseHeld = engine.ErrLeaseHeld
	// ErrPanic reports a host plug-in (planner, critic, evidence source,
	// memory store, tokenizer, decision store) that panicked. The run
	// ends ESCALATED with a record where it had started; the panic value
	// and stack go to the log, never into a record, an error or a span.
	ErrPanic = engine.ErrPanic
	// ErrUsageUnknown reports a planner turn whose model usage the
	// provider did not report. A turn of unknown usage fails closed: the
	// run stops with "planner_failed: usage_unknown". A planner returns
	// an error matching it (errors.Is).
	ErrUsageUnknown = engine.ErrUsageUnknown
)

type (
	// CheckpointVersionError is the error for a checkpoint whose Version
	// this runtime cannot read. It matches ErrCheckpointVersion.
	CheckpointVersionError = engine.CheckpointVersionError
	// PanicError names the plug-in that panicked ("runtime" for a panic
	// outside the plug-ins). It matches ErrPanic.
	PanicError = engine.PanicError
)
