package schemas_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/schemas"
)

// Every compiled output validates against compiled-context.v1: the
// canonical scenario and its variants (truncated, read-only, denied).
func TestCompiledOutputsValidate(t *testing.T) {
	read := func(n string) []byte { return fixture.Read(t, n) }
	variants := map[string]func(req *runcontext.InvokeRequest, rc *runcontext.RunContext){
		"canonical": func(*runcontext.InvokeRequest, *runcontext.RunContext) {},
		"truncated": func(_ *runcontext.InvokeRequest, rc *runcontext.RunContext) {
			rc.RunBudget.BucketTokens[runcontext.BucketEvidence] = 50
		},
		"read only": func(_ *runcontext.InvokeRequest, rc *runcontext.RunContext) { rc.SafetyMode = runcontext.ReadOnly },
		"denied": func(req *runcontext.InvokeRequest, _ *runcontext.RunContext) {
			req.Input.Context["identity_verified"] = false
		},
	}
	for name, edit := range variants {
		p, err := pack.Decode(read("ctxpack.support-1.0.0.json"))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := runcontext.DecodeInvokeRequest(read("invoke.support-refund.json"))
		rc, _ := runcontext.DecodeRunContext(read("run-context.support.json"))
		var ev compiler.StaticEvidence
		var mem compiler.StaticMemory
		json.Unmarshal(read("evidence.support.json"), &ev)
		json.Unmarshal(read("memory.support.json"), &mem)
		edit(req, rc)
		cc, err := compiler.Compile(context.Background(), []compiler.Input{{Ref: pack.MustParseRef("ctxpack.support@1.0.0"), Pack: p}}, req, rc,
			&compiler.Options{Ontologies: []string{"ont.support@1.0.0"}, Evidence: ev, Memory: mem})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, _ := json.Marshal(cc)
		if err := schemas.Validate("compiled-context", b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
