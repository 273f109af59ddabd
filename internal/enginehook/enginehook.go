// Package enginehook is the seam a durable-execution host (temporalrun)
// uses to run the root package's engine inside deterministic workflow
// code, without widening the root package's exported API. The root
// package sets the functions in its init; they are nil in a program that
// does not link it.
package enginehook

// Inline marks a *contextos.Runtime to call its planner, compiler and
// adapters on the run's own goroutine, with no deadline of its own: the
// host bounds each planner turn and adapter attempt (a workflow's
// activity timeouts), and the run spawns no goroutine and reads no clock
// but its Options.Now. It panics when rt is not a *contextos.Runtime.
var Inline func(rt any)

// EncodePlanRequest encodes a *contextos.PlanRequest whole, with the tool
// schemas and decision options behind its Tools and Decisions, for a
// planner in another process.
var EncodePlanRequest func(req any) ([]byte, error)

// DecodePlanRequest decodes what EncodePlanRequest encoded into a
// *contextos.PlanRequest.
var DecodePlanRequest func(b []byte) (any, error)
