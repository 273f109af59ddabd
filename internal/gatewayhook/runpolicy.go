package gatewayhook

// RunPolicy returns run's (a *gateway.Run) run-level policy evaluation
// (a *policy.Evaluation) as the run holds it, not a copy: the caller must
// change nothing it reaches, since the run enforces and records it.
// The runtime's built-in critic reads it here (it only reads);
// gateway.Run.Policy hands out copies.
var RunPolicy func(run any) any
