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

// keyArg is the argument a write's derived idempotency key is injected as
// (see injectsKey).
const keyArg = "idempotency_key"

// injectsKey reports whether a write's derived idempotency key is set in
// args.idempotency_key, as well as on the envelope: when the capability's
// argument schema declares that argument, or when the permission's
// arg_constraints name it and the schema admits arguments it does not
// declare. A strict schema that does not declare it (additionalProperties
// or unevaluatedProperties false, the default of MCP go-sdk servers)
// would refuse the gateway's own argument, so the key then travels on the
// envelope (and in the adapter's Call) only, and the constraints on
// idempotency_key are checked against it there (see validateArgs).
func injectsKey(schema *jsonschema.Schema, constraints []argConstraint) bool {
	if schema == nil {
		return slices.ContainsFunc(constraints, func(c argConstraint) bool { return c.name == keyArg })
	}
	declared, closed := schemaMember(schema, keyArg, 0)
	if declared {
		return true
	}
	return !closed && slices.ContainsFunc(constraints, func(c argConstraint) bool { return c.name == keyArg })
}

// schemaMember reports whether the top-level object of schema declares the
// member name (in properties, through $ref or allOf), and whether it is
// closed to members it does not declare: additionalProperties other than
// true, unevaluatedProperties or propertyNames set. A closed answer is the
// cautious one (the key is then not injected, never refused).
func schemaMember(s *jsonschema.Schema, name string, depth int) (declared, closed bool) {
	if s == nil || depth > 8 {
		return false, depth > 8
	}
	if _, ok := s.Properties[name]; ok {
		declared = true
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties != true {
		closed = true
	}
	if s.UnevaluatedProperties != nil || s.PropertyNames != nil {
		closed = true
	}
	subs := append([]*jsonschema.Schema{s.Ref}, s.AllOf...)
	for _, sub := range subs {
		if sub == nil {
			continue
		}
		d, c := schemaMember(sub, name, depth+1)
		declared, closed = declared || d, closed || c
	}
	return declared, closed
}

// validateArgs checks args against the capability's JSON Schema, then the
// permission's compiled arg_constraints. Supported constraints: required,
// min, max, enum, pattern, min_length, max_length; an unknown or malformed
// constraint fails closed (every call is refused, naming it). key is the
// write's derived idempotency key ("" for reads): when args do not carry
// idempotency_key (the key was not injected, see injectsKey), the
// constraints on idempotency_key are checked against key, which the call
// carries on its envelope. shape is the schema's shape (nil when it has
// none): arguments it accepts are not validated again.
func validateArgs(schema *jsonschema.Schema, shape *shapeSchema, args map[string]any, constraints []argConstraint, key string) []ArgProblem {
	var probs []ArgProblem
	if schema != nil && (shape == nil || !shape.valid(args)) {
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
		if p, bad := c.check(args, key); bad {
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

// check returns the argument's first problem, if it has one. key stands
// for an idempotency_key argument that args do not carry.
func (c *argConstraint) check(args map[string]any, key string) (ArgProblem, bool) {
	name := c.name
	v, present := args[name]
	if !present && name == keyArg && key != "" {
		v, present = key, true
	}
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
