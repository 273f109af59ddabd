package policy

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/internal/logic"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// The differential tests: Evaluate gives what the frozen reference
// (evaluate_ref_test.go, the engine before its performance rewrite) gives,
// the whole Evaluation or the whole *Error, on the canonical packs and on
// generated packs and documents.

// diffCase is one evaluation to compare.
type diffCase struct {
	runID   string
	doc     Document
	signals []string
}

// diffPack prepares p with both engines and compares them over cases.
func diffPack(t *testing.T, p *pack.Pack, cases []diffCase) {
	t.Helper()
	opts := &Options{MaxOperations: 20000, MaxBytes: 1 << 18}
	if n := len(p.PolicyLayer.PolicyBundles); n > 0 && n%3 == 0 {
		// Small budgets: some evaluations run out mid-way.
		opts = &Options{MaxOperations: 12, MaxBytes: 64}
	}
	ref, refErr := refPrepare(p, opts)
	e, err := Prepare(p, opts)
	if !reflect.DeepEqual(refErr, err) {
		t.Fatalf("Prepare: reference error %v, engine error %v", refErr, err)
	}
	if err != nil {
		return
	}
	if ref.usesTool != e.UsesTool() || !reflect.DeepEqual(ref.perCall, e.PerCallGates()) {
		t.Fatalf("per-call gates: reference %v %+v, engine %v %+v", ref.usesTool, ref.perCall, e.UsesTool(), e.PerCallGates())
	}
	for i, c := range cases {
		in := Input{RunID: c.runID, Data: c.doc, Signals: c.signals}
		want, wantErr := ref.Evaluate(in)
		docBefore, sigBefore := fmt.Sprintf("%#v", c.doc), slices.Clone(c.signals)
		got, gotErr := e.Evaluate(in)
		if fmt.Sprintf("%#v", c.doc) != docBefore || !slices.Equal(c.signals, sigBefore) {
			t.Fatalf("case %d: Evaluate changed its input", i)
		}
		if !reflect.DeepEqual(wantErr, gotErr) || !reflect.DeepEqual(want, got) {
			pj, _ := json.Marshal(p.PolicyLayer)
			dj, _ := json.Marshal(c.doc)
			wj, _ := json.MarshalIndent(want, "", " ")
			gj, _ := json.MarshalIndent(got, "", " ")
			t.Fatalf("case %d differs\npolicy: %s\ndocument: %s\nsignals: %q run %q\nreference: %s (error %#v)\nengine: %s (error %#v)",
				i, pj, dj, c.signals, c.runID, wj, wantErr, gj, gotErr)
		}
	}
}

func supportInputs(t testing.TB) (*pack.Pack, Document, string) {
	t.Helper()
	p, err := pack.Decode(fixture.SupportPack())
	if err != nil {
		t.Fatal(err)
	}
	req, err := runcontext.DecodeInvokeRequest(fixture.Invoke())
	if err != nil {
		t.Fatal(err)
	}
	rc, err := runcontext.DecodeRunContext(fixture.RunContext())
	if err != nil {
		t.Fatal(err)
	}
	return p, NewDocument(req.Input, rc), rc.RunID
}

// packPaths are the paths p's rules and gates read and match on.
func packPaths(t testing.TB, p *pack.Pack) []string {
	seen := map[string]bool{"request.context.signals": true}
	add := func(raw json.RawMessage) {
		prog, err := logic.Compile(raw)
		if err != nil {
			return
		}
		for _, v := range prog.Info().Vars {
			seen[v] = true
		}
	}
	for _, b := range p.PolicyLayer.PolicyBundles {
		for _, r := range b.PolicyDSL.Rules {
			add(r.If)
			for k := range r.AppliesTo {
				seen[k] = true
			}
		}
	}
	for _, g := range p.PolicyLayer.ApprovalGates {
		add(g.When)
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	// Deterministic order for the generator.
	sortStrings(out)
	return out
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// gen generates policies and documents over a small set of paths that
// share prefixes.
type gen struct {
	r      *rand.Rand
	paths  []string
	labels []string
	strs   []string
	// clean packs read no variable without a default outside tool.* and
	// no number, so that most of their evaluations succeed.
	clean bool
}

func newGen(seed uint64) *gen {
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	g.paths = []string{
		"", "request", "request.context", "request.context.a", "request.context.b", "request.context.a.b",
		"request.context.items", "request.context.items.0", "request.context.items.1", "request.context.items.01",
		"request.context.signals", "request.context.signals.0", "user.role", "user", "user.", "user..x", ".a",
		"tool", "tool.args", "tool.args.amount", "tool.args.items.0.sku", "tool.capability_id", "tool.approval_mode",
		"intent", "tenant_id", "0", "a.0.b", "a.1", "é.ß", "x\u2028y", "safety_mode", "request.context.n",
	}
	g.labels = []string{"l0", "l1", "l2", "l3", "fraud", "pii", "é", "z", "", "l10"}
	g.strs = []string{"", "a", "b", "support_agent", "l1", "x\xff", "é", "\u2028", "0"}
	g.clean = g.r.IntN(3) != 0
	return g
}

func (g *gen) pick(list []string) string { return list[g.r.IntN(len(list))] }

func (g *gen) path() string {
	if g.r.IntN(12) == 0 {
		// A path made of random segments, sharing prefixes with the rest.
		base := g.pick(g.paths)
		return base + "." + strconv.Itoa(g.r.IntN(3))
	}
	return g.pick(g.paths)
}

// q quotes s as a JSON string, leaving invalid UTF-8 bytes as they are
// (a name with no canonical form of its own).
func q(s string) string {
	return `"` + strings.NewReplacer(`\\`, `\\\\`, `"`, `\\"`).Replace(s) + `"`
}

// scalar is a JSON scalar literal as an expression.
func (g *gen) scalar() string {
	switch g.r.IntN(6) {
	case 0:
		return strconv.Itoa(g.r.IntN(5))
	case 1:
		return q(g.pick(g.strs[:5]))
	case 2:
		return "true"
	case 3:
		return "false"
	case 4:
		return "null"
	}
	return "1.5"
}

func (g *gen) varExpr() string {
	path := g.path()
	p := q(path)
	if g.clean && !strings.HasPrefix(path, "tool.") {
		return `{"var":[` + p + `,` + g.scalar() + `]}`
	}
	switch g.r.IntN(9) {
	case 0, 6, 7, 8:
		return `{"var":[` + p + `,` + g.scalar() + `]}`
	case 1:
		return `{"var":[` + p + `]}`
	case 2:
		return `{"var":[` + p + `,{"var":` + q(g.path()) + `}]}`
	case 3:
		if g.r.IntN(3) == 0 {
			return `{"var":` + strconv.Itoa(g.r.IntN(2)) + `}`
		}
	}
	return `{"var":` + p + `}`
}

func (g *gen) expr(depth int) string {
	if depth > 3 {
		if g.r.IntN(2) == 0 {
			return g.varExpr()
		}
		return g.scalar()
	}
	op := g.r.IntN(12)
	if op == 1 {
		op = 11
	}
	if g.clean && (op == 2 || op == 10) {
		op = 0
	}
	switch op {
	case 0:
		return `{"==":[` + g.varExpr() + `,` + g.scalar() + `]}`
	case 2:
		return `{">":[` + g.varExpr() + `,` + strconv.Itoa(g.r.IntN(4)) + `]}`
	case 3:
		return `{"and":[` + g.expr(depth+1) + `,` + g.expr(depth+1) + `]}`
	case 4:
		return `{"or":[` + g.expr(depth+1) + `,` + g.expr(depth+1) + `]}`
	case 5:
		return `{"!":` + g.expr(depth+1) + `}`
	case 6:
		return `{"some":[` + g.varExpr() + `,{"==":[{"var":""},` + g.scalar() + `]}]}`
	case 7:
		return `{"missing":[` + q(g.path()) + `,` + q(g.path()) + `]}`
	case 8:
		return `{"in":[` + g.scalar() + `,` + g.varExpr() + `]}`
	case 9:
		return `{"if":[` + g.expr(depth+1) + `,` + g.varExpr() + `,` + g.scalar() + `]}`
	case 10:
		return `{"reduce":[` + g.varExpr() + `,{"+":[{"var":"accumulator"},1]},0]}`
	case 11:
		// Vars in loop bodies read the element (or the reduce's scope), not
		// the document; the reduce's initial value reads the document.
		switch g.r.IntN(5) {
		case 0:
			return `{"some":[` + g.varExpr() + `,{"==":[{"var":` + q(g.pick([]string{"a", "b", "0", "", "a.b", "x"})) + `},` + g.scalar() + `]}]}`
		case 1:
			return `{"in":[` + g.scalar() + `,{"map":[` + g.varExpr() + `,{"var":[` + q(g.pick([]string{"a", "b", "0", ""})) + `,"d"]}]}]}`
		case 2:
			return `{"==":[{"reduce":[` + g.varExpr() + `,{"cat":[{"var":"accumulator"},{"var":"current"}]},` + g.varExpr() + `]},"ab"]}`
		case 3:
			return `{"!":{"missing_some":[1,[` + q(g.path()) + `,` + q(g.path()) + `]]}}`
		}
		return `{"==":[{"var":[` + strconv.Itoa(g.r.IntN(2)) + `,"d"]},` + g.scalar() + `]}`
	}
	return g.varExpr()
}

func (g *gen) effect(gates []string) *pack.Effect {
	if g.r.IntN(4) == 0 {
		return nil
	}
	e := &pack.Effect{Reason: g.pick([]string{"", "r"})}
	switch g.r.IntN(3) {
	case 0:
		a := true
		e.Allow = &a
	case 1:
		a := false
		e.Allow = &a
	}
	if g.r.IntN(3) == 0 {
		e.Requires = []string{}
		for range g.r.IntN(3) {
			e.Requires = append(e.Requires, g.pick([]string{"idv", "otp", ""}))
		}
	}
	if g.r.IntN(3) == 0 {
		e.Raise = []string{}
		for range g.r.IntN(4) {
			e.Raise = append(e.Raise, g.pick(g.labels))
		}
	}
	if len(gates) > 0 && g.r.IntN(2) == 0 {
		e.RequiresApprovalGate = g.pick(gates)
		e.ApprovalMode = runcontext.Destructive
	}
	return e
}

func (g *gen) appliesValue() any {
	switch g.r.IntN(5) {
	case 0:
		return []any{g.pick(g.strs), float64(g.r.IntN(3))}
	case 1:
		return []string{g.pick(g.strs), g.pick(g.strs)}
	case 2:
		return json.Number(strconv.Itoa(g.r.IntN(3)))
	case 3:
		return g.r.IntN(2) == 0
	}
	return g.pick(g.strs)
}

func (g *gen) pack() *pack.Pack {
	var gateIDs []string
	var gates []pack.ApprovalGate
	nGates := g.r.IntN(12)
	for i := range nGates {
		id := "G" + strconv.Itoa(i)
		if i > 0 && g.r.IntN(5) == 0 {
			id = gateIDs[g.r.IntN(len(gateIDs))] // a duplicate id
		}
		gateIDs = append(gateIDs, id)
		gates = append(gates, pack.ApprovalGate{GateID: id, RequiredApproverRole: "role" + strconv.Itoa(i), TTLSeconds: i, When: json.RawMessage(g.expr(1))})
	}
	named := append([]string(nil), gateIDs...)
	named = append(named, "G_NONE")
	var bundles []pack.PolicyBundle
	nBundles := 1 + g.r.IntN(4)
	for b := range nBundles {
		id := "B" + strconv.Itoa(b)
		if b > 0 && g.r.IntN(4) == 0 {
			id = "B0" // a non-unique bundle id
		}
		if g.r.IntN(15) == 0 {
			id = "B\xff\"" // no canonical form of its own
		}
		var rules []pack.Rule
		for r := range g.r.IntN(8) {
			ruleID := fmt.Sprintf("R%d_%d", b, r)
			if g.r.IntN(20) == 0 {
				ruleID += strings.Repeat("_long", 60)
			}
			rule := pack.Rule{RuleID: ruleID, If: json.RawMessage(g.expr(0)), DecisionBinding: "db", Rationale: "why"}
			if g.r.IntN(3) == 0 {
				rule.AppliesTo = map[string]any{}
				for range 1 + g.r.IntN(2) {
					rule.AppliesTo[g.path()] = g.appliesValue()
				}
			}
			rule.Then, rule.Else = g.effect(named), g.effect(named)
			rules = append(rules, rule)
		}
		bundles = append(bundles, pack.PolicyBundle{BundleID: id, Priority: g.r.IntN(3), PolicyDSL: pack.PolicyDSL{Language: "jsonlogic", Rules: rules}})
	}
	p := &pack.Pack{}
	p.PolicyLayer.PolicyBundles = bundles
	p.PolicyLayer.ApprovalGates = gates
	p.PolicyLayer.Guardrails.MustRefuse = []string{"fraud", "l1", "é"}
	p.PolicyLayer.Guardrails.MustEscalate = []string{"pii", "l2", "l1"}
	if g.r.IntN(3) == 0 {
		p.PolicyLayer.Guardrails = pack.Guardrails{}
	}
	return p
}

// value is a document value; numbers come as float64, json.Number or int.
func (g *gen) value(depth int) any {
	n := 9
	if depth > 2 {
		n = 6
	}
	if g.r.IntN(10) == 0 {
		// Values a Go caller may put in a document: other number types,
		// numbers with no JSON form, long strings, typed lists and maps.
		odd := []any{math.NaN(), math.Inf(-1), math.Copysign(0, -1), 1e21, 1e-7, int64(3), uint8(2), float32(1.5),
			strings.Repeat("long\u00e9", 40), []string{"l1", "fraud"}, map[string]string{"a": "b"},
			Document{"a": 1.0}, struct{ A int }{1}, []any(nil), map[string]any(nil), json.Number("1e400"), json.Number("-0")}
		return odd[g.r.IntN(len(odd))]
	}
	switch g.r.IntN(n) {
	case 0:
		return nil
	case 1:
		return float64(g.r.IntN(5))
	case 2:
		return json.Number(strconv.Itoa(g.r.IntN(5)))
	case 3:
		return g.pick(g.strs)
	case 4:
		return g.r.IntN(2) == 0
	case 5:
		return g.r.IntN(5)
	case 6:
		var out []any
		for range g.r.IntN(4) {
			out = append(out, g.value(depth+1))
		}
		return out
	case 7:
		out := map[string]any{}
		for range g.r.IntN(3) {
			out[g.pick([]string{"a", "b", "0", "", "x", "a.b", "01"})] = g.value(depth + 1)
		}
		return out
	}
	var labels []any
	for range g.r.IntN(20) {
		if g.r.IntN(6) == 0 {
			labels = append(labels, 3.0)
		} else {
			labels = append(labels, g.pick(g.labels))
		}
	}
	return labels
}

// setPath writes v at path in doc, making maps (or arrays, for a numeric
// segment) on the way; a path through a scalar stops.
func setPath(doc map[string]any, path string, v any) {
	if path == "" {
		return
	}
	segs := strings.Split(path, ".")
	var cur any = doc
	for i, s := range segs {
		last := i == len(segs)-1
		switch x := cur.(type) {
		case map[string]any:
			if x == nil {
				return
			}
			if last {
				x[s] = v
				return
			}
			next, ok := x[s]
			if !ok {
				if _, err := strconv.Atoi(segs[i+1]); err == nil {
					next = []any{nil, nil, map[string]any{}}
				} else {
					next = map[string]any{}
				}
				x[s] = next
			}
			cur = next
		case []any:
			k, ok := logic.ArrayIndex(s)
			if !ok || k >= len(x) {
				return
			}
			if last {
				x[k] = v
				return
			}
			if x[k] == nil {
				x[k] = map[string]any{}
			}
			cur = x[k]
		default:
			return
		}
	}
}

func (g *gen) doc(paths []string) Document {
	doc := map[string]any{}
	for _, p := range paths {
		if g.r.IntN(8) != 0 {
			setPath(doc, p, g.value(0))
		}
	}
	if g.r.IntN(3) == 0 {
		// Not a per-call evaluation.
		delete(doc, toolRoot)
	}
	if g.r.IntN(4) == 0 {
		// Members whose names hold dots: no path reads them.
		doc["request.context"] = map[string]any{"a": 1.0}
		doc["a.b"] = "dotted"
	}
	return Document(doc)
}

func (g *gen) cases(paths []string, n int) []diffCase {
	var out []diffCase
	for range n {
		c := diffCase{runID: g.pick([]string{"run_1", "", "run_\xff", "run\"x", strings.Repeat("run", 120)}), doc: g.doc(paths)}
		switch g.r.IntN(40) {
		case 0:
			c.doc = nil
		case 1:
			c.doc = Document{}
		}
		for range g.r.IntN(4) {
			c.signals = append(c.signals, g.pick(g.labels))
		}
		out = append(out, c)
	}
	return out
}

// TestEvaluateMatchesReferenceCanonical compares the engines on the
// canonical packs (the support fixture, the examples' and the tests'
// packs) over their own documents and generated ones.
func TestEvaluateMatchesReferenceCanonical(t *testing.T) {
	p, doc, runID := supportInputs(t)
	g := newGen(1)
	cases := []diffCase{{runID: runID, doc: doc}, {runID: runID, doc: doc, signals: []string{"fraud_signal_high"}}}
	tool := doc.WithTool("adp_payments.issue_refund", map[string]any{"amount_inr": 4200, "order_id": "o1"}, runcontext.Destructive)
	cases = append(cases, diffCase{runID: runID, doc: tool})
	cases = append(cases, g.cases(packPaths(t, p), 300)...)
	diffPack(t, p, cases)
	files, _ := filepath.Glob("../examples/*/pack.json")
	files = append(files, "../agent/testdata/pack.coder.json", "../temporalrun/testdata/pack.json")
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Skip(err)
			}
			q, err := pack.Decode(raw)
			if err != nil {
				t.Skip(err)
			}
			diffPack(t, q, g.cases(packPaths(t, q), 200))
		})
	}
}

// TestEvaluateMatchesReferenceGenerated compares the engines on generated
// packs: paths sharing prefixes, nested and defaulted vars, tool.* vars,
// gates several rules name, duplicate gate ids, bundles sharing an id,
// more decisions and gates than the stack buffers hold, many labels.
func TestEvaluateMatchesReferenceGenerated(t *testing.T) {
	n := 400
	if testing.Short() {
		n = 50
	}
	for seed := range uint64(n) {
		g := newGen(seed)
		p := g.pack()
		diffPack(t, p, g.cases(g.paths, 20))
	}
}

// FuzzEvaluateMatchesReference: for any seed (a generated pack) and any
// JSON document, the engines agree.
func FuzzEvaluateMatchesReference(f *testing.F) {
	f.Add(uint64(0), []byte(`{"request":{"context":{"a":1,"signals":["l1","fraud"]}},"tool":{"args":{"amount":3}}}`), false)
	f.Add(uint64(7), []byte(`{"request":{"context":{"items":[{"sku":1},"b"],"a":{"b":null}}},"user":{"":"x","role":"support_agent"}}`), true)
	f.Add(uint64(42), []byte(`{"0":[1,2],"a":[{"b":1},{"b":2}],"user":{"":{"x":1}}}`), true)
	f.Fuzz(func(t *testing.T, seed uint64, data []byte, useNumber bool) {
		dec := json.NewDecoder(strings.NewReader(string(data)))
		if useNumber {
			dec.UseNumber()
		}
		var doc map[string]any
		if dec.Decode(&doc) != nil || doc == nil {
			return
		}
		g := newGen(seed)
		p := g.pack()
		cases := []diffCase{{runID: "run_fuzz", doc: Document(doc)}}
		diffPack(t, p, append(cases, g.cases(g.paths, 3)...))
	})
}

// TestEvaluateConcurrentMatchesReference evaluates on shared engines from
// several goroutines (run with -race) and compares with the reference.
func TestEvaluateConcurrentMatchesReference(t *testing.T) {
	type shared struct {
		ref   *refEngine
		e     *Engine
		cases []diffCase
	}
	var all []shared
	for seed := range uint64(20) {
		g := newGen(1000 + seed)
		p := g.pack()
		ref, err1 := refPrepare(p, nil)
		e, err2 := Prepare(p, nil)
		if err1 != nil || err2 != nil {
			continue
		}
		all = append(all, shared{ref, e, g.cases(g.paths, 10)})
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for w := range 4 {
		wg.Go(func() {
			for k := range 3 {
				for i, s := range all {
					c := s.cases[(i+w+k)%len(s.cases)]
					in := Input{RunID: c.runID, Data: c.doc, Signals: c.signals}
					want, wantErr := s.ref.Evaluate(in)
					got, gotErr := s.e.Evaluate(in)
					if !reflect.DeepEqual(wantErr, gotErr) || !reflect.DeepEqual(want, got) {
						select {
						case errs <- fmt.Sprintf("engine %d differs", i):
						default:
						}
					}
					if got != nil {
						// Editing one's own result must not reach the
						// other goroutines' results.
						for j := range got.Decisions {
							got.Decisions[j].Requires = append(got.Decisions[j].Requires, "x")
							got.Decisions[j].Raise = append(got.Decisions[j].Raise, "x")
							if got.Decisions[j].Allow != nil {
								*got.Decisions[j].Allow = !*got.Decisions[j].Allow
							}
						}
						for j := range got.Gates {
							got.Gates[j].ActivatedBy = append(got.Gates[j].ActivatedBy, "x")
						}
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestEvaluationEditsStayLocal: a caller that edits one part of an
// evaluation (appends to a list, writes its elements, flips an allow)
// changes no other part of it, no other evaluation and no later one.
func TestEvaluationEditsStayLocal(t *testing.T) {
	for seed := range uint64(150) {
		g := newGen(seed)
		p := g.pack()
		ref, err := refPrepare(p, nil)
		if err != nil {
			continue
		}
		e, err := Prepare(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range g.cases(g.paths, 5) {
			in := Input{RunID: c.runID, Data: c.doc, Signals: c.signals}
			want, err := ref.Evaluate(in)
			if err != nil {
				continue
			}
			// The edits, each of one part; restore puts the part back.
			type edit struct {
				name    string
				apply   func(r *Evaluation)
				restore func(r, from *Evaluation)
			}
			var edits []edit
			res, _ := e.Evaluate(in)
			scribble := func(s []string) []string {
				for i := range s {
					s[i] = "SCRIBBLED"
				}
				return append(s, "APPENDED", "APPENDED")
			}
			for i := range res.Decisions {
				edits = append(edits,
					edit{fmt.Sprintf("decision %d requires", i),
						func(r *Evaluation) { r.Decisions[i].Requires = scribble(r.Decisions[i].Requires) },
						func(r, from *Evaluation) { r.Decisions[i].Requires = from.Decisions[i].Requires }},
					edit{fmt.Sprintf("decision %d raise", i),
						func(r *Evaluation) { r.Decisions[i].Raise = scribble(r.Decisions[i].Raise) },
						func(r, from *Evaluation) { r.Decisions[i].Raise = from.Decisions[i].Raise }},
					edit{fmt.Sprintf("decision %d allow", i),
						func(r *Evaluation) {
							if a := r.Decisions[i].Allow; a != nil {
								*a = !*a
							}
						},
						func(r, from *Evaluation) { r.Decisions[i].Allow = from.Decisions[i].Allow }})
			}
			for i := range res.Gates {
				edits = append(edits, edit{fmt.Sprintf("gate %d activated by", i),
					func(r *Evaluation) { r.Gates[i].ActivatedBy = scribble(r.Gates[i].ActivatedBy) },
					func(r, from *Evaluation) { r.Gates[i].ActivatedBy = from.Gates[i].ActivatedBy }})
			}
			for i := range res.Manifest {
				edits = append(edits, edit{fmt.Sprintf("manifest %d", i),
					func(r *Evaluation) { r.Manifest[i].RuleIDs = scribble(r.Manifest[i].RuleIDs) },
					func(r, from *Evaluation) { r.Manifest[i].RuleIDs = from.Manifest[i].RuleIDs }})
			}
			edits = append(edits, edit{"lists",
				func(r *Evaluation) {
					_ = append(r.Decisions, Decision{RuleID: "APPENDED"})
					_ = append(r.Gates, Gate{GateID: "APPENDED"})
					_ = append(r.Manifest, ManifestEntry{BundleID: "APPENDED"})
					_ = append(r.Skipped, Skipped{RuleID: "APPENDED"})
					_ = append(r.Raised.MustRefuse, "APPENDED")
					_ = append(r.Raised.MustEscalate, "APPENDED")
				},
				func(r, from *Evaluation) {}})
			for _, ed := range edits {
				other, _ := e.Evaluate(in)
				r, _ := e.Evaluate(in)
				snap := r.Clone()
				ed.apply(r)
				ed.restore(r, snap)
				if !reflect.DeepEqual(r, want) {
					gj, _ := json.Marshal(r)
					wj, _ := json.Marshal(want)
					t.Fatalf("seed %d: editing %s changed the rest of the evaluation\n%s\n%s", seed, ed.name, gj, wj)
				}
				if !reflect.DeepEqual(other, want) {
					t.Fatalf("seed %d: editing %s changed another evaluation", seed, ed.name)
				}
				if again, _ := e.Evaluate(in); !reflect.DeepEqual(again, want) {
					t.Fatalf("seed %d: editing %s changed a later evaluation", seed, ed.name)
				}
			}
		}
	}
}

// TestPathMemoMatchesEvaluator: for every path shape (dots in a row, a
// leading or trailing dot, numeric segments into arrays and maps, "01",
// the whole document), what an evaluation's memo finds is what
// Document.lookup finds, and an expression given it (EvalVars) evaluates
// to what the evaluator's own lookup (Eval) gives, at the top level and
// as a default, also after another path sharing its prefix was read.
func TestPathMemoMatchesEvaluator(t *testing.T) {
	g := newGen(77)
	paths := append(slices.Clone(g.paths), "request.context.items.2", "request.context.items.-1", "request.context.items.+1",
		"request.context.a.", "request.context..a", "..", ".", "a.b", "user.role.0", "request.context.signals.1")
	for k := range 300 {
		doc := g.doc(g.paths)
		if k%50 == 0 {
			doc = nil
		}
		var tree pathTree
		nodes := make([]int32, len(paths))
		for i, p := range paths {
			nodes[i] = tree.intern(splitPath(p))
		}
		memo := pathMemo{tree: &tree, doc: doc}
		// Read in a shuffled order, twice: memoized and not.
		order := g.r.Perm(len(paths))
		for _, i := range append(order, order...) {
			p := paths[i]
			got, gotOK := memo.get(nodes[i])
			want, wantOK := doc.lookup(p)
			if gotOK != wantOK || fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
				t.Fatalf("path %q: memo %#v, %v; lookup %#v, %v", p, got, gotOK, want, wantOK)
			}
			for _, expr := range []string{`{"var":` + q(p) + `}`, `{"var":[` + q(p) + `,"DEFAULT"]}`, `{"cat":[{"var":[` + q(p) + `,"D"]},{"var":["zz",{"var":` + q(p) + `}]}]}`} {
				prog, err := logic.Compile(json.RawMessage(expr))
				if err != nil {
					t.Fatal(err)
				}
				vars := prog.Info().Vars
				viaEval, err1 := prog.Eval(map[string]any(doc), logic.Limits{})
				viaVars, err2 := prog.EvalVars(map[string]any(doc), logic.Limits{}, func(j int) (any, bool) {
					return memo.get(tree.intern(splitPath(vars[j])))
				})
				if fmt.Sprint(err1) != fmt.Sprint(err2) || fmt.Sprintf("%#v", viaEval) != fmt.Sprintf("%#v", viaVars) {
					t.Fatalf("%s: Eval %#v, %v; EvalVars %#v, %v", expr, viaEval, err1, viaVars, err2)
				}
			}
		}
	}
}
