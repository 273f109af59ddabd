package policy

// A frozen copy of policy evaluation as it was at f94921e, before the
// performance rewrite (1a7d40f): the differential tests
// (evaluate_diff_test.go) hold Evaluate to it. Only the code that rewrite
// changed is copied (refEngine, Prepare, Evaluate and its helpers, reads.go),
// renamed with a ref prefix; helpers it left unchanged (typeChecks, parse,
// cloneEffect, appliesValues, readsTool, toolVars, namesGate, equalJSON,
// set, Document.lookup) are shared. Do not edit it to follow a change of
// the engine: a difference is what the tests exist to catch.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/internal/logic"
	"github.com/contextos/contextos/internal/sortedkeys"
	"github.com/contextos/contextos/pack"
)

// refEngine is a refPrepared policy layer. It is immutable and safe for
// concurrent use.
type refEngine struct {
	limits  logic.Limits
	rules   []refPrepared
	bundles []string // bundle ids in evaluation order
	// bundlesUnique: no two bundles share an id, so the rules of each
	// bundle are one run of e.rules and the manifest is built without a map.
	bundlesUnique bool
	gates         []refPreparedGate
	refuse        map[string]bool
	escalate      map[string]bool
	usesTool      bool
	perCall       []PerCallGate
}

type refPrepared struct {
	bundleID   string
	rule       pack.Rule
	prog       *logic.Program
	info       logic.Info
	refApplies []refApplies
	checks     []typeCheck
	// readsTool: the rule reads tool.* (its if or its applies_to);
	// toolVars: the tool.* variables its if reads without a default.
	readsTool bool
	toolVars  []string
	// reads are the variables the rule reads, in the canonical order of
	// its data digest's object; readsOK is false when a name has no
	// canonical order of its own (invalid UTF-8) and the digest is taken
	// over a map.
	reads   canon.Members
	readsOK bool
	// vars are the variables read once per evaluation; the first
	// vars.digestN are reads' names (info.Vars when !readsOK).
	vars refVarReads
}

type refApplies struct {
	path   string
	values []any
}

type refPreparedGate struct {
	gate  pack.ApprovalGate
	prog  *logic.Program
	info  logic.Info
	check []typeCheck
	// readsTool: the gate's when reads tool.*; toolVars: the tool.*
	// variables it reads without a default; perCall: the gate reads the
	// tool call (Gate.PerCall).
	readsTool, perCall bool
	toolVars           []string
	vars               refVarReads
}

// Prepare parses and checks every expression of p's policy layer and
// orders bundles by priority (lower numbers first; ties keep declaration
// order). It does not run the pack's other validation gates. An
// expression over its static budget is an *Error of KindPrepare matching
// ErrBudget. opts may be nil (the defaults).
func refPrepare(p *pack.Pack, opts *Options) (*refEngine, error) {
	e := &refEngine{refuse: set(p.PolicyLayer.Guardrails.MustRefuse), escalate: set(p.PolicyLayer.Guardrails.MustEscalate)}
	if opts != nil {
		e.limits = logic.Limits{MaxOps: opts.MaxOperations, MaxBytes: opts.MaxBytes}
	}
	// A non-number where a rule or gate reads a number fails closed, also
	// where no var operand names it (a reduce over a call's line items, a
	// computed value): see logic.Limits.StrictNumbers.
	e.limits.StrictNumbers = true
	order := make([]int, len(p.PolicyLayer.PolicyBundles))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return p.PolicyLayer.PolicyBundles[order[a]].Priority < p.PolicyLayer.PolicyBundles[order[b]].Priority
	})
	for _, bi := range order {
		b := p.PolicyLayer.PolicyBundles[bi]
		if b.PolicyDSL.Language != "jsonlogic" {
			return nil, &Error{Kind: KindPrepare, BundleID: b.BundleID, Err: fmt.Errorf("unsupported policy language %q", b.PolicyDSL.Language)}
		}
		e.bundles = append(e.bundles, b.BundleID)
		for _, r := range b.PolicyDSL.Rules {
			// The engine's own copy of the rule: a caller editing the pack
			// it refPrepared from (a branch's allow, gate or requires, an
			// applies_to list) changes no verdict.
			r.AppliesTo, r.If = jsonv.CloneObject(r.AppliesTo), slices.Clone(r.If)
			r.Then, r.Else = cloneEffect(r.Then), cloneEffect(r.Else)
			prog, expr, err := parse(r.If)
			if err != nil {
				return nil, &Error{Kind: KindPrepare, BundleID: b.BundleID, RuleID: r.RuleID, Err: err}
			}
			pr := refPrepared{bundleID: b.BundleID, rule: r, prog: prog, info: prog.Info(), checks: typeChecks(expr)}
			for _, k := range sortedkeys.Of(r.AppliesTo) {
				pr.refApplies = append(pr.refApplies, refApplies{path: k, values: appliesValues(r.AppliesTo[k])})
				pr.readsTool = pr.readsTool || logic.Root(k) == toolRoot
			}
			pr.readsTool = pr.readsTool || readsTool(pr.info)
			pr.toolVars = toolVars(pr.info)
			pr.reads, pr.readsOK = canon.NewMembers(pr.info.Vars)
			names := pr.info.Vars
			if pr.readsOK {
				names = pr.reads.Names()
			}
			pr.vars = refNewVarReads(names, pr.info, pr.toolVars, pr.checks)
			e.rules = append(e.rules, pr)
		}
	}
	for _, g := range p.PolicyLayer.ApprovalGates {
		g.When = slices.Clone(g.When)
		prog, expr, err := parse(g.When)
		if err != nil {
			return nil, &Error{Kind: KindPrepare, GateID: g.GateID, Err: err}
		}
		pg := refPreparedGate{gate: g, prog: prog, info: prog.Info(), check: typeChecks(expr)}
		pg.readsTool, pg.toolVars = readsTool(pg.info), toolVars(pg.info)
		pg.vars = refNewVarReads(pg.info.Vars, pg.info, pg.toolVars, pg.check)
		e.gates = append(e.gates, pg)
	}
	e.bundlesUnique = len(set(e.bundles)) == len(e.bundles)
	e.preparePerCall()
	return e, nil
}

// preparePerCall works out which gates read the tool call and when they
// apply (PerCallGates), and whether the policy reads tool data at all
// (UsesTool).
func (e *refEngine) preparePerCall() {
	for _, r := range e.rules {
		e.usesTool = e.usesTool || r.readsTool
	}
	for i := range e.gates {
		g := &e.gates[i]
		pc := PerCallGate{GateID: g.gate.GateID}
		if g.readsTool {
			var b bytes.Buffer
			if json.Compact(&b, g.gate.When) == nil {
				pc.When = b.Bytes()
			} else {
				pc.When = slices.Clone(g.gate.When)
			}
		}
		for _, r := range e.rules {
			if r.readsTool && namesGate(r.rule, g.gate.GateID) {
				pc.Rules = append(pc.Rules, r.bundleID+"#"+r.rule.RuleID)
			}
		}
		if pc.When != nil || len(pc.Rules) > 0 {
			g.perCall = true
			e.perCall = append(e.perCall, pc)
		}
		e.usesTool = e.usesTool || g.readsTool
	}
}

// namesGate reports a rule with a branch that requires gate.
// Evaluate runs guardrails, then every applicable rule, then the approval
// gates, and returns the result. It fails closed with an *Error.
func (e *refEngine) Evaluate(in Input) (*Evaluation, error) {
	res := &Evaluation{Decisions: make([]Decision, 0, len(e.rules))}
	raised := map[string]bool{}
	// Guardrails first: labels raised by the request and by tool results.
	for _, s := range refSignals(in.Data) {
		raised[s] = true
	}
	for _, s := range in.Signals {
		raised[s] = true
	}
	gateRules := map[string][]string{}
	var gateByCall map[string]bool // gates a rule that reads tool.* named
	_, perCall := in.Data[toolRoot]
	var manifest map[string][]string
	if !e.bundlesUnique {
		manifest = map[string][]string{}
	}
	var bufs refVarBufs
	for i := range e.rules {
		pr := &e.rules[i]
		if !pr.matches(in.Data) {
			continue
		}
		rv := pr.vars.read(in.Data, &bufs)
		if p, missing := rv.missing(&pr.vars, pr.vars.tool); missing {
			res.Skipped = append(res.Skipped, Skipped{BundleID: pr.bundleID, RuleID: pr.rule.RuleID, Path: p})
			continue
		}
		d, err := pr.evaluate(e, in, &rv)
		if err != nil {
			return nil, err
		}
		if manifest != nil {
			manifest[pr.bundleID] = append(manifest[pr.bundleID], pr.rule.RuleID)
		}
		for _, l := range d.Raise {
			raised[l] = true
		}
		if d.RequiresApprovalGate != "" {
			gateRules[d.RequiresApprovalGate] = append(gateRules[d.RequiresApprovalGate], d.RuleID)
			if perCall && pr.readsTool {
				if gateByCall == nil {
					gateByCall = map[string]bool{}
				}
				gateByCall[d.RequiresApprovalGate] = true
			}
		}
		res.Decisions = append(res.Decisions, d)
	}
	if manifest != nil {
		for _, b := range e.bundles {
			if ids, ok := manifest[b]; ok {
				res.Manifest = append(res.Manifest, ManifestEntry{BundleID: b, RuleIDs: ids})
			}
		}
	} else {
		res.Manifest = refManifestOf(res.Decisions)
	}
	if len(e.gates) > 0 {
		res.Gates = make([]Gate, 0, len(e.gates))
	}
	for i := range e.gates {
		g := &e.gates[i]
		st := Gate{GateID: g.gate.GateID, ApproverRole: g.gate.RequiredApproverRole, TTLSeconds: g.gate.TTLSeconds, PerCall: g.perCall}
		rv := g.vars.read(in.Data, &bufs)
		when := false
		if p, missing := rv.missing(&g.vars, g.vars.tool); missing {
			res.Skipped = append(res.Skipped, Skipped{GateID: g.gate.GateID, Path: p})
		} else {
			out, err := e.run(g.prog, g.check, &g.vars, &rv, in.Data, "", "", g.gate.GateID)
			if err != nil {
				return nil, err
			}
			when = logic.Truthy(out)
		}
		ids := gateRules[g.gate.GateID]
		if when || len(ids) > 0 {
			st.Active = true
			st.ActivatedBy = make([]string, 0, len(ids)+1)
			if when {
				st.ActivatedBy = append(st.ActivatedBy, "when")
				st.ByCall = perCall && g.readsTool
			}
			if len(ids) > 0 {
				st.ActivatedBy = append(st.ActivatedBy, ids...)
				st.ByCall = st.ByCall || gateByCall[g.gate.GateID]
			}
		}
		res.Gates = append(res.Gates, st)
	}
	res.Raised = Raised{MustRefuse: []string{}, MustEscalate: []string{}}
	for _, l := range sortedkeys.Of(raised) {
		if e.refuse[l] {
			res.Raised.MustRefuse = append(res.Raised.MustRefuse, l)
		}
		if e.escalate[l] {
			res.Raised.MustEscalate = append(res.Raised.MustEscalate, l)
		}
	}
	switch {
	case len(res.Raised.MustRefuse) > 0:
		res.Verdict = VerdictRefuse
	case len(res.Raised.MustEscalate) > 0:
		res.Verdict = VerdictEscalate
	case len(refDenied(res)) > 0:
		res.Verdict = VerdictDeny
	default:
		res.Verdict = VerdictAllow
	}
	return res, nil
}

// refManifestOf groups the decisions' rule ids by bundle, in order: when no
// two bundles share an id, each bundle's decisions are one run. The
// entries' lists share one array, each capped at its own end.
func refManifestOf(ds []Decision) []ManifestEntry {
	if len(ds) == 0 {
		return nil
	}
	n := 1
	for i := 1; i < len(ds); i++ {
		if ds[i].BundleID != ds[i-1].BundleID {
			n++
		}
	}
	ids := make([]string, len(ds))
	out := make([]ManifestEntry, 0, n)
	start := 0
	for i := range ds {
		ids[i] = ds[i].RuleID
		if i+1 == len(ds) || ds[i+1].BundleID != ds[i].BundleID {
			out = append(out, ManifestEntry{BundleID: ds[i].BundleID, RuleIDs: ids[start : i+1 : i+1]})
			start = i + 1
		}
	}
	return out
}

func (pr *refPrepared) matches(d Document) bool {
	for _, a := range pr.refApplies {
		v, ok := d.lookup(a.path)
		if !ok || !slices.ContainsFunc(a.values, func(w any) bool { return equalJSON(v, w) }) {
			return false
		}
	}
	return true
}

func (pr *refPrepared) evaluate(e *refEngine, in Input, rv *refReadVars) (Decision, error) {
	r := pr.rule
	out, err := e.run(pr.prog, pr.checks, &pr.vars, rv, in.Data, pr.bundleID, r.RuleID, "")
	if err != nil {
		return Decision{}, err
	}
	// The data digest, then the id derived from it, written into one
	// buffer and kept as one string.
	var buf [128]byte
	b, err := pr.appendDataDigest(buf[:0], rv)
	if err != nil {
		return Decision{}, &Error{BundleID: pr.bundleID, RuleID: r.RuleID, Kind: KindEvaluation, Msg: "data read has no canonical form"}
	}
	n := len(b)
	b, err = canon.AppendIDOf(b, canon.PrefixPolicy, canon.StringPart(in.RunID), canon.StringPart(pr.bundleID), canon.StringPart(r.RuleID), canon.BytesPart(b[:n]))
	if err != nil {
		return Decision{}, &Error{BundleID: pr.bundleID, RuleID: r.RuleID, Kind: KindEvaluation, Msg: err.Error()}
	}
	both := string(b)
	digest, id := both[:n], both[n:]
	d := Decision{PolicyDecisionID: id, BundleID: pr.bundleID, RuleID: r.RuleID, DecisionBinding: r.DecisionBinding, Rationale: r.Rationale, DataDigest: digest, Outcome: NotApplicable}
	eff, branch := r.Else, "else"
	if logic.Truthy(out) {
		eff, branch = r.Then, "then"
	}
	if eff == nil {
		return d, nil
	}
	d.Branch = branch
	if eff.Allow != nil {
		// The decision's own copy: a pointer into the rule would let a
		// caller that edits its evaluation rewrite the rule itself.
		allow := *eff.Allow
		d.Allow = &allow
	}
	d.Reason, d.Requires = eff.Reason, slices.Clone(eff.Requires)
	d.ApprovalMode, d.RequiresApprovalGate, d.Raise = eff.ApprovalMode, eff.RequiresApprovalGate, slices.Clone(eff.Raise)
	d.Outcome = Allow
	if eff.Allow != nil && !*eff.Allow {
		d.Outcome = Deny
	}
	return d, nil
}

// appendDataDigest appends the digest of the values the rule read (rv,
// read from pr.vars): the canonical JSON of the object of its variables,
// null for one the document lacks.
func (pr *refPrepared) appendDataDigest(dst []byte, rv *refReadVars) ([]byte, error) {
	vals := rv.vals[:pr.vars.digestN]
	if pr.readsOK {
		return pr.reads.AppendDigestObject(dst, vals)
	}
	read := make(map[string]any, len(vals))
	for i, p := range pr.vars.paths[:pr.vars.digestN] {
		read[p] = vals[i] // nil for a variable the document lacks
	}
	d, err := canon.Digest(read)
	return append(dst, d...), err
}

// run checks the required variables and operand types (from rv, read
// from vr), then evaluates within the engine's budget.
func (e *refEngine) run(prog *logic.Program, checks []typeCheck, vr *refVarReads, rv *refReadVars, d Document, bundle, rule, gate string) (out any, err error) {
	if p, missing := rv.missing(vr, vr.required); missing {
		return nil, &Error{BundleID: bundle, RuleID: rule, GateID: gate, Kind: KindMissingVariable, Path: p, Msg: "the data document has no value for it"}
	}
	for k, c := range checks {
		i := vr.checks[k]
		if msg := c.check(rv.vals[i], rv.found[i]); msg != "" {
			return nil, &Error{BundleID: bundle, RuleID: rule, GateID: gate, Kind: KindTypeError, Path: c.path, Msg: msg}
		}
	}
	out, err = prog.Eval(map[string]any(d), e.limits)
	if err != nil {
		// Declared here: errors.As's target would otherwise be allocated
		// on every evaluation.
		var be *logic.BudgetError
		if errors.As(err, &be) {
			return nil, &Error{BundleID: bundle, RuleID: rule, GateID: gate, Kind: KindBudget, Path: be.Path, Msg: strings.TrimPrefix(be.Error(), be.Path+": ")}
		}
		var ne *logic.NumberError
		if errors.As(err, &ne) {
			return nil, &Error{BundleID: bundle, RuleID: rule, GateID: gate, Kind: KindTypeError, Path: ne.Path, Msg: strings.TrimPrefix(ne.Error(), ne.Path+": ")}
		}
		return nil, &Error{BundleID: bundle, RuleID: rule, GateID: gate, Kind: KindEvaluation, Msg: err.Error()}
	}
	return out, nil
}

// typeCheck requires a var operand of a numeric operator to be a finite
// refVarReads are the variables one rule or gate reads, with their paths
// split once at Prepare, so that an evaluation looks each up once and its
// required, tool.* and operand checks and its data digest all use that
// one value. The first digestN paths are the digest's members in order
// (the rule's canonical member order, or its sorted Vars); paths a check
// names that the expression does not read at the top level follow them.
type refVarReads struct {
	paths    []string
	segs     [][]string
	digestN  int
	required []int // info.Required, in order
	tool     []int // toolVars, in order
	checks   []int // the path of each of checks, in order
}

func refNewVarReads(names []string, info logic.Info, tool []string, checks []typeCheck) refVarReads {
	vr := refVarReads{paths: append([]string(nil), names...), digestN: len(names)}
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

// refReadVars holds one evaluation's values of a refVarReads: vals[i] and
// found[i] are what Document.lookup(paths[i]) returns.
type refReadVars struct {
	vals  []any
	found []bool
}

// refVarBufs is the room refReadVars takes its slices from when a rule or gate
// reads at most stackVars variables. The caller keeps it (on its stack):
// a refReadVars pointing into itself would be moved to the heap.
type refVarBufs struct {
	vals  [stackVars]any
	found [stackVars]bool
}

func (vr *refVarReads) read(d Document, b *refVarBufs) refReadVars {
	n := len(vr.segs)
	var r refReadVars
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
func (r *refReadVars) missing(vr *refVarReads, idx []int) (string, bool) {
	for _, i := range idx {
		if !r.found[i] || r.vals[i] == nil {
			return vr.paths[i], true
		}
	}
	return "", false
}

// refSignals is Document.signals as it was.
func refSignals(d Document) []string {
	v, ok := d.lookup("request.context.signals")
	if !ok {
		return nil
	}
	list, _ := v.([]any)
	var out []string
	for _, e := range list {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// refDenied is Evaluation.denied as it was.
func refDenied(r *Evaluation) []Decision {
	var out []Decision
	for _, d := range r.Decisions {
		if d.Outcome == Deny {
			out = append(out, d)
		}
	}
	return out
}
