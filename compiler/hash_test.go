package compiler_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/runcontext"
)

// runSpecific gives s the run-specific members of another run of the same
// request: run id, request id (sometimes a UUID), trace and span ids,
// trace context, and the compile clock (within the evidence's freshness).
func runSpecific(t *testing.T, s *scenario, rng *rand.Rand) {
	t.Helper()
	hexOf := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		b[0] |= 1 // never all zero
		return hex.EncodeToString(b)
	}
	s.rc.RunID = "run_" + hexOf(8)
	switch rng.IntN(3) {
	case 0:
		s.req.RequestID = "req_" + hexOf(6)
	case 1:
		u := hexOf(16)
		s.req.RequestID = fmt.Sprintf("%s-%s-%s-%s-%s", u[:8], u[8:12], u[12:16], u[16:20], u[20:])
	default:
		s.req.RequestID = strings.ToUpper(hexOf(13))[:26]
	}
	trace, span := hexOf(16), hexOf(8)
	s.req.Trace.TraceID, s.req.Trace.SpanID, s.rc.TraceID = trace, span, trace
	s.rc.TraceContext = &runcontext.TraceContext{TraceParent: "00-" + trace + "-" + span + "-0" + fmt.Sprint(rng.IntN(2))}
	if rng.IntN(2) == 0 {
		s.req.Trace.TraceState = "tenant=tenant_acme_prod,r=" + hexOf(4)
	}
	s.opts.At = s.opts.At.Add(time.Duration(rng.IntN(3600)) * time.Second)
}

// Property: pairs of runs that differ only in run-specific members have
// the same compiled_context_hash (and different ledger_hashes); the policy
// decision ids, derived from the run id, differ, and the prompt shows none
// of them.
func TestCompiledHashIsRunIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 1))
	base := canonicalScenario(t)
	base.opts.At = time.Date(2026, 5, 3, 9, 0, 0, 0, time.UTC)
	want := base.compile(t)
	for i := range 200 {
		s := canonicalScenario(t)
		s.opts.At = base.opts.At
		runSpecific(t, s, rng)
		cc := s.compile(t)
		if cc.Hash() != want.Hash() {
			a, _ := json.Marshal(want.CompiledPrompt)
			b, _ := json.Marshal(cc.CompiledPrompt)
			t.Fatalf("run %d (%s, %s): compiled_context_hash %s, want %s\\n%s", i, s.rc.RunID, s.req.RequestID, cc.Hash(), want.Hash(), cmp.Diff(string(a), string(b)))
		}
		if cc.ContextLedger.LedgerHash == want.ContextLedger.LedgerHash {
			t.Fatalf("run %d: the ledgers of two runs hash alike", i)
		}
		if err := cc.Verify(); err != nil {
			t.Fatal(err)
		}
		prompt, _ := json.Marshal(cc.CompiledPrompt)
		for _, d := range cc.ContextLedger.PolicyResults {
			if d.PolicyDecisionID == "" || strings.Contains(string(prompt), d.PolicyDecisionID) {
				t.Fatalf("run %d: policy decision id %q is in the prompt (or empty)", i, d.PolicyDecisionID)
			}
		}
		for _, id := range []string{s.rc.RunID, s.req.RequestID, s.rc.TraceID} {
			if strings.Contains(string(prompt), id) {
				t.Fatalf("run %d: run-specific id %s is in the prompt", i, id)
			}
		}
	}
}

// Property: any change to the prompt, a manifest, the runtime controls or
// the budget report moves compiled_context_hash, and Verify notices a hash
// that no longer matches.
func TestCompiledHashCoversContent(t *testing.T) {
	base := canonicalScenario(t).compile(t)
	raw, err := json.Marshal(base)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	// Every leaf of the four hashed members, by path.
	type leaf struct {
		path []any
		v    any
	}
	var leaves []leaf
	var walk func(path []any, v any)
	walk = func(path []any, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(append(append([]any{}, path...), k), e)
			}
		case []any:
			for i, e := range x {
				walk(append(append([]any{}, path...), i), e)
			}
		default:
			leaves = append(leaves, leaf{path, v})
		}
	}
	for _, k := range []string{"compiled_prompt", "manifests", "runtime_controls", "budget_report"} {
		walk([]any{k}, doc[k])
	}
	if len(leaves) < 50 {
		t.Fatalf("only %d leaves", len(leaves))
	}
	for _, l := range leaves {
		var cc compiler.CompiledContext
		if err := json.Unmarshal(mutate(t, raw, l.path, false), &cc); err != nil {
			// An enum member takes another value of its enum.
			if err := json.Unmarshal(mutate(t, raw, l.path, true), &cc); err != nil {
				t.Fatalf("%v: %v", l.path, err)
			}
		}
		// Verify checks the content hash first: the ledger still holds the
		// base's compiled_context_hash, so a moved hash is reported.
		if err := cc.Verify(); !errors.Is(err, compiler.ErrHash) || !strings.Contains(err.Error(), "compiled_context_hash is "+base.Hash()) {
			t.Errorf("changing %v (%v): Verify = %v, want the compiled_context_hash moved", l.path, l.v, err)
		}
	}
	// The ledger is not compiled content: changing it moves ledger_hash
	// only.
	var cc compiler.CompiledContext
	_ = json.Unmarshal(raw, &cc)
	cc.ContextLedger.RunID = "run_other"
	if err := cc.Verify(); err == nil || !strings.Contains(err.Error(), "ledger_hash") || strings.Contains(err.Error(), "compiled_context_hash") {
		t.Errorf("Verify of an edited ledger = %v, want a ledger_hash mismatch", err)
	}
}

// mutate returns doc (JSON) with the leaf at path changed; with enum set,
// a string leaf takes another approval mode.
func mutate(t *testing.T, raw []byte, path []any, enum bool) []byte {
	t.Helper()
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var set func(v any, p []any) any
	set = func(v any, p []any) any {
		if len(p) == 0 {
			switch x := v.(type) {
			case string:
				if enum {
					if x == string(runcontext.ReadOnly) {
						return string(runcontext.Destructive)
					}
					return string(runcontext.ReadOnly)
				}
				return x + "~"
			case float64:
				return x + 1
			case bool:
				return !x
			case nil:
				return "x"
			}
			t.Fatalf("leaf %T", v)
		}
		switch x := v.(type) {
		case map[string]any:
			x[p[0].(string)] = set(x[p[0].(string)], p[1:])
		case []any:
			x[p[0].(int)] = set(x[p[0].(int)], p[1:])
		}
		return v
	}
	out, err := json.Marshal(set(doc, path))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Form1 reproduces the compiled output of the form before it, byte for
// byte: the golden recorded then (hash over the whole context, policy
// decision ids in the prompt, no environment defaults). Replay compiles
// packets recorded in Form1 this way.
func TestForm1ReproducesTheEarlierForm(t *testing.T) {
	s := canonicalScenario(t)
	s.opts.Form = compiler.Form1
	cc := s.compile(t)
	got, err := json.MarshalIndent(cc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "canonical.compiled.form1.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)+"\n"); diff != "" {
		t.Errorf("Form1 output differs from the earlier form (-earlier +got):\n%s", diff)
	}
	// The same prepared packs compile both forms.
	p, err := compiler.Prepare(canonicalScenario(t).inputs(), &canonicalScenario(t).opts)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := p.Compile(ctx, s.req, s.rc)
	if err != nil {
		t.Fatal(err)
	}
	old, err := p.WithForm(compiler.Form1).Compile(ctx, s.req, s.rc)
	if err != nil {
		t.Fatal(err)
	}
	if old.Hash() != cc.Hash() || cur.Hash() == old.Hash() || old.ContextLedger.LedgerHash != "" {
		t.Errorf("WithForm(Form1) hash %s, Compile hash %s, current %s", old.Hash(), cc.Hash(), cur.Hash())
	}
}
