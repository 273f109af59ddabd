package engine

import (
	"context"
	"maps"

	"github.com/contextos/contextos/gateway"
)

// notifyPause tells Options.OnPause of the pause cp now holds, persisted:
// the pending approval as PendingApprovals describes it. A replay is not
// a pause, and a hook that fails or panics does not change the run.
func (rt *Runtime) notifyPause(ctx context.Context, cp *checkpointState) {
	if rt.opts.OnPause == nil || rt.mode == ModeReplay || cp.Pending == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			_ = rt.recovered(p, "pause hook", cp.RunID)
		}
	}()
	known := gateway.BuiltinRedactors()
	maps.Copy(known, rt.opts.Gateway.Redactors)
	p, err := rt.pendingApproval(ctx, cp, known)
	if err != nil {
		rt.opts.Logger.Error("pause hook not called: the pending approval cannot be described", "run_id", cp.RunID, "error", logWords(err))
		return
	}
	rt.opts.OnPause(ctx, p)
}
