package pack

import (
	"encoding/json"
	"reflect"
	"slices"

	"github.com/contextos/contextos/internal/logic"
)

// This file reasons about guard expressions (rule conditions and approval
// gate conditions) without data: constant folding (can a condition ever
// hold?) and implication (does a new condition hold whenever the old one
// did?). Both are sound and incomplete: what they cannot prove they report
// as unknown, and callers treat unknown as the unsafe answer.

// truth is what folding knows of an expression's JsonLogic truthiness.
type truth int8

const (
	truthUnknown truth = iota
	truthFalse
	truthTrue
)

func truthOf(b bool) truth {
	if b {
		return truthTrue
	}
	return truthFalse
}

// folded is the result of folding an expression: its value when it does
// not depend on data (known), else at most its truthiness.
type folded struct {
	val   any
	known bool
	truth truth
}

// knownValue is a known value, with its JsonLogic truthiness (the
// evaluator's, logic.Truthy: NaN, null, 0, "" and [] are falsy).
func knownValue(v any) folded {
	return folded{val: v, known: true, truth: truthOf(logic.Truthy(v))}
}

// topTruth is the truthiness of a folded guard as the policy engine
// judges a result (logic.Truthy).
func (f folded) topTruth() truth {
	if f.known {
		return truthOf(logic.Truthy(f.val))
	}
	return f.truth
}

// guardBudget bounds the steps of one fold or implication check: past it
// the answer is unknown (never a wrong "yes"), so a hostile expression
// cannot make validation or diff slow.
const guardBudget = 20000

type guard struct{ steps int }

func newGuard() *guard { return &guard{steps: guardBudget} }

func (g *guard) spend() bool {
	g.steps--
	return g.steps >= 0
}

// fold folds an expression that passed logic.Check: its truthiness
// whatever the data, if that can be shown.
func fold(raw json.RawMessage) truth {
	var expr any
	if err := json.Unmarshal(raw, &expr); err != nil {
		return truthUnknown
	}
	return newGuard().fold(expr).topTruth()
}

// parseGuard checks raw (supported operators, arities) and decodes it.
func parseGuard(raw json.RawMessage) (any, bool) {
	if _, err := logic.Check(raw); err != nil {
		return nil, false
	}
	var expr any
	if err := json.Unmarshal(raw, &expr); err != nil {
		return nil, false
	}
	return expr, true
}

// opn is an operation object: its operator, its arguments, and whether
// they were written as a list ({"!": [x]}) or alone ({"!": x}). The
// engine reads the two forms alike only when the lone argument is a
// boolean.
type opn struct {
	op   string
	args []any
	list bool
}

// operation returns the operation x is, if it is one.
func operation(x any) (opn, bool) {
	m, ok := x.(map[string]any)
	if !ok || len(m) != 1 {
		return opn{}, false
	}
	for op, a := range m {
		if l, ok := a.([]any); ok {
			return opn{op, l, true}, true
		}
		return opn{op, []any{a}, false}, true
	}
	return opn{}, false
}

// logical returns the operation x is when its arguments are a list or a
// lone boolean: the forms whose and/or/!/if mean what their name says.
func (g *guard) logical(x any) (opn, bool) {
	n, ok := operation(x)
	if !ok || !n.list && !g.boolTyped(n.args[0]) {
		return opn{}, false
	}
	return n, true
}

// fold evaluates what an expression's value or truthiness is whatever the
// data: and/or/!/!!/if short-circuit on what is known, "<" and ">" of a
// var with itself are false, and an operation whose arguments are all
// known is evaluated by the JsonLogic engine the runtime uses.
func (g *guard) fold(x any) folded {
	if !g.spend() {
		return folded{}
	}
	switch v := x.(type) {
	case nil, bool, float64, string:
		return knownValue(v)
	case []any:
		// The engine evaluates operations in an array only at the top of
		// an expression, so an array is a known value only when it holds
		// no operation.
		if !literal(v) {
			return folded{truth: truthOf(len(v) > 0)} // an array is truthy when not empty, whatever its members
		}
		return knownValue(v)
	case map[string]any:
		n, ok := operation(v)
		if !ok {
			return folded{}
		}
		return g.foldOp(n)
	}
	return folded{}
}

func isObject(v any) bool { _, ok := v.(map[string]any); return ok }

// literal reports a JSON value with no operation in it.
func literal(x any) bool {
	switch v := x.(type) {
	case map[string]any:
		return false
	case []any:
		for _, e := range v {
			if !literal(e) {
				return false
			}
		}
	}
	return true
}

func (g *guard) foldOp(n opn) folded {
	as := n.args
	switch n.op {
	case "var", "missing", "missing_some":
		return folded{}
	case "map", "filter", "reduce", "all", "none", "some":
		// The body reads each element; fold only a body-free constant.
		if readsData(as) {
			return folded{}
		}
	}
	fs := make([]folded, len(as))
	known := true
	for i, a := range as {
		fs[i] = g.fold(a)
		known = known && fs[i].known && !isObject(fs[i].val)
	}
	if known {
		return evalKnown(n, fs)
	}
	switch n.op {
	case "and", "or", "!", "!!", "if", "?:":
		if !n.list && !g.boolTyped(as[0]) {
			return folded{} // {"and": x} of an array is "and" of its members, and so on
		}
		switch n.op {
		case "and":
			return g.foldAnd(as, fs)
		case "or":
			return foldOr(as, fs)
		case "if", "?:":
			return foldIf(fs)
		}
		if fs[0].truth == truthUnknown {
			return folded{}
		}
		return knownValue((fs[0].truth == truthTrue) == (n.op == "!!"))
	case "<", ">":
		if len(as) == 2 && reflect.DeepEqual(as[0], as[1]) && isPlainVar(as[0]) {
			return knownValue(false) // x < x and x > x never hold (var operands of < and > must be numbers)
		}
	}
	return folded{}
}

// evalKnown evaluates an operation whose arguments are all known values,
// in the form it was written, with the engine; an engine failure folds
// to unknown.
func evalKnown(n opn, fs []folded) folded {
	vals := make([]any, len(fs))
	for i, f := range fs {
		vals[i] = f.val
	}
	arg := any(vals)
	if !n.list {
		arg = vals[0]
	}
	out, ok := evalConstant(n.op, arg)
	if !ok {
		return folded{}
	}
	return knownValue(out)
}

// foldAnd follows JsonLogic's "and" (the evaluator's): the first falsy
// argument, else the last. Its truthiness is the conjunction of its
// arguments' truthiness: false when one is surely falsy, true when all are
// surely truthy, else unknown.
func (g *guard) foldAnd(_ []any, fs []folded) folded {
	all := truthTrue
	for _, f := range fs {
		switch f.truth {
		case truthFalse:
			return folded{truth: truthFalse}
		case truthUnknown:
			all = truthUnknown
		}
	}
	return folded{truth: all}
}

// foldOr follows JsonLogic's "or": the first truthy argument, else the
// last. Its truthiness is the disjunction of its arguments' truthiness.
func foldOr(_ []any, fs []folded) folded {
	all := truthFalse
	for _, f := range fs {
		switch f.truth {
		case truthTrue:
			return folded{truth: truthTrue}
		case truthUnknown:
			all = truthUnknown
		}
	}
	return folded{truth: all}
}

// boolTyped reports an expression whose value is always a boolean (when
// it evaluates at all): comparisons, negations, "in", and and/or/if whose
// values are all boolean.
func (g *guard) boolTyped(x any) bool {
	if !g.spend() {
		return false
	}
	if _, ok := x.(bool); ok {
		return true
	}
	n, ok := operation(x)
	if !ok {
		return false
	}
	as := n.args
	switch n.op {
	case "<", ">", "<=", ">=", "==", "===", "!=", "!==", "in", "all", "none", "some":
		return true
	}
	if !n.list {
		// {"!": x}, {"and": x}, {"if": x} of a lone x: a boolean only
		// when x is (of null, "!" is null; of an array, "and" is "and" of
		// its members).
		switch n.op {
		case "!", "!!", "and", "or", "if":
			return g.boolTyped(as[0])
		}
		return false
	}
	switch n.op {
	case "!", "!!":
		return true
	case "and", "or":
		for _, a := range as {
			if !g.boolTyped(a) {
				return false
			}
		}
		return true
	case "if", "?:":
		if len(as)%2 == 0 {
			return false // no else: the value may be null
		}
		for i := 1; i < len(as); i += 2 {
			if !g.boolTyped(as[i]) {
				return false
			}
		}
		return g.boolTyped(as[len(as)-1])
	}
	return false
}

// nanFree reports an expression without arithmetic, so no value in it is
// NaN (data documents are JSON: they hold no NaN).
func nanFree(x any) bool {
	switch v := x.(type) {
	case []any:
		return !slices.ContainsFunc(v, func(e any) bool { return !nanFree(e) })
	case map[string]any:
		for op, a := range v {
			switch op {
			case "+", "-", "*", "/", "%", "max", "min", "reduce":
				return false
			}
			if !nanFree(a) {
				return false
			}
		}
	}
	return true
}

// foldIf follows "if": the value after the first truthy condition, else
// the last argument when their number is odd, else null.
func foldIf(fs []folded) folded {
	switch len(fs) {
	case 0:
		return knownValue(nil)
	case 1:
		return fs[0]
	}
	switch fs[0].truth {
	case truthTrue:
		return fs[1]
	case truthFalse:
		return foldIf(fs[2:])
	}
	a, b := fs[1], foldIf(fs[2:])
	if a.truth == b.truth && a.truth != truthUnknown {
		return folded{truth: a.truth}
	}
	return folded{}
}

// evalConstant applies op to constant arguments with the JsonLogic
// evaluator the policy engine uses (within its default budget); an error
// or panic is "not known".
func evalConstant(op string, arg any) (out any, ok bool) {
	defer func() {
		if recover() != nil {
			out, ok = nil, false
		}
	}()
	raw, err := json.Marshal(map[string]any{op: arg})
	if err != nil {
		return nil, false
	}
	prog, err := logic.Compile(raw)
	if err != nil {
		return nil, false
	}
	out, err = prog.Eval(map[string]any{}, logic.Limits{})
	if err != nil {
		return nil, false
	}
	return out, true
}

// readsData reports whether x reads the data document anywhere.
func readsData(x any) bool {
	switch v := x.(type) {
	case []any:
		return slices.ContainsFunc(v, readsData)
	case map[string]any:
		for op, a := range v {
			if op == "var" || op == "missing" || op == "missing_some" || readsData(a) {
				return true
			}
		}
	}
	return false
}

// isPlainVar reports {"var":"path"} (or {"var":["path"]}) with no default.
func isPlainVar(x any) bool {
	n, ok := operation(x)
	if !ok || n.op != "var" || len(n.args) != 1 {
		return false
	}
	p, ok := n.args[0].(string)
	return ok && p != ""
}

// guardChange is how a new condition relates to an old one.
type guardChange int

const (
	guardEquivalent guardChange = iota // holds exactly when the old one did (provably)
	guardWider                         // holds in every case the old one did, maybe more
	guardNarrower                      // holds only in cases the old one did, maybe fewer
	guardUnknown                       // neither could be shown
)

// compareGuards classifies the change from old to new. Expressions that
// do not parse or check are unknown.
func compareGuards(old, new json.RawMessage) guardChange {
	o, ok1 := parseGuard(old)
	n, ok2 := parseGuard(new)
	if !ok1 || !ok2 {
		return guardUnknown
	}
	g := newGuard()
	wider, narrower := g.implies(o, n), g.implies(n, o)
	switch {
	case wider && narrower:
		return guardEquivalent
	case wider:
		return guardWider
	case narrower:
		return guardNarrower
	}
	return guardUnknown
}

// implies reports that whenever a is truthy, b is truthy, for every data
// document the runtime evaluates: truthiness is the policy engine's
// (logic.Truthy of the engine's result), and var operands of comparisons are
// numbers (the engine refuses anything else). false means "not shown".
//
// The engine's "and" is not JsonLogic's for numbers and null, and inside
// an operation it counts NaN as truthy, so the rules that look inside
// and, or and ! apply only to operands whose values are booleans, and a
// disjunction's value must be free of NaN.
func (g *guard) implies(a, b any) bool {
	if !g.spend() {
		return false
	}
	a, b = g.strip(a), g.strip(b)
	if reflect.DeepEqual(a, b) {
		return true
	}
	if g.fold(a).topTruth() == truthFalse || g.fold(b).topTruth() == truthTrue {
		return true
	}
	an, aok := g.logical(a)
	bn, bok := g.logical(b)
	aop, aargs, bop, bargs := an.op, an.args, bn.op, bn.args
	allBool := func(xs []any) bool {
		for _, x := range xs {
			if !g.boolTyped(x) {
				return false
			}
		}
		return true
	}
	// b is a conjunction of booleans: a must imply each conjunct.
	if bok && bop == "and" && allBool(bargs) {
		for _, c := range bargs {
			if !g.implies(a, c) {
				return false
			}
		}
		return true
	}
	// a is a disjunction: it is truthy only as one of its disjuncts is, so
	// each must imply b.
	if aok && aop == "or" {
		for _, d := range aargs {
			if !g.implies(d, b) {
				return false
			}
		}
		return true
	}
	// a is a conjunction of booleans: one conjunct implying b is enough.
	if aok && aop == "and" && allBool(aargs) {
		for _, c := range aargs {
			if g.implies(c, b) {
				return true
			}
		}
	}
	// b is a NaN-free disjunction: implying one boolean disjunct is enough.
	if bok && bop == "or" && nanFree(b) {
		for _, d := range bargs {
			if g.boolTyped(d) && g.implies(a, d) {
				return true
			}
		}
	}
	// Contraposition: !x implies !y when y implies x (x, y booleans).
	if aok && bok && aop == "!" && bop == "!" && g.boolTyped(aargs[0]) && g.boolTyped(bargs[0]) {
		return g.implies(bargs[0], aargs[0])
	}
	if ca, ok := comparison(a); ok {
		if cb, ok := comparison(b); ok {
			return ca.implies(cb)
		}
	}
	if aok && bok && aop == "in" && bop == "in" && len(aargs) == 2 && len(bargs) == 2 && reflect.DeepEqual(aargs[0], bargs[0]) {
		al, ok1 := literalList(aargs[1])
		bl, ok2 := literalList(bargs[1])
		if ok1 && ok2 {
			for _, x := range al {
				if !slices.ContainsFunc(bl, func(y any) bool { return reflect.DeepEqual(x, y) }) {
					return false
				}
			}
			return true
		}
	}
	return false
}

// strip removes wrappers that keep a boolean's truthiness: !!x and !(!x)
// are x when x is a boolean, and !(var op c) is the opposite comparison.
func (g *guard) strip(x any) any {
	for {
		n, ok := operation(x)
		if !ok || len(n.args) != 1 {
			return x
		}
		as := n.args
		switch n.op {
		case "!!":
			if g.boolTyped(as[0]) {
				x = as[0]
				continue
			}
		case "!":
			if in, ok := operation(as[0]); ok && in.op == "!" && len(in.args) == 1 && g.boolTyped(in.args[0]) {
				x = in.args[0]
				continue
			}
			if c, ok := comparison(as[0]); ok {
				return c.negate().expr()
			}
		}
		return x
	}
}

// cmp is a comparison of a plain var against a number: v op c.
type cmp struct {
	v  any
	op string
	c  float64
}

var flipped = map[string]string{">": "<", ">=": "<=", "<": ">", "<=": ">="}

// comparison normalizes {">": [var, c]} and {">": [c, var]} (and >=, <,
// <=) to var op c.
func comparison(x any) (cmp, bool) {
	n, ok := operation(x)
	op, as := n.op, n.args
	if !ok || len(as) != 2 || flipped[op] == "" {
		return cmp{}, false
	}
	if c, isNum := as[1].(float64); isNum && isPlainVar(as[0]) {
		return cmp{as[0], op, c}, true
	}
	if c, isNum := as[0].(float64); isNum && isPlainVar(as[1]) {
		return cmp{as[1], flipped[op], c}, true
	}
	return cmp{}, false
}

func (c cmp) negate() cmp {
	return cmp{c.v, map[string]string{">": "<=", ">=": "<", "<": ">=", "<=": ">"}[c.op], c.c}
}

func (c cmp) expr() any { return map[string]any{c.op: []any{c.v, c.c}} }

// implies: v op1 c1 ⇒ v op2 c2 for every number v.
func (c cmp) implies(d cmp) bool {
	if !reflect.DeepEqual(c.v, d.v) {
		return false
	}
	up := func(op string) bool { return op == ">" || op == ">=" }
	if up(c.op) != up(d.op) {
		return false
	}
	if up(c.op) {
		// v > c1 (or ≥) ⇒ v > c2 (or ≥): c2 below c1, or equal unless only the new one is strict.
		return d.c < c.c || d.c == c.c && !(c.op == ">=" && d.op == ">")
	}
	return d.c > c.c || d.c == c.c && !(c.op == "<=" && d.op == "<")
}

// literalList returns a list of scalars (no operations).
func literalList(x any) ([]any, bool) {
	l, ok := x.([]any)
	if !ok {
		return nil, false
	}
	for _, e := range l {
		switch e.(type) {
		case nil, bool, float64, string:
		default:
			return nil, false
		}
	}
	return l, true
}
