package logic

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The budget of an expression. The static limits are part of the pack
// format (a pack valid on one host is valid on every host), so they are
// constants; the evaluation limits are per host ([Limits]).
const (
	// MaxDepth bounds the nesting of operators in an expression.
	MaxDepth = 64
	// MaxNodes bounds the JSON values (operators, arrays and literals) in
	// one expression.
	MaxNodes = 10_000
	// DefaultMaxOps is the default of Limits.MaxOps: a rule of a typical
	// pack takes 5 to 50; a some/all over 1,000 line items with a five-step
	// body takes about 6,000.
	DefaultMaxOps = 100_000
	// DefaultMaxBytes is the default of Limits.MaxBytes.
	DefaultMaxBytes = 4 << 20
)

// Limits bounds one evaluation. A zero field takes its default.
type Limits struct {
	// MaxOps bounds the steps of one evaluation: one per operator applied
	// and per array element an operator visits, one per started KiB of
	// string an operator reads or builds. Default DefaultMaxOps.
	MaxOps int
	// MaxBytes bounds what one evaluation builds: the bytes of the strings
	// it makes plus 16 per array element. Default DefaultMaxBytes.
	MaxBytes int
	// StrictNumbers makes a value JsonLogic would read as a number without
	// being one an error (a *NumberError) instead of a NaN or a coercion:
	// an operand of +, -, *, /, %, max or min that is not a number (or is
	// NaN), and a comparison (<, <=, >, >=) of anything but two numbers or
	// two strings. A NaN makes every comparison false, so a control written
	// as one (a total above a threshold) would otherwise not hold for data
	// that carries a non-number where the total reads it.
	StrictNumbers bool
}

// NumberError is a value read as a number that is not one, in an
// evaluation with Limits.StrictNumbers; the evaluation has no result.
type NumberError struct {
	// Path locates the operator in the expression ("" is the expression
	// itself).
	Path string
	// Op is the operator; Got says what it was given ("a string").
	Op, Got string
}

func (e *NumberError) Error() string {
	msg := fmt.Sprintf("operator %q needs numbers, got %s", e.Op, e.Got)
	if e.Path == "" {
		return msg
	}
	return e.Path + ": " + msg
}

func (l Limits) withDefaults() Limits {
	if l.MaxOps <= 0 {
		l.MaxOps = DefaultMaxOps
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// ErrBudget matches a *BudgetError.
var ErrBudget = errors.New("JsonLogic budget exceeded")

// Budget limits named by BudgetError.Limit.
const (
	LimitDepth      = "depth"      // MaxDepth (static)
	LimitNodes      = "nodes"      // MaxNodes (static)
	LimitOperations = "operations" // Limits.MaxOps
	LimitBytes      = "bytes"      // Limits.MaxBytes
)

// BudgetError is an expression over its budget: statically (too deep or
// too large; it also matches ErrExpression, since the expression is
// refused) or during an evaluation (too much work; the evaluation has no
// result and must fail closed).
type BudgetError struct {
	// Path locates the operator at fault in the expression ("and[1].map";
	// "" is the expression itself).
	Path string
	// Limit is LimitDepth, LimitNodes, LimitOperations or LimitBytes.
	Limit string
	// Max is the limit's value.
	Max int
}

func (e *BudgetError) Error() string {
	var msg string
	switch e.Limit {
	case LimitDepth:
		msg = fmt.Sprintf("expression nested too deeply (more than %d levels)", e.Max)
	case LimitNodes:
		msg = fmt.Sprintf("expression too large (more than %d values)", e.Max)
	case LimitBytes:
		msg = fmt.Sprintf("evaluation exceeds its budget of %d bytes built", e.Max)
	default:
		msg = fmt.Sprintf("evaluation exceeds its budget of %d operations", e.Max)
	}
	if e.Path == "" {
		return msg
	}
	return e.Path + ": " + msg
}

// Is matches ErrBudget, and ErrExpression for the static limits.
func (e *BudgetError) Is(target error) bool {
	return target == ErrBudget || target == ErrExpression && (e.Limit == LimitDepth || e.Limit == LimitNodes)
}

type opcode uint8

const (
	opLit opcode = iota
	opArr
	opVar
	opMissing
	opMissingSome
	opIf
	opEq
	opStrictEq
	opNe
	opStrictNe
	opNot
	opNotNot
	opOr
	opAnd
	opGt
	opGe
	opLt
	opLe
	opMax
	opMin
	opAdd
	opSub
	opMul
	opDiv
	opMod
	opMap
	opFilter
	opReduce
	opAll
	opNone
	opSome
	opMerge
	opIn
	opCat
	opSubstr
)

var opcodes = map[string]opcode{
	"var": opVar, "missing": opMissing, "missing_some": opMissingSome, "if": opIf, "?:": opIf,
	"==": opEq, "===": opStrictEq, "!=": opNe, "!==": opStrictNe, "!": opNot, "!!": opNotNot,
	"or": opOr, "and": opAnd, ">": opGt, ">=": opGe, "<": opLt, "<=": opLe, "max": opMax, "min": opMin,
	"+": opAdd, "-": opSub, "*": opMul, "/": opDiv, "%": opMod, "map": opMap, "filter": opFilter,
	"reduce": opReduce, "all": opAll, "none": opNone, "some": opSome, "merge": opMerge, "in": opIn,
	"cat": opCat, "substr": opSubstr,
}

// node is one compiled value of an expression.
type node struct {
	op    opcode
	val   any      // opLit: the value; opVar/opMissing: the path as written
	segs  []string // opVar: the path's segments (nil: the whole data)
	paths []*node  // opMissing, opMissingSome: the paths (opVar nodes)
	// varIndex is, for a var read at the top level, 1 + the index of its
	// path in Info.Vars (0 otherwise): see Program.EvalVars.
	varIndex int
	args     []*node
	where    string // the node's path in the expression, for errors
}

// Program is a checked, compiled expression. It is immutable and safe for
// concurrent use.
type Program struct {
	root *node
	info Info
	expr any
}

// Info returns what Check reports for the expression.
func (p *Program) Info() Info { return p.info }

// Expr returns the expression as decoded JSON (numbers as json.Number);
// callers must not modify it.
func (p *Program) Expr() any { return p.expr }

// Eval evaluates the expression against data (JSON-shaped Go values: nil,
// bool, string, float64 or another Go number, json.Number,
// map[string]any, []any) within lim. It never panics; the only error is a
// *BudgetError (or, for an internal fault, an error matching
// ErrExpression), and with an error there is no result.
//
// The semantics are JsonLogic's (jsonlogic.com, as json-logic-js
// implements it): JavaScript's loose equality and coercions, lazy
// and/or/if, NaN and the empty array falsy ([Truthy]). Two documented
// departures: substr counts Unicode code points, not UTF-16 units, and a
// var path does not read a string's characters or an array's length.
func (p *Program) Eval(data any, lim Limits) (out any, err error) {
	return p.eval(data, lim, false, nil)
}

// EvalVars is Eval with the values of the expression's top-level
// variables read by the caller: vars(i) returns what data holds at
// Info.Vars[i] (ok false: nothing), exactly as the evaluator's own lookup
// of that path in data would find it (before number normalization, which
// the evaluator applies). A caller that has read those values already (for
// checks of its own) spares the evaluator the lookups; a vars that
// answers otherwise than data makes the result wrong.
func (p *Program) EvalVars(data any, lim Limits, vars func(i int) (any, bool)) (out any, err error) {
	return p.eval(data, lim, false, vars)
}

func (p *Program) eval(data any, lim Limits, eager bool, vars func(i int) (any, bool)) (out any, err error) {
	lim = lim.withDefaults()
	e := evaluator{maxOps: lim.MaxOps, maxBytes: lim.MaxBytes, eager: eager, strict: lim.StrictNumbers, vars: vars}
	defer func() {
		if r := recover(); r != nil {
			if be, ok := r.(*BudgetError); ok {
				out, err = nil, be
				return
			}
			if ne, ok := r.(*NumberError); ok {
				out, err = nil, ne
				return
			}
			out, err = nil, &Error{Msg: fmt.Sprintf("internal evaluation fault (%T)", r)}
		}
	}()
	return e.eval(p.root, norm(data)), nil
}

// Compile checks raw as [Check] does and compiles it for evaluation. An
// expression that reads nothing of the data document (a Constant one, or
// one whose vars only read the elements of literal arrays) is evaluated
// once here, with the default limits and every branch of if, and and or
// charged: if it is over budget it is refused, and Info.Truthy holds its
// truthiness.
func Compile(raw json.RawMessage) (*Program, error) {
	v, err := decode(raw)
	if err != nil {
		return nil, err
	}
	c := checker{vars: map[string]bool{}, required: map[string]bool{}}
	root, err := c.compile(v, "", 0, true)
	if err != nil {
		return nil, err
	}
	p := &Program{root: root, info: c.info(), expr: v}
	for _, t := range c.tops {
		t.n.varIndex = 1 + sort.SearchStrings(p.info.Vars, t.path)
	}
	if len(c.vars) == 0 {
		// Nothing of the data document is read (vars in loop bodies read
		// the elements of literal arrays): the value is the same on every
		// evaluation, and one over budget now is over budget always.
		// Every branch is charged, so an evaluator without short-circuits
		// (pack validation's, for one) cannot be made to spin either.
		out, err := p.eval(nil, Limits{}, true, nil)
		if err != nil {
			return nil, err
		}
		p.info.Truthy = Truthy(out)
	}
	return p, nil
}

type evaluator struct {
	ops, maxOps     int
	bytes, maxBytes int
	// eager evaluates every argument of if, and and or (charging the
	// budget for branches a lazy evaluation skips), as an evaluator
	// without short-circuits would.
	eager bool
	// strict is Limits.StrictNumbers.
	strict bool
	// vars, when not nil, gives the top-level variables' values
	// (Program.EvalVars).
	vars func(i int) (any, bool)
}

// strictNumber is an operand of n (an arithmetic operator or a
// comparison) under StrictNumbers: a number, or a *NumberError.
func (e *evaluator) strictNumber(n *node, v any) float64 {
	if f, ok := v.(float64); ok && !math.IsNaN(f) {
		return f
	}
	f, ok := norm(v).(float64)
	if !ok || math.IsNaN(f) {
		got := "NaN"
		if !ok {
			got = valueKind(v)
		}
		panic(&NumberError{Path: n.where, Op: opNames[n.op], Got: got})
	}
	return f
}

// strictCompare checks the operands of a comparison under StrictNumbers:
// two numbers or two strings.
func (e *evaluator) strictCompare(n *node, a, b any) {
	if _, ok := a.(string); ok {
		if _, ok := b.(string); ok {
			return
		}
	}
	e.strictNumber(n, a)
	e.strictNumber(n, b)
}

// valueKind names the kind of a JSON value, for errors.
func valueKind(v any) string {
	switch norm(v).(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case float64:
		return "a number"
	case []any:
		return "an array"
	}
	return "an object"
}

// opNames are the operators StrictNumbers names in its errors.
var opNames = map[opcode]string{opGt: ">", opGe: ">=", opLt: "<", opLe: "<=", opMax: "max", opMin: "min", opAdd: "+", opSub: "-", opMul: "*", opDiv: "/", opMod: "%"}

func (e *evaluator) step(n *node, cost int) {
	e.ops += cost
	if e.ops > e.maxOps {
		panic(&BudgetError{Path: n.where, Limit: LimitOperations, Max: e.maxOps})
	}
}

// strCost is the step cost of reading or building a string of n bytes.
func strCost(n int) int { return (n + 1023) / 1024 }

// build charges the bytes of a value being built, before it is built.
func (e *evaluator) build(n *node, bytes int) {
	e.bytes += bytes
	if e.bytes > e.maxBytes || bytes < 0 {
		panic(&BudgetError{Path: n.where, Limit: LimitBytes, Max: e.maxBytes})
	}
	e.step(n, strCost(bytes))
}

// scope is the data of a reduce body.
type scope struct{ current, accumulator any }

func (e *evaluator) eval(n *node, data any) any {
	e.step(n, 1)
	switch n.op {
	case opLit:
		return n.val
	case opArr:
		e.build(n, 16*len(n.args))
		out := make([]any, len(n.args))
		for i, a := range n.args {
			out[i] = e.eval(a, data)
		}
		return out
	case opVar:
		var v any
		var ok bool
		if n.varIndex > 0 && e.vars != nil {
			if v, ok = e.vars(n.varIndex - 1); ok {
				v = norm(v)
			}
		} else {
			v, ok = lookup(data, n.segs)
		}
		if !ok {
			if len(n.args) > 0 {
				return e.eval(n.args[0], data)
			}
			return nil
		}
		return v
	case opMissing:
		return e.missing(n, n.paths, data)
	case opMissingSome:
		need := e.number(n, e.eval(n.args[0], data))
		miss := e.missing(n, n.paths, data)
		if float64(len(n.paths)-len(miss)) >= need {
			return []any{}
		}
		return miss
	case opIf:
		if e.eager {
			return pickIf(e.evalAll(n.args, data))
		}
		i := 0
		for ; i < len(n.args)-1; i += 2 {
			if Truthy(e.eval(n.args[i], data)) {
				return e.eval(n.args[i+1], data)
			}
		}
		if i == len(n.args)-1 {
			return e.eval(n.args[i], data)
		}
		return nil
	case opAnd, opOr:
		if e.eager {
			vals := e.evalAll(n.args, data)
			for _, v := range vals {
				if Truthy(v) != (n.op == opAnd) {
					return v
				}
			}
			return vals[len(vals)-1]
		}
		var cur any
		for _, a := range n.args {
			cur = e.eval(a, data)
			if Truthy(cur) != (n.op == opAnd) {
				return cur
			}
		}
		return cur
	case opNot:
		return !Truthy(e.eval(n.args[0], data))
	case opNotNot:
		return Truthy(e.eval(n.args[0], data))
	case opEq, opNe, opStrictEq, opStrictNe:
		a, b := e.eval(n.args[0], data), e.eval(n.args[1], data)
		var eq bool
		if n.op == opEq || n.op == opNe {
			eq = e.looseEqual(n, a, b)
		} else {
			eq = strictEqual(a, b)
		}
		return eq == (n.op == opEq || n.op == opStrictEq)
	case opLt, opLe, opGt, opGe:
		a, b := e.eval(n.args[0], data), e.eval(n.args[1], data)
		if e.strict {
			e.strictCompare(n, a, b)
		}
		var r bool
		switch n.op {
		case opLt:
			r = e.compare(n, a, b) == cmpLess
		case opLe:
			c := e.compare(n, a, b)
			r = c == cmpLess || c == cmpEqual
		case opGt:
			r = e.compare(n, a, b) == cmpGreater
		case opGe:
			c := e.compare(n, a, b)
			r = c == cmpGreater || c == cmpEqual
		}
		if len(n.args) == 3 && r { // between: a < b < c
			c := e.eval(n.args[2], data)
			if e.strict {
				e.strictCompare(n, b, c)
			}
			cmp := e.compare(n, b, c)
			r = cmp == cmpLess || n.op == opLe && cmp == cmpEqual
		}
		return r
	case opMax, opMin:
		r := math.Inf(-1)
		if n.op == opMin {
			r = math.Inf(1)
		}
		for _, a := range n.args {
			v := e.eval(a, data)
			if e.strict {
				e.strictNumber(n, v)
			}
			x := e.number(n, v)
			switch {
			case math.IsNaN(x) || math.IsNaN(r):
				r = math.NaN()
			case n.op == opMax && x > r, n.op == opMin && x < r:
				r = x
			}
		}
		return r
	case opAdd:
		sum := 0.0
		for _, a := range n.args {
			v := e.eval(a, data)
			if e.strict {
				e.strictNumber(n, v)
			}
			sum += e.parseFloat(n, v)
		}
		return sum
	case opMul:
		first := e.eval(n.args[0], data)
		if len(n.args) == 1 {
			return first // JavaScript's reduce without an initial value
		}
		if e.strict {
			e.strictNumber(n, first)
		}
		prod := e.parseFloat(n, first)
		for _, a := range n.args[1:] {
			v := e.eval(a, data)
			if e.strict {
				e.strictNumber(n, v)
			}
			prod *= e.parseFloat(n, v)
		}
		return prod
	case opSub:
		a := e.arith(n, e.eval(n.args[0], data))
		if len(n.args) == 1 {
			return -a
		}
		return a - e.arith(n, e.eval(n.args[1], data))
	case opDiv:
		a := e.arith(n, e.eval(n.args[0], data))
		return a / e.arith(n, e.eval(n.args[1], data))
	case opMod:
		a := e.arith(n, e.eval(n.args[0], data))
		return math.Mod(a, e.arith(n, e.eval(n.args[1], data)))
	case opMap, opFilter, opAll, opNone, opSome:
		return e.loop(n, data)
	case opReduce:
		list, isList := e.eval(n.args[0], data).([]any)
		acc := e.eval(n.args[2], data)
		if !isList {
			return acc
		}
		// The scope never escapes: a var of the whole scope reads a copy.
		sc := &scope{}
		for _, x := range list {
			e.step(n, 1)
			sc.current, sc.accumulator = norm(x), acc
			acc = e.eval(n.args[1], sc)
		}
		return acc
	case opMerge:
		vals := make([]any, len(n.args))
		size := 0
		for i, a := range n.args {
			vals[i] = e.eval(a, data)
			if l, ok := vals[i].([]any); ok {
				size += len(l)
			} else {
				size++
			}
		}
		e.build(n, 16*size)
		out := make([]any, 0, size)
		for _, v := range vals {
			if l, ok := v.([]any); ok {
				for _, x := range l {
					out = append(out, norm(x))
				}
			} else {
				out = append(out, v)
			}
		}
		return out
	case opIn:
		a, b := e.eval(n.args[0], data), e.eval(n.args[1], data)
		switch hay := b.(type) {
		case string:
			if hay == "" {
				return false
			}
			needle := e.toString(n, a)
			e.step(n, strCost(len(hay)))
			return strings.Contains(hay, needle)
		case []any:
			e.step(n, len(hay))
			for _, x := range hay {
				if strictEqual(norm(x), a) {
					return true
				}
			}
		}
		return false
	case opCat:
		parts := make([]string, len(n.args))
		size := 0
		for i, a := range n.args {
			if v := e.eval(a, data); v != nil {
				parts[i] = e.toString(n, v)
			}
			size += len(parts[i])
		}
		e.build(n, size)
		return strings.Join(parts, "")
	case opSubstr:
		return e.substr(n, data)
	}
	panic(fmt.Sprintf("logic: opcode %d", n.op))
}

// evalAll evaluates every node once, in order.
func (e *evaluator) evalAll(args []*node, data any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = e.eval(a, data)
	}
	return out
}

// pickIf is if's choice among evaluated arguments.
func pickIf(vals []any) any {
	i := 0
	for ; i < len(vals)-1; i += 2 {
		if Truthy(vals[i]) {
			return vals[i+1]
		}
	}
	if i == len(vals)-1 {
		return vals[i]
	}
	return nil
}

func (e *evaluator) missing(n *node, paths []*node, data any) []any {
	var out []any
	for _, p := range paths {
		e.step(n, 1)
		v, ok := lookup(data, p.segs)
		if !ok || v == nil || v == "" {
			out = append(out, p.val)
		}
	}
	if out == nil {
		return []any{}
	}
	e.build(n, 16*len(out))
	return out
}

// loop runs map, filter, all, none and some.
func (e *evaluator) loop(n *node, data any) any {
	list, isList := e.eval(n.args[0], data).([]any)
	body := n.args[1]
	switch n.op {
	case opMap:
		if !isList {
			return []any{}
		}
		e.build(n, 16*len(list))
		out := make([]any, len(list))
		for i, x := range list {
			e.step(n, 1)
			out[i] = e.eval(body, norm(x))
		}
		return out
	case opFilter:
		if !isList {
			return []any{}
		}
		out := []any{}
		for _, x := range list {
			e.step(n, 1)
			x = norm(x)
			if Truthy(e.eval(body, x)) {
				e.build(n, 16)
				out = append(out, x)
			}
		}
		return out
	case opAll:
		if len(list) == 0 {
			return false
		}
		for _, x := range list {
			e.step(n, 1)
			if !Truthy(e.eval(body, norm(x))) {
				return false
			}
		}
		return true
	}
	// none and some: whether any element passes.
	for _, x := range list {
		e.step(n, 1)
		if Truthy(e.eval(body, norm(x))) {
			return n.op == opSome
		}
	}
	return n.op == opNone
}

func (e *evaluator) substr(n *node, data any) any {
	src := e.eval(n.args[0], data)
	s := "null"
	if src != nil {
		s = e.toString(n, src)
	}
	e.step(n, strCost(len(s)))
	start := toInteger(e.number(n, e.eval(n.args[1], data)))
	size := float64(utf8.RuneCountInString(s))
	if len(n.args) < 3 {
		return jsSubstr(s, size, start, 0, false)
	}
	end := e.eval(n.args[2], data)
	if e.compare(n, end, 0.0) == cmpLess {
		tmp := jsSubstr(s, size, start, 0, false)
		tsize := float64(utf8.RuneCountInString(tmp))
		return jsSubstr(tmp, tsize, 0, tsize+e.number(n, end), true)
	}
	return jsSubstr(s, size, start, e.number(n, end), true)
}

// jsSubstr is JavaScript's String.prototype.substr(start, length) over
// code points (size is s's count of them).
func jsSubstr(s string, size, start, length float64, hasLength bool) string {
	if start < 0 {
		start = math.Max(size+start, 0)
	}
	start = math.Min(start, size)
	l := size - start
	if hasLength {
		l = math.Min(math.Max(toInteger(length), 0), size-start)
	}
	return runeSlice(s, int(start), int(start+l))
}

func runeSlice(s string, from, to int) string {
	if to <= from {
		return ""
	}
	i, start, stop := 0, -1, len(s)
	for pos := range s {
		if i == from {
			start = pos
		}
		if i == to {
			stop = pos
			break
		}
		i++
	}
	if start < 0 {
		return ""
	}
	return s[start:stop]
}

// toInteger is JavaScript's ToIntegerOrInfinity.
func toInteger(f float64) float64 {
	if math.IsNaN(f) {
		return 0
	}
	return math.Trunc(f)
}

// lookup resolves var path segments in data; ok is false for a path that
// is not there (JavaScript's undefined).
func lookup(data any, segs []string) (any, bool) {
	if segs == nil {
		if s, ok := data.(*scope); ok {
			return map[string]any{"current": s.current, "accumulator": s.accumulator}, true
		}
		return data, true
	}
	cur := data
	for _, seg := range segs {
		switch x := cur.(type) {
		case map[string]any:
			v, ok := x[seg]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, ok := ArrayIndex(seg)
			if !ok || i >= len(x) {
				return nil, false
			}
			cur = x[i]
		case *scope:
			switch seg {
			case "current":
				cur = x.current
			case "accumulator":
				cur = x.accumulator
			default:
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return norm(cur), true
}

// ArrayIndex parses a canonical array index ("0", "12"; not "01", "+1"
// or "-1"): the segments of a var path that index an array. A data
// document read outside the evaluator (policy's checks and digests) must
// read it the same way, or a check would pass on a value the expression
// never sees.
func ArrayIndex(seg string) (int, bool) {
	if seg == "" || len(seg) > 1 && seg[0] == '0' || len(seg) > 9 {
		return 0, false
	}
	i := 0
	for _, c := range []byte(seg) {
		if c < '0' || c > '9' {
			return 0, false
		}
		i = i*10 + int(c-'0')
	}
	return i, true
}

// norm turns Go numbers and json.Number into float64 and []string into
// []any; JSON-shaped values pass through.
func norm(v any) any {
	switch x := v.(type) {
	case nil, bool, string, float64, []any, map[string]any, *scope:
		return v
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case int32:
		return float64(x)
	case int16:
		return float64(x)
	case int8:
		return float64(x)
	case uint:
		return float64(x)
	case uint64:
		return float64(x)
	case uint32:
		return float64(x)
	case uint16:
		return float64(x)
	case uint8:
		return float64(x)
	case float32:
		return float64(x)
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return string(x)
		}
		return f
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	}
	// Named JSON-shaped types (a policy document) read as their base type.
	rv := reflect.ValueOf(v)
	switch {
	case rv.Kind() == reflect.Map && rv.Type().ConvertibleTo(mapType):
		return rv.Convert(mapType).Interface()
	case rv.Kind() == reflect.Slice && rv.Type().ConvertibleTo(sliceType):
		return rv.Convert(sliceType).Interface()
	}
	return v
}

var (
	mapType   = reflect.TypeFor[map[string]any]()
	sliceType = reflect.TypeFor[[]any]()
)

// Truthy is JsonLogic truthiness: false, null, 0, NaN, "" and [] are
// false; every other value (including {} and "0") is true.
func Truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0 && !math.IsNaN(x)
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case json.Number, int, int64, int32, int16, int8, uint, uint64, uint32, uint16, uint8, float32:
		return Truthy(norm(x))
	case []string:
		return len(x) > 0
	}
	return true
}

// isRef reports an array or object (compared by reference in JavaScript).
func isRef(v any) bool {
	switch v.(type) {
	case []any, map[string]any, *scope:
		return true
	}
	return false
}

func sameRef(a, b any) bool {
	ra, rb := reflect.ValueOf(a), reflect.ValueOf(b)
	if ra.Kind() != rb.Kind() {
		return false
	}
	if ra.Kind() == reflect.Slice && ra.Len() != rb.Len() {
		return false
	}
	return ra.Pointer() == rb.Pointer()
}

// strictEqual is JavaScript's ===.
func strictEqual(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	return isRef(a) && isRef(b) && sameRef(a, b)
}

// looseEqual is JavaScript's == (null equals only null here: JSON has no
// undefined).
func (e *evaluator) looseEqual(n *node, a, b any) bool {
	for range 8 { // each round removes one coercion; four suffice
		switch {
		case a == nil || b == nil:
			return a == nil && b == nil
		case sameKind(a, b):
			if isRef(a) {
				return sameRef(a, b)
			}
			return strictEqual(a, b)
		}
		switch x := a.(type) {
		case bool:
			a = toNumber(x)
			continue
		}
		switch y := b.(type) {
		case bool:
			b = toNumber(y)
			continue
		}
		_, an := a.(float64)
		_, as := a.(string)
		_, bn := b.(float64)
		_, bs := b.(string)
		switch {
		case an && bs:
			b = toNumber(b)
		case as && bn:
			a = toNumber(a)
		case isRef(a) && (bn || bs):
			a = e.toString(n, a)
		case isRef(b) && (an || as):
			b = e.toString(n, b)
		default:
			return false
		}
	}
	return false
}

func sameKind(a, b any) bool {
	switch a.(type) {
	case float64:
		_, ok := b.(float64)
		return ok
	case string:
		_, ok := b.(string)
		return ok
	case bool:
		_, ok := b.(bool)
		return ok
	}
	return isRef(a) && isRef(b)
}

type cmpResult uint8

const (
	cmpUndefined cmpResult = iota // a NaN was involved: every comparison is false
	cmpLess
	cmpEqual
	cmpGreater
)

// compare is JavaScript's relational comparison of a and b: both strings
// (after turning arrays and objects into their string form) compare by
// UTF-16 code units, anything else as numbers.
func (e *evaluator) compare(n *node, a, b any) cmpResult {
	if isRef(a) {
		a = e.toString(n, a)
	}
	if isRef(b) {
		b = e.toString(n, b)
	}
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			e.step(n, strCost(min(len(x), len(y))))
			return compareUTF16(x, y)
		}
	}
	x, y := toNumber(a), toNumber(b)
	switch {
	case math.IsNaN(x) || math.IsNaN(y):
		return cmpUndefined
	case x < y:
		return cmpLess
	case x > y:
		return cmpGreater
	}
	return cmpEqual
}

func compareUTF16(a, b string) cmpResult {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			ka, kb := utf16Lead(ra), utf16Lead(rb)
			if ka == kb {
				ka, kb = ra, rb
			}
			if ka < kb {
				return cmpLess
			}
			return cmpGreater
		}
		a, b = a[na:], b[nb:]
	}
	switch {
	case a == "" && b == "":
		return cmpEqual
	case a == "":
		return cmpLess
	}
	return cmpGreater
}

// utf16Lead is the first UTF-16 code unit of r.
func utf16Lead(r rune) rune {
	if r < 0x10000 {
		return r
	}
	return 0xD800 + (r-0x10000)>>10
}

// arith is an operand of -, / or %: ToNumber, or under StrictNumbers a
// number only.
func (e *evaluator) arith(n *node, v any) float64 {
	if e.strict {
		return e.strictNumber(n, v)
	}
	return e.number(n, v)
}

// number is ToNumber, charging arrays' string form.
func (e *evaluator) number(n *node, v any) float64 {
	if isRef(v) {
		return toNumber(e.toString(n, v))
	}
	return toNumber(v)
}

// toNumber is JavaScript's ToNumber (arrays and objects: see number).
func toNumber(v any) float64 {
	switch x := norm(v).(type) {
	case float64:
		return x
	case bool:
		if x {
			return 1
		}
		return 0
	case nil:
		return 0
	case string:
		return stringToNumber(x)
	}
	return math.NaN()
}

func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// stringToNumber is ToNumber of a string: decimal literals, Infinity, and
// 0x/0o/0b integers; "" and blanks are 0; anything else is NaN.
func stringToNumber(s string) float64 {
	s = strings.TrimFunc(s, isJSSpace)
	if s == "" {
		return 0
	}
	if len(s) > 2 && s[0] == '0' {
		base := 0
		switch s[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 0 {
			f := 0.0
			for _, c := range []byte(s[2:]) {
				d := digitVal(c)
				if d >= base {
					return math.NaN()
				}
				f = f*float64(base) + float64(d)
			}
			return f
		}
	}
	if n := decimalPrefix(s); n == len(s) {
		return parseDecimal(s)
	}
	return math.NaN()
}

func digitVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return int(c-'A') + 10
	}
	return 99
}

// decimalPrefix returns the length of the longest prefix of s that is a
// JavaScript StrDecimalLiteral (0 for none).
func decimalPrefix(s string) int {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	if strings.HasPrefix(s[i:], "Infinity") {
		return i + len("Infinity")
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		j := i + 1
		frac := 0
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j, frac = j+1, frac+1
		}
		if digits+frac > 0 {
			i, digits = j, digits+frac
		}
	}
	if digits == 0 {
		return 0
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k > j {
			i = k
		}
	}
	return i
}

func parseDecimal(s string) float64 {
	switch strings.TrimLeft(s, "+") {
	case "Infinity":
		return math.Inf(1)
	case "-Infinity":
		return math.Inf(-1)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return math.NaN()
	}
	return f
}

// parseFloat is JavaScript's parseFloat (used by + and *).
func (e *evaluator) parseFloat(n *node, v any) float64 {
	if f, ok := norm(v).(float64); ok {
		return f
	}
	if v == nil {
		return math.NaN()
	}
	s := strings.TrimLeftFunc(e.toString(n, v), isJSSpace)
	k := decimalPrefix(s)
	if k == 0 {
		return math.NaN()
	}
	return parseDecimal(s[:k])
}

// toString is JavaScript's String(v) for JSON values (arrays join their
// elements with commas, null elements as "").
func (e *evaluator) toString(n *node, v any) string {
	switch x := norm(v).(type) {
	case string:
		return x
	case float64:
		return numberString(x)
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return "null"
	case []any:
		var b strings.Builder
		e.joinTo(n, &b, x, 0)
		return b.String()
	}
	return "[object Object]"
}

func (e *evaluator) joinTo(n *node, b *strings.Builder, list []any, depth int) {
	if depth > MaxDepth {
		panic(&BudgetError{Path: n.where, Limit: LimitDepth, Max: MaxDepth})
	}
	for i, x := range list {
		e.step(n, 1)
		if i > 0 {
			b.WriteByte(',')
		}
		switch y := norm(x).(type) {
		case nil:
		case []any:
			e.joinTo(n, b, y, depth+1)
		default:
			s := e.toString(n, y)
			e.build(n, len(s))
			b.WriteString(s)
		}
	}
}

// numberString is JavaScript's Number.prototype.toString().
func numberString(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±x
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	k, nn := len(digits), x+1
	switch {
	case k <= nn && nn <= 21:
		return sign + digits + strings.Repeat("0", nn-k)
	case 0 < nn && nn <= 21:
		return sign + digits[:nn] + "." + digits[nn:]
	case -6 < nn && nn <= 0:
		return sign + "0." + strings.Repeat("0", -nn) + digits
	}
	es := "+"
	if nn-1 < 0 {
		es = "-"
	}
	ex := strconv.Itoa(abs(nn - 1))
	if k == 1 {
		return sign + digits + "e" + es + ex
	}
	return sign + digits[:1] + "." + digits[1:] + "e" + es + ex
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}
