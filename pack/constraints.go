package pack

import (
	"fmt"
	"github.com/contextos/contextos/internal/sortedkeys"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
)

// argConstraintKeys returns the arg_constraints keys the Tool Gateway
// enforces, sorted. Validate refuses any other key: the gateway would
// refuse every call naming it, so a pack carrying one is a mistake caught
// before publication, not a run failure.
func argConstraintKeys() []string {
	return []string{"enum", "max", "max_length", "min", "min_length", "pattern", "required"}
}

// argConstraints checks one permission's arg_constraints: known keys,
// well-formed values, bounds that some value can meet.
func (v *validator) argConstraints(path string, cs map[string]map[string]any) {
	for _, arg := range sortedkeys.Of(cs) {
		c := cs[arg]
		ap := path + "." + arg
		for _, k := range sortedkeys.Of(c) {
			val, kp := c[k], ap+"."+k
			switch k {
			case "required":
				if _, ok := val.(bool); !ok {
					v.add(GateSchema, CodeFormat, kp, "must be true or false")
				}
			case "min", "max":
				if _, ok := finite(val); !ok {
					v.add(GateSchema, CodeFormat, kp, "must be a number")
				}
			case "min_length", "max_length":
				if n, ok := finite(val); !ok || n < 0 || n != math.Trunc(n) {
					v.add(GateSchema, CodeFormat, kp, "must be a non-negative integer")
				}
			case "enum":
				if l, ok := val.([]any); !ok || len(l) == 0 || !scalars(l) {
					v.add(GateSchema, CodeFormat, kp, "must be a non-empty list of strings, numbers or booleans")
				}
			case "pattern":
				if s, ok := val.(string); !ok {
					v.add(GateSchema, CodeFormat, kp, "must be a regular expression string")
				} else if _, err := regexp.Compile(s); err != nil {
					v.add(GateSchema, CodeFormat, kp, "does not compile as a regular expression")
				}
			default:
				v.add(GateSchema, CodeUnknownArgConstraint, kp, "constraint %q on argument %s is not one the gateway enforces (%s)", clip(k), clip(arg), strings.Join(argConstraintKeys(), ", "))
			}
		}
		for _, b := range [][2]string{{"min", "max"}, {"min_length", "max_length"}} {
			lo, ok1 := finite(c[b[0]])
			hi, ok2 := finite(c[b[1]])
			if ok1 && ok2 && lo > hi {
				v.add(GateSchema, CodeFormat, ap+"."+b[0], "%s is above %s: no value can pass", b[0], b[1])
			}
		}
	}
}

// finite returns a finite JSON number.
func finite(x any) (float64, bool) {
	f, ok := num(x)
	return f, ok && !math.IsNaN(f) && !math.IsInf(f, 0)
}

func scalars(l []any) bool {
	for _, e := range l {
		switch e.(type) {
		case string, float64, bool:
		default:
			return false
		}
	}
	return true
}

// loosened reports how next loosens base's argument constraints, or "".
// Every base constraint must remain, no weaker: min and min_length may
// only rise, max and max_length only fall, an enum may only lose members,
// a pattern may not change at all (whether one regular expression accepts
// less than another is not decided here), required may not be dropped,
// and any other key must stay as it is.
func loosened(base, next map[string]map[string]any) string {
	for _, arg := range sortedkeys.Of(base) {
		b, n := base[arg], next[arg]
		if n == nil && len(b) > 0 {
			return fmt.Sprintf("drops the constraint on %s", arg)
		}
		for _, k := range sortedkeys.Of(b) {
			bv, nv := b[k], n[k]
			switch k {
			case "required":
				if req, _ := bv.(bool); req {
					if r, _ := nv.(bool); !r {
						return fmt.Sprintf("drops required on %s", arg)
					}
				}
				continue
			case "min", "min_length":
				bm, ok1 := finite(bv)
				nm, ok2 := finite(nv)
				if ok1 && (!ok2 || nm < bm) {
					return fmt.Sprintf("lowers %s of %s", k, arg)
				}
				if ok1 {
					continue
				}
			case "max", "max_length":
				bm, ok1 := finite(bv)
				nm, ok2 := finite(nv)
				if ok1 && (!ok2 || nm > bm) {
					return fmt.Sprintf("raises %s of %s", k, arg)
				}
				if ok1 {
					continue
				}
			case "enum":
				bl, ok1 := bv.([]any)
				nl, ok2 := nv.([]any)
				if ok1 && ok2 {
					for _, x := range nl {
						if !slices.ContainsFunc(bl, func(y any) bool { return reflect.DeepEqual(x, y) }) {
							return fmt.Sprintf("widens the enum of %s", arg)
						}
					}
					continue
				}
			}
			if !reflect.DeepEqual(bv, nv) {
				if _, ok := n[k]; !ok {
					return fmt.Sprintf("drops %s on %s", k, arg)
				}
				return fmt.Sprintf("changes %s on %s (only an identical %s is known not to loosen)", k, arg, k)
			}
		}
	}
	return ""
}
