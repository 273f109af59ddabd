// Package engine is the run engine behind package contextos: the root
// package's Runtime and Options forward to it, and the root names its
// plug-in interfaces, events, results and errors by aliases, so a value
// or an error passes between a host and the engine as it is.
//
// It owns how a governed run goes:
//   - the canonical loop (loop.go): the planner's turns, the built-in and
//     host critics' verdicts (critic.go), tool calls through the gateway,
//     consolidation, the terminal record and replay capture;
//   - runs that outlive a call: the run's claim and checkpoint state and
//     its versioned codec (checkpoint.go), pauses and Resume (resume.go),
//     hard stops (stop.go), long_running heartbeats and leases
//     (longrun.go) and takeovers of a run whose runtime died
//     (takeover.go), the pending approvals and the pause hook (pending.go,
//     pausehook.go);
//   - Replay (replayrun.go): a packet is re-run on a Runtime in
//     ModeReplay, with the recorded planner, the playback adapters, the
//     packet's clock and compiled form, and fresh in-memory stores;
//   - what guards every run: plug-in panics (guard.go), identity claims
//     (identity.go), secrets kept out of what a run stores and logs
//     (secrets.go), planner usage charged to the budget (planusage.go),
//     the tools and decisions a planner is offered (plantools.go), the
//     write checks before a commit (verify.go), contract metadata
//     (contractmeta.go) and the run's operational metrics (metrics.go).
//
// The package's exported names are the root's API under the same names;
// nothing outside the module can import it.
package engine
