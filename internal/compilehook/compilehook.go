// Package compilehook holds what package compiler lets the module's own
// packages call and nothing outside the module can. Package compiler sets
// its functions when it is initialized: a package that imports compiler
// finds them set.
package compilehook

import (
	"context"

	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// CompileWithPolicy is p's (a *compiler.Prepared) Compile of req and rc
// that also returns the run-level policy evaluation the compile made:
// p.Engine()'s evaluation of policy.Input{RunID: rc.RunID, Data:
// policy.NewDocument(req.Input, rc)}, exactly as a fresh Evaluate of that
// input returns it, sharing no slice with the compiled context. cc is a
// *compiler.CompiledContext. On an error both are nil. The runtime hands
// the evaluation to the run's gateway (gatewayhook.WithPolicy), which
// then enforces it rather than evaluating the same input again.
var CompileWithPolicy func(p any, ctx context.Context, req *runcontext.InvokeRequest, rc *runcontext.RunContext) (cc any, eval *policy.Evaluation, err error)
