package pack

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/contextos/contextos/internal/logic"
)

// foldGuard checks and folds a raw expression; one that does not check
// folds to unknown.
func foldGuard(raw json.RawMessage) truth {
	if _, ok := parseGuard(raw); !ok {
		return truthUnknown
	}
	return fold(raw)
}

func TestFoldGuard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr string
		want truth
	}{
		{`false`, truthFalse},
		{`true`, truthTrue},
		{`0`, truthFalse},
		{`""`, truthFalse},
		{`[]`, truthFalse},
		{`[{"var":"x"}]`, truthTrue}, // a non-empty array is truthy whatever it holds
		{`{"==":[1,2]}`, truthFalse},
		{`{"==":[1,1]}`, truthTrue},
		{`{"===":["1",1]}`, truthFalse},
		{`{"!":true}`, truthFalse},
		{`{"!":[true]}`, truthFalse},
		{`{"!!":[0]}`, truthFalse},
		{`{"and":[false,{"var":"request.context.refund_amount"}]}`, truthFalse},
		// The engine's "and" returns an array argument as soon as it meets
		// it, so a var before a false may still make it truthy.
		{`{"and":[{"var":"x"},false]}`, truthFalse}, // x when x is falsy, else false: falsy either way
		{`{"and":[{">":[{"var":"x"},1]},false]}`, truthFalse},
		{`{"and":[{">":[{"var":"x"},1]},{"==":[1,2]}]}`, truthFalse},
		{`{"and":[1,0]}`, truthFalse},       // JsonLogic's "and": the first falsy argument, else the last
		{`{"and":[-1]}`, truthTrue},         // -1 is truthy
		{`{"and":[true,null]}`, truthFalse}, // null is falsy
		{`{"and":[true,{"var":"x"}]}`, truthUnknown},
		{`{"or":[{"var":"x"},true]}`, truthTrue},
		{`{"or":[false,0,""]}`, truthFalse},
		{`{"or":[false,{"var":"x"}]}`, truthUnknown},
		{`{"!":[{"or":[{"var":"x"},true]}]}`, truthFalse},
		{`{"!":{"or":[{"var":"x"},true]}}`, truthUnknown},  // "!" of a lone array x is "!" of its member
		{`{"or":[{"/":[{"var":"x"},0]},true]}`, truthTrue}, // x/0 is ±Inf (truthy, returned) or NaN (falsy, so true is)
		{`{"<":[{"var":"a"},{"var":"a"}]}`, truthFalse},
		{`{">":[{"var":"a"},{"var":"a"}]}`, truthFalse},
		{`{"<=":[{"var":"a"},{"var":"a"}]}`, truthUnknown},
		{`{"<":[{"var":"a"},{"var":"b"}]}`, truthUnknown},
		{`{">":[{"+":[1,2]},5]}`, truthFalse},
		{`{">":[{"var":"request.context.refund_amount"},3000]}`, truthUnknown},
		{`{"if":[false,{"var":"x"},0]}`, truthFalse},
		{`{"if":[{"var":"c"},0,false]}`, truthFalse},
		{`{"if":[{"var":"c"},1,false]}`, truthUnknown},
		{`{"?:":[true,{"==":[1,2]},true]}`, truthFalse},
		{`{"in":["x",["a","b"]]}`, truthFalse},
		{`{"in":[{"var":"x"},[]]}`, truthUnknown},
		{`{"missing":["a"]}`, truthUnknown},
		{`{"some":[[1,2],{">":[{"var":""},5]}]}`, truthUnknown},
		{`{"cat":["",""]}`, truthFalse},
		{`{"/":[0,0]}`, truthFalse}, // NaN is falsy
		{`{"and":[{"<":[{"var":"x"},1]},{"!":{"and":[true,true]}}]}`, truthFalse},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			t.Parallel()
			if got := foldGuard(json.RawMessage(tc.expr)); got != tc.want {
				t.Errorf("fold(%s) = %d, want %d", tc.expr, got, tc.want)
			}
		})
	}
	// What does not check folds to unknown; a deep expression does not
	// make folding slow or wrong.
	if f := foldGuard(json.RawMessage(`{"nope":[1]}`)); f != truthUnknown {
		t.Errorf("unsupported operator folded: %+v", f)
	}
	deep := strings.Repeat(`{"!":`, 30) + `false` + strings.Repeat(`}`, 30)
	if f := foldGuard(json.RawMessage(deep)); f != truthFalse {
		t.Errorf("30 negations of false = %+v, want false", f)
	}
}

func TestCompareGuards(t *testing.T) {
	t.Parallel()
	const amt = `{"var":"request.context.refund_amount"}`
	gt := func(n any) string { return fmt.Sprintf(`{">":[%s,%v]}`, amt, n) }
	role := `{"==":[{"var":"user.role"},"support_agent"]}`
	tests := []struct {
		name, old, new string
		want           guardChange
	}{
		{"identical", gt(3000), gt(3000), guardEquivalent},
		{"lowered threshold", gt(3000), gt(1000), guardWider},
		{"raised threshold", gt(3000), gt(30000), guardNarrower},
		{"raised by a fraction", gt(3000), gt(3000.5), guardNarrower},
		{"> to >= same bound", gt(3000), `{">=":[` + amt + `,3000]}`, guardWider},
		{">= to > same bound", `{">=":[` + amt + `,3000]}`, gt(3000), guardNarrower},
		{"operands swapped", gt(3000), `{"<":[3000,` + amt + `]}`, guardEquivalent},
		{"inverted comparison", gt(3000), `{"<":[` + amt + `,3000]}`, guardUnknown},
		{"negated", gt(3000), `{"!":` + gt(3000) + `}`, guardUnknown},
		{"double negation", gt(3000), `{"!":{"!":` + gt(3000) + `}}`, guardEquivalent},
		{"!! wrapper", gt(3000), `{"!!":` + gt(3000) + `}`, guardEquivalent},
		{"negated <= is >", gt(3000), `{"!":{"<=":[` + amt + `,3000]}}`, guardEquivalent},
		{"added disjunct", gt(3000), `{"or":[` + gt(3000) + `,` + role + `]}`, guardWider},
		{"added conjunct", gt(3000), `{"and":[` + gt(3000) + `,` + role + `]}`, guardNarrower},
		{"removed conjunct", `{"and":[` + role + `,` + gt(3000) + `]}`, gt(3000), guardWider},
		{"reordered conjuncts", `{"and":[` + role + `,` + gt(3000) + `]}`, `{"and":[` + gt(3000) + `,` + role + `]}`, guardEquivalent},
		{"lowered inside and", `{"and":[` + role + `,` + gt(3000) + `]}`, `{"and":[` + role + `,` + gt(2000) + `]}`, guardWider},
		{"raised inside and", `{"and":[` + role + `,` + gt(3000) + `]}`, `{"and":[` + role + `,` + gt(9000) + `]}`, guardNarrower},
		{"other variable", gt(3000), `{">":[{"var":"request.context.refund_amount_inr"},3000]}`, guardUnknown},
		{"threshold as string", gt(3000), gt(`"2000"`), guardUnknown},
		{"constant false", gt(3000), `false`, guardNarrower},
		{"folded false", gt(3000), `{"and":[false,` + gt(0) + `]}`, guardNarrower},
		{"constant true", gt(3000), `true`, guardWider},
		{"if wrapper", gt(3000), `{"if":[` + gt(3000) + `,true,false]}`, guardUnknown},
		{"in list widened", `{"in":[{"var":"user.role"},["a","b"]]}`, `{"in":[{"var":"user.role"},["a","b","c"]]}`, guardWider},
		{"in list narrowed", `{"in":[{"var":"user.role"},["a","b"]]}`, `{"in":[{"var":"user.role"},["a"]]}`, guardNarrower},
		{"upper bound lowered", `{"<":[` + amt + `,100]}`, `{"<":[` + amt + `,50]}`, guardNarrower},
		{"does not check", gt(3000), `{"nope":[1]}`, guardUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := compareGuards(json.RawMessage(tc.old), json.RawMessage(tc.new)); got != tc.want {
				t.Errorf("compareGuards(%s, %s) = %d, want %d", tc.old, tc.new, got, tc.want)
			}
		})
	}
}

// A hostile expression runs out of budget and is "not shown", quickly.
func TestCompareGuardsBudget(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"and":[`)
	for i := range 3000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{">":[{"var":"request.v%d"},%d]}`, i, i)
	}
	b.WriteString(`]}`)
	old := json.RawMessage(b.String())
	n := json.RawMessage(strings.Replace(b.String(), `"request.v2999"},2999`, `"request.v2999"},1`, 1))
	if got := compareGuards(old, n); got == guardEquivalent || got == guardNarrower {
		t.Errorf("compareGuards over budget = %d; it may only be unknown or wider", got)
	}
}

func TestTruthyNaN(t *testing.T) {
	if logic.Truthy(math.NaN()) {
		t.Error("NaN is truthy; JsonLogic treats it as falsy")
	}
	if !logic.Truthy(math.Inf(1)) || logic.Truthy(0.0) || !logic.Truthy(-1.0) {
		t.Error("logic.Truthy of numbers wrong")
	}
}

// Soundness: on random expressions over two numeric variables and one of
// any JSON type, whatever fold or implies claims holds when the
// expressions are evaluated by the JsonLogic engine the policy engine uses
// (logic.Truthy of its result), on sample data. An evaluation error is the
// engine failing closed, so it proves nothing either way.
func TestGuardSoundness(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 3))
	nums := []string{"request.x", "request.y"}
	consts := []float64{-1, 0, 1, 100, 3000, 3000.5}
	num := func() any { return map[string]any{"var": nums[r.IntN(2)]} }
	z := map[string]any{"var": "request.z"}
	var gen func(depth int) any
	gen = func(depth int) any {
		k := r.IntN(16)
		if depth <= 0 {
			k = r.IntN(5)
		}
		c := consts[r.IntN(len(consts))]
		switch k {
		case 0:
			op := []string{">", ">=", "<", "<="}[r.IntN(4)]
			if r.IntN(2) == 0 {
				return map[string]any{op: []any{num(), c}}
			}
			return map[string]any{op: []any{c, num()}}
		case 1:
			return []any{true, false, 0.0, 1.0, -1.0, "", "s", nil}[r.IntN(8)]
		case 2:
			return map[string]any{"==": []any{num(), c}}
		case 3:
			return z
		case 4:
			return map[string]any{"in": []any{num(), []any{c, 1.0}}}
		case 5, 6:
			return map[string]any{"and": []any{gen(depth - 1), gen(depth - 1)}}
		case 7, 8:
			return map[string]any{"or": []any{gen(depth - 1), gen(depth - 1)}}
		case 9:
			return map[string]any{"!": gen(depth - 1)}
		case 10:
			return map[string]any{"!!": []any{gen(depth - 1)}}
		case 11:
			return map[string]any{"if": []any{gen(depth - 1), gen(depth - 1), gen(depth - 1)}}
		case 12:
			return map[string]any{"-": []any{num(), c}}
		case 13:
			return map[string]any{"/": []any{num(), []any{0.0, 1.0}[r.IntN(2)]}}
		case 14:
			return []any{gen(depth - 1)}
		}
		v := num()
		return map[string]any{"<": []any{v, v}}
	}
	// mutate derives a related expression, so implications often hold.
	mutate := func(x any) any {
		switch r.IntN(6) {
		case 0:
			return map[string]any{"or": []any{x, gen(1)}}
		case 1:
			return map[string]any{"and": []any{x, gen(1)}}
		case 2:
			return map[string]any{"!": map[string]any{"!": x}}
		case 3:
			if c, ok := comparison(x); ok {
				c.c += []float64{-1, 0, 1}[r.IntN(3)]
				return c.expr()
			}
		case 4:
			if n, ok := operation(x); ok && (n.op == "and" || n.op == "or") {
				return n.args[r.IntN(len(n.args))]
			}
		}
		return gen(2)
	}
	points := []float64{-5, 0, 1, 100, 2999.5, 3000, 3000.5, 3001}
	zs := []any{[]any{}, []any{0.0}, map[string]any{}, "", 2.0, false}
	// truthAt is the expression's truthiness, or false when the engine fails.
	truthAt := func(x any, a, b float64, zv any) (truthy, ok bool) {
		defer func() {
			if recover() != nil {
				truthy, ok = false, false
			}
		}()
		raw, err := json.Marshal(x)
		if err != nil {
			return false, false
		}
		prog, err := logic.Compile(raw)
		if err != nil {
			return false, false
		}
		out, err := prog.Eval(map[string]any{"request": map[string]any{"x": a, "y": b, "z": zv}}, logic.Limits{})
		if err != nil {
			return false, false
		}
		return logic.Truthy(out), true
	}
	each := func(f func(x, y float64, zv any)) {
		for _, x := range points {
			for _, y := range points {
				for _, zv := range zs {
					f(x, y, zv)
				}
			}
		}
	}
	rounds := 2500
	if testing.Short() {
		rounds = 400
	}
	folds, claims := 0, 0
	for range rounds {
		a := gen(3)
		b := mutate(a)
		g := newGuard()
		if f := g.fold(a).topTruth(); f != truthUnknown {
			folds++
			each(func(x, y float64, zv any) {
				if got, ok := truthAt(a, x, y, zv); ok && got != (f == truthTrue) {
					t.Fatalf("fold(%s) claims %d, but at x=%g y=%g z=%v it is %v", js(a), f, x, y, zv, got)
				}
			})
		}
		if !g.implies(a, b) {
			continue
		}
		claims++
		each(func(x, y float64, zv any) {
			ta, ok1 := truthAt(a, x, y, zv)
			tb, ok2 := truthAt(b, x, y, zv)
			if ok1 && ok2 && ta && !tb {
				t.Fatalf("implies(%s, %s) but at x=%g y=%g z=%v the first holds and the second does not", js(a), js(b), x, y, zv)
			}
		})
	}
	t.Logf("%d folds and %d implications checked", folds, claims)
	if folds < rounds/20 || claims < rounds/10 {
		t.Errorf("only %d folds and %d implications shown; the generator does not exercise them", folds, claims)
	}
}

func js(x any) string {
	b, _ := json.Marshal(x)
	return string(b)
}
