package gateway

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/contextos/contextos/internal/schemaerr"
)

// ArgProblem is one argument problem: a JSON pointer into the arguments
// and a message phrased so a model can correct its call.
type ArgProblem = schemaerr.Problem

// validateArgs checks args against the capability's JSON Schema, then the
// permission's compiled arg_constraints. Supported constraints: required,
// min, max, enum, pattern, min_length, max_length; an unknown or malformed
// constraint fails closed (every call is refused, naming it).
func validateArgs(schema *jsonschema.Schema, args map[string]any, constraints []argConstraint) []ArgProblem {
	var probs []ArgProblem
	if schema != nil {
		if err := schema.Validate(args); err != nil {
			if flat, ok := schemaerr.Flatten(err); ok {
				probs = append(probs, flat...)
			} else {
				probs = append(probs, ArgProblem{Message: "arguments could not be validated"})
			}
		}
	}
	for i := range constraints {
		c := &constraints[i]
		if slices.ContainsFunc(probs, func(q ArgProblem) bool { return q.Pointer == c.ptr }) {
			continue // one problem per argument: the schema's, else the first constraint's
		}
		if p, bad := c.check(args); bad {
			probs = append(probs, p)
		}
	}
	return probs
}

// argConstraint is one argument's arg_constraints, compiled once per run:
// the pointer escaped, the checks in key order, patterns compiled.
type argConstraint struct {
	name   string
	ptr    string
	checks []constraintCheck
}

type constraintCheck struct {
	key   string
	want  any
	bound float64 // min, max, min_length, max_length
	ok    bool    // the constraint itself is well formed
	re    *regexp.Regexp
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// compileConstraints compiles a permission's arg_constraints, arguments
// in name order.
func compileConstraints(cs map[string]map[string]any) []argConstraint {
	names := make([]string, 0, len(cs))
	for n := range cs {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]argConstraint, 0, len(names))
	for _, name := range names {
		c := argConstraint{name: name, ptr: "/" + pointerEscaper.Replace(name)}
		keys := make([]string, 0, len(cs[name]))
		for k := range cs[name] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ck := constraintCheck{key: k, want: cs[name][k], ok: true}
			switch k {
			case "min", "max", "min_length", "max_length":
				ck.bound, ck.ok = toFloat(ck.want)
			case "enum":
				_, ck.ok = ck.want.([]any)
			case "required":
				_, ck.ok = ck.want.(bool)
			case "pattern":
				if p, isStr := ck.want.(string); isStr {
					re, err := regexp.Compile(p)
					ck.re, ck.ok = re, err == nil
				} else {
					ck.ok = false // not an empty pattern that matches everything
				}
			}
			c.checks = append(c.checks, ck)
		}
		out = append(out, c)
	}
	return out
}

// check returns the argument's first problem, if it has one.
func (c *argConstraint) check(args map[string]any) (ArgProblem, bool) {
	name := c.name
	v, present := args[name]
	bad := func(format string, a ...any) (ArgProblem, bool) {
		return ArgProblem{Pointer: c.ptr, Message: fmt.Sprintf(format, a...)}, true
	}
	for i := range c.checks {
		ck := &c.checks[i]
		k := ck.key
		switch k {
		case "required":
			if !ck.ok {
				return bad("the permission's required constraint on %s is not true or false; the call is refused", name)
			}
			if ck.want.(bool) && !present {
				return bad("argument %s is required", name)
			}
		case "min", "max":
			if !present {
				continue
			}
			n, isNum := v.(float64)
			switch {
			case !ck.ok:
				return bad("the permission's %s constraint on %s is not a number; the call is refused", k, name)
			case !isNum:
				return bad("argument %s must be a number", name)
			case k == "min" && n < ck.bound:
				return bad("%s is below the minimum %s allowed for %s", fmtNum(n), fmtNum(ck.bound), name)
			case k == "max" && n > ck.bound:
				return bad("%s is above the maximum %s allowed for %s", fmtNum(n), fmtNum(ck.bound), name)
			}
		case "enum":
			if !present {
				continue
			}
			if !ck.ok {
				return bad("the permission's enum constraint on %s is not a list; the call is refused", name)
			}
			list := ck.want.([]any)
			if !slices.ContainsFunc(list, func(e any) bool { return equal(e, v) }) {
				return bad("%s must be one of %v", name, list)
			}
		case "pattern":
			if !present {
				continue
			}
			s, isStr := v.(string)
			switch {
			case !ck.ok:
				return bad("the permission's pattern on %s does not compile; the call is refused", name)
			case !isStr:
				return bad("argument %s must be a string", name)
			case !ck.re.MatchString(s):
				return bad("%s does not match the pattern %s", name, ck.want)
			}
		case "min_length", "max_length":
			if !present {
				continue
			}
			s, isStr := v.(string)
			n := float64(utf8.RuneCountInString(s))
			switch {
			case !ck.ok:
				return bad("the permission's %s on %s is not a number; the call is refused", k, name)
			case !isStr:
				return bad("argument %s must be a string", name)
			case k == "min_length" && n < ck.bound:
				return bad("%s must be at least %s characters", name, fmtNum(ck.bound))
			case k == "max_length" && n > ck.bound:
				return bad("%s must be at most %s characters", name, fmtNum(ck.bound))
			}
		default:
			return bad("the permission has a constraint %q on %s that the gateway does not support; the call is refused", k, name)
		}
	}
	return ArgProblem{}, false
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	}
	return 0, false
}

func equal(a, b any) bool {
	if fa, ok := toFloat(a); ok {
		fb, ok := toFloat(b)
		return ok && fa == fb
	}
	return a == b
}

func fmtNum(f float64) string { return fmt.Sprintf("%g", f) }

// argsError is the rejection of invalid arguments: invalid_input with every
// problem in details.errors, each with its JSON pointer.
func argsError(capability string, probs []ArgProblem) *ToolError {
	lines := make([]string, len(probs))
	list := make([]any, len(probs))
	for i, p := range probs {
		lines[i] = p.String()
		list[i] = map[string]any{"pointer": p.Pointer, "message": p.Message}
	}
	return NewToolError(CodeInvalidInput, false, fmt.Sprintf("invalid arguments for %s: %s", capability, strings.Join(lines, "; ")), map[string]any{"errors": list})
}
