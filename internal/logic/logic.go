// Package logic owns the JsonLogic expressions packs carry: which
// operators ContextOS supports, how an expression is checked before it is
// ever evaluated, which data-document paths it reads, whether it is a
// constant, and its evaluation ([Program.Eval]) within a budget.
//
// The budget: an expression nests at most MaxDepth operators and holds at
// most MaxNodes values (checked statically, so an over-budget pack is
// refused at validation); an evaluation takes at most Limits.MaxOps steps
// and builds at most Limits.MaxBytes (checked as it runs, so a loop over a
// huge array or a string that doubles in a reduce stops with a
// *BudgetError, and the caller fails closed). Evaluation never recurses
// deeper than the expression, so hostile data cannot exhaust the stack.
package logic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/contextos/contextos/internal/wire"
)

// arity bounds an operator's argument count; max < 0 means unbounded.
type arity struct{ min, max int }

// operators is the supported set: standard JsonLogic operators that the
// evaluation library implements. Non-standard ones ("set", "in_sorted",
// "abs") are refused so a pack means the same thing on every engine.
var operators = map[string]arity{
	"var": {0, 2}, "missing": {0, -1}, "missing_some": {2, 2},
	"if": {1, -1}, "?:": {3, 3},
	"==": {2, 2}, "===": {2, 2}, "!=": {2, 2}, "!==": {2, 2},
	"!": {1, 1}, "!!": {1, 1}, "or": {1, -1}, "and": {1, -1},
	">": {2, 2}, ">=": {2, 2}, "<": {2, 3}, "<=": {2, 3},
	"max": {1, -1}, "min": {1, -1},
	"+": {0, -1}, "-": {1, 2}, "*": {1, -1}, "/": {2, 2}, "%": {2, 2},
	"map": {2, 2}, "filter": {2, 2}, "reduce": {3, 3}, "all": {2, 2}, "none": {2, 2}, "some": {2, 2},
	"merge": {0, -1}, "in": {2, 2}, "cat": {0, -1}, "substr": {2, 3},
}

// scoped operators evaluate their second (and third) argument against each
// element of the first; vars there are relative to the element.
var scoped = map[string]bool{"map": true, "filter": true, "reduce": true, "all": true, "none": true, "some": true}

// Supported returns the supported operator names, sorted.
func Supported() []string {
	out := make([]string, 0, len(operators))
	for op := range operators {
		out = append(out, op)
	}
	sort.Strings(out)
	return out
}

// IsSupported reports whether op is a supported operator.
func IsSupported(op string) bool { _, ok := operators[op]; return ok }

// ErrExpression reports a malformed or unsupported expression.
var ErrExpression = errors.New("invalid JsonLogic expression")

// Error locates a problem inside an expression, such as "and[1].>".
type Error struct {
	Path string
	Msg  string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Is matches ErrExpression.
func (e *Error) Is(target error) bool { return target == ErrExpression }

// Info describes a checked expression.
type Info struct {
	// Vars are the data paths the expression reads at the top level (not
	// inside map/filter/reduce/all/none/some bodies), sorted, unique; the
	// paths of missing/missing_some are included.
	Vars []string
	// Required are the top-level var paths read without a default: the
	// data must hold them, or the expression cannot be evaluated safely.
	Required []string
	// Constant reports an expression that reads no data at all.
	Constant bool
	// Truthy is, for a Constant expression (or any whose Vars is empty),
	// the truthiness of its value.
	Truthy bool
}

// Check parses raw as one JsonLogic expression and checks its structure:
// it must pass wire.CheckStrict (no duplicate member, valid UTF-8), every
// object is exactly one supported operator with an argument count it
// accepts, var paths are strings or integers, and the expression is
// within MaxDepth and MaxNodes (a *BudgetError otherwise). A constant
// expression is evaluated (see Compile). A missing expression (empty raw
// or null) is an error.
func Check(raw json.RawMessage) (Info, error) {
	p, err := Compile(raw)
	if err != nil {
		return Info{}, err
	}
	return p.info, nil
}

// decode parses raw strictly, refusing over-deep documents before they
// are decoded.
func decode(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, &Error{Msg: "expression is missing"}
	}
	// An operator takes at most two JSON levels ({"op":[…]}), so deeper
	// JSON is deeper than MaxDepth operators.
	if jsonDepth(raw) > 2*MaxDepth+2 {
		return nil, &BudgetError{Limit: LimitDepth, Max: MaxDepth}
	}
	if probs := wire.CheckStrict(raw); len(probs) > 0 {
		return nil, &Error{Path: probs[0].Path, Msg: probs[0].Message}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &Error{Msg: "not JSON"}
	}
	if v == nil {
		return nil, &Error{Msg: "expression is null"}
	}
	return v, nil
}

// jsonDepth is the deepest nesting of arrays and objects in raw, with
// no recursion.
func jsonDepth(raw []byte) int {
	d, deepest := 0, 0
	in, esc := false, false
	for _, c := range raw {
		switch {
		case esc:
			esc = false
		case in:
			switch c {
			case '\\':
				esc = true
			case '"':
				in = false
			}
		case c == '"':
			in = true
		case c == '{' || c == '[':
			if d++; d > deepest {
				deepest = d
			}
		case c == '}' || c == ']':
			d--
		}
	}
	return deepest
}

type checker struct {
	vars, required map[string]bool
	readsData      bool
	nodes          int
	// tops are the var nodes read at the top level, with their paths.
	tops []topVar
}

type topVar struct {
	n    *node
	path string
}

func (c *checker) info() Info {
	info := Info{Constant: !c.readsData}
	for p := range c.vars {
		info.Vars = append(info.Vars, p)
	}
	for p := range c.required {
		info.Required = append(info.Required, p)
	}
	sort.Strings(info.Vars)
	sort.Strings(info.Required)
	return info
}

// compile checks v and compiles it; top is false inside the body of a
// scoped operator (whose vars read the element, not the data document).
func (c *checker) compile(v any, path string, depth int, top bool) (*node, error) {
	if depth > MaxDepth {
		return nil, &BudgetError{Path: path, Limit: LimitDepth, Max: MaxDepth}
	}
	if c.nodes++; c.nodes > MaxNodes {
		return nil, &BudgetError{Path: path, Limit: LimitNodes, Max: MaxNodes}
	}
	switch x := v.(type) {
	case []any:
		n := &node{op: opArr, where: path, args: make([]*node, len(x))}
		lit := make([]any, len(x))
		constant := true
		for i, e := range x {
			a, err := c.compile(e, path+"["+strconv.Itoa(i)+"]", depth+1, top)
			if err != nil {
				return nil, err
			}
			n.args[i] = a
			if a.op == opLit {
				lit[i] = a.val
			} else {
				constant = false
			}
		}
		if constant {
			return &node{op: opLit, val: lit, where: path}, nil
		}
		return n, nil
	case map[string]any:
		if len(x) != 1 {
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			return nil, &Error{Path: path, Msg: fmt.Sprintf("an operation must have exactly one operator, found %d (%s)", len(x), strings.Join(keys, ", "))}
		}
		for op, arg := range x {
			return c.op(op, arg, join(path, op), depth, top)
		}
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, &Error{Path: path, Msg: "number out of range"}
		}
		return &node{op: opLit, val: f, where: path}, nil
	}
	return &node{op: opLit, val: v, where: path}, nil // string, bool
}

func join(path, op string) string {
	if path == "" {
		return op
	}
	return path + "." + op
}

func (c *checker) op(op string, arg any, path string, depth int, top bool) (*node, error) {
	ar, ok := operators[op]
	if !ok {
		return nil, &Error{Path: path, Msg: fmt.Sprintf("unsupported operator %q", op)}
	}
	args, isList := arg.([]any)
	if !isList {
		args = []any{arg} // JsonLogic's unary sugar: {"var":"x"} == {"var":["x"]}
	}
	if len(args) < ar.min || ar.max >= 0 && len(args) > ar.max {
		return nil, &Error{Path: path, Msg: fmt.Sprintf("operator %q takes %s, got %d", op, arityText(ar), len(args))}
	}
	n := &node{op: opcodes[op], where: path}
	switch op {
	case "var":
		c.readsData = true
		n.op = opVar
		if len(args) == 0 {
			if top {
				c.vars[""] = true
				c.tops = append(c.tops, topVar{n, ""})
			}
			return n, nil
		}
		p, err := varPath(args[0], path)
		if err != nil {
			return nil, err
		}
		n.val, n.segs = pathValue(args[0]), Segments(p)
		if top {
			c.vars[p] = true
			c.tops = append(c.tops, topVar{n, p})
			if len(args) == 1 && p != "" {
				c.required[p] = true
			}
		}
		if len(args) == 2 {
			d, err := c.compile(args[1], path+"[1]", depth+1, top)
			if err != nil {
				return nil, err
			}
			n.args = []*node{d}
		}
		return n, nil
	case "missing", "missing_some":
		c.readsData = true
		list := args
		if op == "missing_some" {
			l, ok := args[1].([]any)
			if !ok {
				return nil, &Error{Path: path, Msg: "missing_some takes [count, [paths]]"}
			}
			list = l
			need, err := c.compile(args[0], path+"[0]", depth+1, top)
			if err != nil {
				return nil, err
			}
			n.args = []*node{need}
		}
		for i, a := range list {
			p, err := varPath(a, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			if c.nodes++; c.nodes > MaxNodes {
				return nil, &BudgetError{Path: path, Limit: LimitNodes, Max: MaxNodes}
			}
			n.paths = append(n.paths, &node{op: opVar, val: pathValue(a), segs: Segments(p)})
			if top {
				c.vars[p] = true
			}
		}
		return n, nil
	}
	n.args = make([]*node, len(args))
	for i, a := range args {
		inner := top && !(scoped[op] && i > 0)
		// reduce's initial value reads the data, like its list.
		if op == "reduce" && i == 2 {
			inner = top
		}
		an, err := c.compile(a, path+"["+strconv.Itoa(i)+"]", depth+1, inner)
		if err != nil {
			return nil, err
		}
		n.args[i] = an
	}
	return n, nil
}

// pathValue is a var path as JsonLogic reports it (missing returns the
// paths as written: a string, or a number).
func pathValue(v any) any {
	if n, ok := v.(json.Number); ok {
		f, _ := strconv.ParseFloat(string(n), 64)
		return f
	}
	return v
}

// Segments splits a var path as the evaluator reads it: on every dot,
// so "a." is "a" then "" (a member named ""); nil is the whole data. A
// data document read outside the evaluator must split paths the same way.
func Segments(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, ".")
}

func varPath(v any, path string) (string, error) {
	switch p := v.(type) {
	case string:
		return p, nil
	case json.Number:
		if _, err := strconv.Atoi(string(p)); err == nil {
			return string(p), nil
		}
	case nil:
		return "", nil
	}
	return "", &Error{Path: path, Msg: "a var path must be a string or an integer"}
}

func arityText(a arity) string {
	switch {
	case a.max < 0:
		return fmt.Sprintf("at least %d argument(s)", a.min)
	case a.min == a.max:
		return fmt.Sprintf("exactly %d argument(s)", a.min)
	}
	return fmt.Sprintf("%d to %d arguments", a.min, a.max)
}

// Root returns the first segment of a var path ("request" of
// "request.context.refund_amount").
func Root(path string) string {
	root, _, _ := strings.Cut(path, ".")
	return root
}
