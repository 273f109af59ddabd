package policy

import (
	"github.com/contextos/contextos/internal/logic"
)

// varReads are the variables one rule or gate reads, with their paths
// split once at Prepare, so that an evaluation looks each up once and its
// required, tool.* and operand checks and its data digest all use that
// one value. The first digestN paths are the digest's members in order
// (the rule's canonical member order, or its sorted Vars); paths a check
// names that the expression does not read at the top level follow them.
type varReads struct {
	paths    []string
	segs     [][]string
	digestN  int
	required []int // info.Required, in order
	tool     []int // toolVars, in order
	checks   []int // the path of each of checks, in order
}

func newVarReads(names []string, info logic.Info, tool []string, checks []typeCheck) varReads {
	vr := varReads{paths: append([]string(nil), names...), digestN: len(names)}
	at := make(map[string]int, len(names))
	for i, n := range names {
		at[n] = i
	}
	index := func(p string) int {
		if i, ok := at[p]; ok {
			return i
		}
		at[p] = len(vr.paths)
		vr.paths = append(vr.paths, p)
		return at[p]
	}
	for _, p := range info.Required {
		vr.required = append(vr.required, index(p))
	}
	for _, p := range tool {
		vr.tool = append(vr.tool, index(p))
	}
	for _, c := range checks {
		vr.checks = append(vr.checks, index(c.path))
	}
	vr.segs = make([][]string, len(vr.paths))
	for i, p := range vr.paths {
		vr.segs[i] = splitPath(p)
	}
	return vr
}

// splitPath splits a dotted path as the evaluator does (logic.Segments):
// "" is the whole document (nil), and "a." is "a" then "".
func splitPath(path string) []string { return logic.Segments(path) }

// stackVars is how many variables an evaluation reads without allocating.
const stackVars = 8

// readVars holds one evaluation's values of a varReads: vals[i] and
// found[i] are what Document.lookup(paths[i]) returns.
type readVars struct {
	vals  []any
	found []bool
}

// varBufs is the room readVars takes its slices from when a rule or gate
// reads at most stackVars variables. The caller keeps it (on its stack):
// a readVars pointing into itself would be moved to the heap.
type varBufs struct {
	vals  [stackVars]any
	found [stackVars]bool
}

func (vr *varReads) read(d Document, b *varBufs) readVars {
	n := len(vr.segs)
	var r readVars
	if n <= stackVars {
		r.vals, r.found = b.vals[:n], b.found[:n]
	} else {
		r.vals, r.found = make([]any, n), make([]bool, n)
	}
	for i, s := range vr.segs {
		r.vals[i], r.found[i] = d.lookupSegs(s)
	}
	return r
}

// missing returns the first of the indexed paths with no value (absent or
// null).
func (r *readVars) missing(vr *varReads, idx []int) (string, bool) {
	for _, i := range idx {
		if !r.found[i] || r.vals[i] == nil {
			return vr.paths[i], true
		}
	}
	return "", false
}
