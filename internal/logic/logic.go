// Package logic owns the structure of the JsonLogic expressions packs
// carry: which operators ContextOS supports, how an expression is checked
// before it is ever evaluated, which data-document paths it reads, and
// whether it is a constant. Evaluation itself is done by
// github.com/diegoholiveira/jsonlogic/v3 (package policy); this package
// makes sure nothing reaches it that would be silently misread.
package logic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
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
}

// maxDepth bounds nesting.
const maxDepth = 64

// Check parses raw as one JsonLogic expression and checks its structure:
// every object is exactly one supported operator with an argument count it
// accepts, var paths are strings or integers. A missing expression (empty
// raw or null) is an error.
func Check(raw json.RawMessage) (Info, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return Info{}, &Error{Msg: "expression is missing"}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return Info{}, &Error{Msg: "not JSON"}
	}
	if v == nil {
		return Info{}, &Error{Msg: "expression is null"}
	}
	c := checker{vars: map[string]bool{}, required: map[string]bool{}}
	if err := c.walk(v, "", 0, true); err != nil {
		return Info{}, err
	}
	info := Info{Constant: !c.readsData}
	for p := range c.vars {
		info.Vars = append(info.Vars, p)
	}
	for p := range c.required {
		info.Required = append(info.Required, p)
	}
	sort.Strings(info.Vars)
	sort.Strings(info.Required)
	return info, nil
}

type checker struct {
	vars, required map[string]bool
	readsData      bool
}

func (c *checker) walk(v any, path string, depth int, top bool) error {
	if depth > maxDepth {
		return &Error{Path: path, Msg: "expression nested too deeply"}
	}
	switch x := v.(type) {
	case []any:
		for i, e := range x {
			if err := c.walk(e, path+"["+strconv.Itoa(i)+"]", depth+1, top); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		if len(x) != 1 {
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			return &Error{Path: path, Msg: fmt.Sprintf("an operation must have exactly one operator, found %d (%s)", len(x), strings.Join(keys, ", "))}
		}
		for op, arg := range x {
			return c.op(op, arg, join(path, op), depth, top)
		}
	}
	return nil // scalar
}

func join(path, op string) string {
	if path == "" {
		return op
	}
	return path + "." + op
}

func (c *checker) op(op string, arg any, path string, depth int, top bool) error {
	ar, ok := operators[op]
	if !ok {
		return &Error{Path: path, Msg: fmt.Sprintf("unsupported operator %q", op)}
	}
	args, isList := arg.([]any)
	if !isList {
		args = []any{arg} // JsonLogic's unary sugar: {"var":"x"} == {"var":["x"]}
	}
	if len(args) < ar.min || ar.max >= 0 && len(args) > ar.max {
		return &Error{Path: path, Msg: fmt.Sprintf("operator %q takes %s, got %d", op, arityText(ar), len(args))}
	}
	switch op {
	case "var":
		c.readsData = true
		if len(args) == 0 {
			if top {
				c.vars[""] = true
			}
			return nil
		}
		p, err := varPath(args[0], path)
		if err != nil {
			return err
		}
		if top {
			c.vars[p] = true
			if len(args) == 1 && p != "" {
				c.required[p] = true
			}
		}
		if len(args) == 2 {
			return c.walk(args[1], path+"[1]", depth+1, top)
		}
		return nil
	case "missing", "missing_some":
		c.readsData = true
		list := args
		if op == "missing_some" {
			l, ok := args[1].([]any)
			if !ok {
				return &Error{Path: path, Msg: "missing_some takes [count, [paths]]"}
			}
			list = l
		}
		for i, a := range list {
			p, err := varPath(a, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return err
			}
			if top {
				c.vars[p] = true
			}
		}
		return nil
	}
	for i, a := range args {
		inner := top && !(scoped[op] && i > 0)
		if err := c.walk(a, path+"["+strconv.Itoa(i)+"]", depth+1, inner); err != nil {
			return err
		}
	}
	return nil
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
