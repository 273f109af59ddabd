// Package gatewayhook holds what package gateway lets the module's own
// packages set and nothing outside the module can. Package gateway sets
// its functions when it is initialized: a package that imports gateway
// finds them set.
package gatewayhook

// ObserveShared makes opts (a *gateway.RunOptions) tell observe (a
// func(gateway.Attempt)) every attempt as the gateway holds it, not a
// copy of it: observe must change nothing it is told, since the call's
// result and its transcript entry are built from it. The runtime's
// replay recorder observes here (it only reads and keeps); an observer
// set as RunOptions.Observe is told copies.
var ObserveShared func(opts, observe any)

// VerifyWriteShared makes opts (a *gateway.RunOptions) ask verify (a
// func(*gateway.WriteCall) *gateway.ToolError) about every write with the
// call's own policy decisions as the gateway holds them, not copies, and
// keep the error verify returns without copying its details: verify must
// change nothing it is told and keep nothing it returns. The runtime's
// built-in evidence check is set here (it only reads the decisions and
// returns a new error each time); a hook set as RunOptions.VerifyWrite is
// told copies and its error's details are copied. It is used when
// RunOptions.VerifyWrite is not set.
var VerifyWriteShared func(opts, verify any)

// SaveSpent makes opts (a *gateway.RunOptions) tell saver, before each
// retry of a call, what the call's attempts spent so far, for it to make
// durable: saver has the method
//
//	SaveAttemptsSpent(ctx context.Context, toolCallID string, seq int, costCents float64, tokens int) error
//
// and an error from it means the run is no longer the caller's (a
// takeover has it): the gateway makes no further attempt and records
// nothing more of the call. The runtime saves there what a takeover
// charges if it dies before the call's result is recorded.
var SaveSpent func(opts, saver any)

// WithPolicy sets cfg's (a *gateway.RunConfig) run-level policy
// evaluation to eval (a *policy.Evaluation, as
// compilehook.CompileWithPolicy returns it with cfg's compiled context):
// the run enforces it rather than evaluating the same input again, and
// keeps it as its own. It is the module's own: a run bound through the
// exported RunConfig always evaluates its policy itself.
var WithPolicy func(cfg, eval any)

// Owned marks cfg's (a *gateway.RunConfig) request and run context as
// the runtime's own copies, which nothing changes for the run's life and
// no one else holds: the run keeps them instead of copying them. It is
// the module's own: a run bound through the exported RunConfig always
// copies them.
var Owned func(cfg any)

// VerifyChain verifies entries (a []gateway.TranscriptEntry, in order) as
// the part of a run's transcript chain that starts at sequence seq after
// the chain hash prev, as gateway.VerifyTranscript verifies a whole one
// (seq 0 after the genesis hash), and returns the last chain hash. The
// runtime verifies with it a transcript that keeps only a run's later
// entries (a bounded store dropped the earlier ones).
var VerifyChain func(entries any, seq int, prev string) (string, error)

// StoreFailed makes opts (a *gateway.RunOptions) tell notify (a
// func(context.Context, storefail.StoreFailure) error) each time a store the
// gateway needs for a call fails it: the idempotency store's claim or
// completion of a write's key, or the transcript sink's append of one of
// the call's entries (not one another runtime's entry refused: that run
// is not this runtime's). The runtime records them, so a replay fails the
// same requests, and saves each at once, so a takeover of a runtime that
// dies before its next checkpoint knows it. An error from notify is the
// run no longer the caller's (a takeover has it): it joins the call's
// error.
var StoreFailed func(opts, notify any)
