package policy

import (
	"strings"

	"github.com/contextos/contextos/internal/logic"
)

// varReads are the variables one rule or gate reads, with their paths
// split once at Prepare, so that an evaluation looks each up once and its
// required, tool.* and operand checks and its data digest all use that
// one value. The first digestN paths are the digest's members in order
// (the rule's canonical member order, or its sorted Vars); paths a check
// names that the expression does not read at the top level follow them.
type varReads struct {
	paths []string
	// nodes are the paths' nodes in the engine's pathTree.
	nodes    []int32
	digestN  int
	required []int // info.Required, in order
	eval     []int // info.Vars, in order: what the evaluator reads
	tool     []int // toolVars, in order
	checks   []int // the path of each of checks, in order
}

func newVarReads(names []string, info logic.Info, tool []string, checks []typeCheck, tree *pathTree) varReads {
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
	for _, p := range info.Vars {
		vr.eval = append(vr.eval, index(p))
	}
	for _, p := range tool {
		vr.tool = append(vr.tool, index(p))
	}
	for _, c := range checks {
		vr.checks = append(vr.checks, index(c.path))
	}
	vr.nodes = make([]int32, len(vr.paths))
	for i, p := range vr.paths {
		vr.nodes[i] = tree.intern(splitPath(p))
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

func (vr *varReads) read(m *pathMemo, b *varBufs) readVars {
	n := len(vr.nodes)
	var r readVars
	if n <= stackVars {
		r.vals, r.found = b.vals[:n], b.found[:n]
	} else {
		r.vals, r.found = make([]any, n), make([]bool, n)
	}
	for i, node := range vr.nodes {
		r.vals[i], r.found[i] = m.get(node)
	}
	return r
}

// pathTree holds every path an engine reads (its rules' and gates'
// variables, applies_to paths and the request's signals) as nodes, one per
// distinct leading run of segments, so that an evaluation resolves a
// shared prefix ("request.context") once for all the paths under it. The
// node of no segments, the whole document, is -1.
type pathTree struct {
	nodes []pathNode
	at    map[string]int32 // by the segments joined with dots (Prepare only)
}

// pathNode is the member or element seg of its parent node's value.
type pathNode struct {
	parent int32
	seg    string
}

// intern returns the node of segs, adding it and its prefixes as needed.
func (t *pathTree) intern(segs []string) int32 {
	if t.at == nil {
		t.at = map[string]int32{}
	}
	node := int32(-1)
	for k := range segs {
		// Joined segments name one run of segments: no segment holds a dot.
		key := strings.Join(segs[:k+1], ".")
		i, ok := t.at[key]
		if !ok {
			i = int32(len(t.nodes))
			t.nodes = append(t.nodes, pathNode{parent: node, seg: segs[k]})
			t.at[key] = i
		}
		node = i
	}
	return node
}

// memoNodes is how many of a tree's nodes (the first interned) an
// evaluation remembers; deeper nodes are resolved from their parents.
const memoNodes = 32

// pathMemo resolves one evaluation's paths over one document: a node's
// value, once looked up, is remembered for the rest of the evaluation
// (the document is read-only while it runs). The caller keeps it on its
// stack.
type pathMemo struct {
	tree  *pathTree
	doc   Document
	vals  [memoNodes]any
	state [memoNodes]uint8 // 0: not yet resolved, memoFound, memoAbsent
}

const (
	memoFound uint8 = 1 + iota
	memoAbsent
)

// get returns what Document.lookupSegs returns for node's segments.
func (m *pathMemo) get(node int32) (any, bool) {
	if node < 0 {
		return map[string]any(m.doc), true
	}
	if node < memoNodes {
		switch m.state[node] {
		case memoFound:
			return m.vals[node], true
		case memoAbsent:
			return nil, false
		}
	}
	n := &m.tree.nodes[node]
	v, ok := m.get(n.parent)
	if ok {
		v, ok = step(v, n.seg)
	}
	if !ok {
		v = nil
	}
	if node < memoNodes {
		m.vals[node], m.state[node] = v, memoAbsent
		if ok {
			m.state[node] = memoFound
		}
	}
	return v, ok
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
