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
// permission's arg_constraints. Supported constraints: required, min, max,
// enum, pattern, min_length, max_length; an unknown constraint fails
// closed.
func validateArgs(schema *jsonschema.Schema, args map[string]any, constraints map[string]map[string]any) []ArgProblem {
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
	if len(constraints) == 0 {
		return probs
	}
	names := make([]string, 0, len(constraints))
	for n := range constraints {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, p := range checkConstraint(name, args, constraints[name]) {
			// One problem per argument: the schema's, else the first constraint's.
			if !slices.ContainsFunc(probs, func(q ArgProblem) bool { return q.Pointer == p.Pointer }) {
				probs = append(probs, p)
			}
		}
	}
	return probs
}

func checkConstraint(name string, args map[string]any, c map[string]any) []ArgProblem {
	ptr := "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
	v, present := args[name]
	var out []ArgProblem
	add := func(format string, a ...any) {
		out = append(out, ArgProblem{Pointer: ptr, Message: fmt.Sprintf(format, a...)})
	}
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		want := c[k]
		switch k {
		case "required":
			if r, _ := want.(bool); r && !present {
				add("argument %s is required", name)
			}
		case "min", "max":
			if !present {
				continue
			}
			n, isNum := v.(float64)
			bound, ok := toFloat(want)
			switch {
			case !ok:
				add("the permission's %s constraint on %s is not a number; the call is refused", k, name)
			case !isNum:
				add("argument %s must be a number", name)
			case k == "min" && n < bound:
				add("%s is below the minimum %s allowed for %s", fmtNum(n), fmtNum(bound), name)
			case k == "max" && n > bound:
				add("%s is above the maximum %s allowed for %s", fmtNum(n), fmtNum(bound), name)
			}
		case "enum":
			if !present {
				continue
			}
			list, ok := want.([]any)
			if !ok {
				add("the permission's enum constraint on %s is not a list; the call is refused", name)
				continue
			}
			found := false
			for _, e := range list {
				if equal(e, v) {
					found = true
				}
			}
			if !found {
				add("%s must be one of %v", name, list)
			}
		case "pattern":
			if !present {
				continue
			}
			p, _ := want.(string)
			re, err := regexp.Compile(p)
			s, isStr := v.(string)
			switch {
			case err != nil:
				add("the permission's pattern on %s does not compile; the call is refused", name)
			case !isStr:
				add("argument %s must be a string", name)
			case !re.MatchString(s):
				add("%s does not match the pattern %s", name, p)
			}
		case "min_length", "max_length":
			if !present {
				continue
			}
			bound, ok := toFloat(want)
			s, isStr := v.(string)
			n := float64(utf8.RuneCountInString(s))
			switch {
			case !ok:
				add("the permission's %s on %s is not a number; the call is refused", k, name)
			case !isStr:
				add("argument %s must be a string", name)
			case k == "min_length" && n < bound:
				add("%s must be at least %s characters", name, fmtNum(bound))
			case k == "max_length" && n > bound:
				add("%s must be at most %s characters", name, fmtNum(bound))
			}
		default:
			add("the permission has a constraint %q on %s that the gateway does not support; the call is refused", k, name)
		}
	}
	return out
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
