package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/contextos/contextos/internal/sortedkeys"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/internal/logic"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// Sentinel errors.
var (
	// ErrPrepare reports a policy layer that cannot be prepared; the error
	// is an *Error of KindPrepare naming the bundle and rule or gate.
	ErrPrepare = errors.New("policy: cannot prepare")
	// ErrEvaluation reports an evaluation that failed closed; the error is
	// an *Error naming the bundle and rule or gate.
	ErrEvaluation = errors.New("policy: evaluation failed")
	// ErrBudget reports an expression over its budget: an *Error of
	// KindPrepare (too deep or too large; see Options) or of
	// KindBudget (too much work for one evaluation). Both also match
	// ErrPrepare or ErrEvaluation.
	ErrBudget = errors.New("policy: expression over budget")
)

// Options configures Prepare. The zero value (and nil) uses the
// defaults. The static limits, which packs are validated against, are
// fixed: an expression nests at most 64 operators and holds at most
// 10,000 values.
type Options struct {
	// MaxOperations bounds the work of one expression's evaluation: one
	// step per operator applied and per array element visited, one per
	// KiB of string read or built. Default 100,000.
	MaxOperations int
	// MaxBytes bounds what one evaluation builds (strings, and 16 bytes
	// per array element). Default 4 MiB.
	MaxBytes int
}

// Error kinds: why an expression was refused (KindPrepare) or why its
// evaluation failed closed (the others).
const (
	// KindPrepare: the expression cannot be prepared (unsupported
	// language or operator, malformed, or over its static budget); Err is
	// the cause.
	KindPrepare         = "prepare"
	KindMissingVariable = "missing_variable"
	KindTypeError       = "type_error"
	KindEvaluation      = "evaluation"
	// KindBudget: the evaluation took more operations or built more
	// bytes than Options allow. The rule has no outcome.
	KindBudget = "budget_exceeded"
)

// Error is a policy expression that Prepare refused (Kind KindPrepare) or
// whose evaluation failed closed (any other Kind), naming the bundle and
// rule, or the approval gate.
type Error struct {
	BundleID, RuleID, GateID string
	Kind                     string
	// Path is the variable at fault, when there is one; for KindBudget,
	// the operator in the expression where the budget ran out
	// ("and[1].map").
	Path string
	Msg  string
	// Err is the cause, for KindPrepare.
	Err error
}

func (e *Error) Error() string {
	if e.Kind == KindPrepare {
		msg := "policy: cannot prepare " + where(e.BundleID, e.RuleID, e.GateID)
		if e.Err != nil {
			msg += ": " + e.Err.Error()
		}
		return msg
	}
	msg := "policy: " + where(e.BundleID, e.RuleID, e.GateID) + ": " + e.Kind
	if e.Path != "" {
		msg += " " + e.Path
	}
	if e.Msg != "" {
		msg += ": " + e.Msg
	}
	return msg
}

// Is matches ErrPrepare for KindPrepare and ErrEvaluation otherwise, and
// ErrBudget for an expression over its static budget or an evaluation of
// KindBudget.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrPrepare:
		return e.Kind == KindPrepare
	case ErrEvaluation:
		return e.Kind != KindPrepare
	case ErrBudget:
		return e.Kind == KindBudget || e.Kind == KindPrepare && errors.Is(e.Err, logic.ErrBudget)
	}
	return false
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func where(bundle, rule, gate string) string {
	if gate != "" {
		return "approval gate " + gate
	}
	return "bundle " + bundle + " rule " + rule
}

// RuleOutcome is what one rule decided in an evaluation: allow, deny, or
// not_applicable when its applies_to did not match. It is not a decision
// spec's outcome (the business outcome a DecisionRecord carries).
type RuleOutcome string

// Rule outcomes.
const (
	Allow         RuleOutcome = "allow"
	Deny          RuleOutcome = "deny"
	NotApplicable RuleOutcome = "not_applicable"
)

// Verdict is the policy's overall verdict of one evaluation, strongest
// first. It is not a critic's verdict (contextos.Verdict).
type Verdict string

// Verdicts: refuse beats escalate beats deny beats allow.
const (
	VerdictRefuse   Verdict = "refuse"
	VerdictEscalate Verdict = "escalate"
	VerdictDeny     Verdict = "deny"
	VerdictAllow    Verdict = "allow"
)

// Decision is one applicable rule's outcome. Its PolicyDecisionID is
// derived from the run id, bundle, rule and DataDigest (the digest of the
// values the rule read), so replaying the same data reproduces it.
type Decision struct {
	PolicyDecisionID     string                  `json:"policy_decision_id"`
	BundleID             string                  `json:"bundle_id"`
	RuleID               string                  `json:"rule_id"`
	Outcome              RuleOutcome             `json:"outcome"`
	Branch               string                  `json:"branch,omitempty"`
	Allow                *bool                   `json:"allow,omitempty"`
	Reason               string                  `json:"reason,omitempty"`
	Requires             []string                `json:"requires,omitempty"`
	ApprovalMode         runcontext.ApprovalMode `json:"approval_mode,omitempty"`
	RequiresApprovalGate string                  `json:"requires_approval_gate,omitempty"`
	Raise                []string                `json:"raise,omitempty"`
	DecisionBinding      string                  `json:"decision_binding,omitempty"`
	Rationale            string                  `json:"rationale,omitempty"`
	DataDigest           string                  `json:"data_digest"`
}

// Clone returns a copy of d that shares no memory with it.
func (d Decision) Clone() Decision {
	if d.Allow != nil {
		a := *d.Allow
		d.Allow = &a
	}
	d.Requires, d.Raise = slices.Clone(d.Requires), slices.Clone(d.Raise)
	return d
}

// ManifestEntry lists the rules of a bundle that applied.
type ManifestEntry struct {
	BundleID string   `json:"bundle_id"`
	RuleIDs  []string `json:"rule_ids"`
}

// Gate is an approval gate's status for an evaluation.
type Gate struct {
	GateID       string `json:"gate_id"`
	ApproverRole string `json:"required_approver_role"`
	TTLSeconds   int    `json:"ttl_seconds"`
	Active       bool   `json:"active"`
	// ActivatedBy says why it is active: "when", or the rule ids whose
	// outcome requires it.
	ActivatedBy []string `json:"activated_by,omitempty"`
	// PerCall reports a gate that reads the tool call: its when reads
	// tool.*, or a rule that reads tool.* (in its if or its applies_to)
	// names it in a branch. Such a gate is evaluated again for each call
	// (Engine.PerCallGates says when it applies); inactive at compile
	// time, it may still hold a call.
	PerCall bool `json:"per_call,omitempty"`
	// ByCall, in a per-call evaluation (the document has a tool member),
	// reports a gate the call itself made active: its when reads tool.*
	// and holds for the call, or a rule that reads tool.* took a branch
	// naming it. At the gateway such a gate holds a write-class call
	// whatever gate the call's permission names (a read-only call only
	// when its permission names the gate).
	ByCall bool `json:"-"`
}

// Skipped is a rule or gate an evaluation did not evaluate because it
// reads a tool.* variable without a default and the document has no value
// for it: at compile time (no tool member), every such rule and gate,
// which applies per call; in a per-call evaluation, one that reads an
// argument the call does not carry. A skipped rule has no decision and a
// skipped gate's when does not activate it. The gateway refuses a
// write-class call whose evaluation skipped anything (fail closed), and a
// read-only one whose evaluation skipped the gate its permission names or
// a rule naming that gate; other skips let a read-only call go on.
type Skipped struct {
	// BundleID and RuleID name a rule; GateID a gate.
	BundleID, RuleID, GateID string
	// Path is the tool.* variable the document lacks.
	Path string
}

// Error returns the failure the skip stands for, as an *Error of
// KindMissingVariable naming the rule or gate.
func (s Skipped) Error() *Error {
	return &Error{BundleID: s.BundleID, RuleID: s.RuleID, GateID: s.GateID, Kind: KindMissingVariable, Path: s.Path, Msg: "the call has no value for it"}
}

// Raised are the guardrail labels raised in an evaluation, sorted.
type Raised struct {
	MustRefuse   []string `json:"must_refuse"`
	MustEscalate []string `json:"must_escalate"`
}

// Evaluation is the result of one evaluation: the verdict, each applicable
// rule's decision, the rules that applied per bundle, the guardrail labels
// raised and the approval gates' status.
type Evaluation struct {
	Verdict   Verdict         `json:"verdict"`
	Decisions []Decision      `json:"decisions"`
	Manifest  []ManifestEntry `json:"manifest"`
	Raised    Raised          `json:"raised"`
	Gates     []Gate          `json:"gates"`
	// Skipped are the rules and gates not evaluated for want of a tool.*
	// value (see Skipped), in evaluation order.
	Skipped []Skipped `json:"skipped,omitempty"`
}

// Clone returns a copy of r that shares nothing with it (decisions as
// Decision.Clone copies them). A nil r gives nil.
func (r *Evaluation) Clone() *Evaluation {
	if r == nil {
		return nil
	}
	c := *r
	if r.Decisions != nil {
		c.Decisions = make([]Decision, len(r.Decisions))
		for i, d := range r.Decisions {
			c.Decisions[i] = d.Clone()
		}
	}
	c.Manifest = slices.Clone(r.Manifest)
	for i := range c.Manifest {
		c.Manifest[i].RuleIDs = slices.Clone(c.Manifest[i].RuleIDs)
	}
	c.Raised = Raised{MustRefuse: slices.Clone(r.Raised.MustRefuse), MustEscalate: slices.Clone(r.Raised.MustEscalate)}
	c.Gates = slices.Clone(r.Gates)
	for i := range c.Gates {
		c.Gates[i].ActivatedBy = slices.Clone(c.Gates[i].ActivatedBy)
	}
	c.Skipped = slices.Clone(r.Skipped)
	return &c
}

// ActiveGates returns the ids of the active gates, in declaration order.
func (r *Evaluation) ActiveGates() []string {
	var out []string
	for _, g := range r.Gates {
		if g.Active {
			out = append(out, g.GateID)
		}
	}
	return out
}

// Input is one evaluation's input.
type Input struct {
	// RunID seeds the policy decision ids.
	RunID string
	// Data is the policy data document.
	Data Document
	// Signals are guardrail labels raised outside the request, such as a
	// tool result's risk_tags or signals.
	Signals []string
}

// Engine is a prepared policy layer. It is immutable and safe for
// concurrent use.
type Engine struct {
	limits  logic.Limits
	rules   []prepared
	bundles []string // bundle ids in evaluation order
	// bundlesUnique: no two bundles share an id, so the rules of each
	// bundle are one run of e.rules and the manifest is built without a map.
	bundlesUnique bool
	gates         []preparedGate
	refuse        map[string]bool
	escalate      map[string]bool
	usesTool      bool
	perCall       []PerCallGate
	// idHead starts the input of every policy decision id (see
	// canon.AppendIDHead).
	idHead []byte
	// paths holds every path the engine reads; signals is the node of the
	// request's signals.
	paths   pathTree
	signals int32
}

type prepared struct {
	bundleID string
	rule     pack.Rule
	prog     *logic.Program
	info     logic.Info
	applies  []applies
	checks   []typeCheck
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
	vars varReads
	// idParts are the bundle and rule ids as the parts of the rule's
	// policy decision ids, in canonical JSON, each followed by a comma.
	idParts []byte
	// thenGates and elseGates are the indexes of the gates (in
	// Engine.gates) the branch's requires_approval_gate names.
	thenGates, elseGates []int
}

// gatesOf returns the gates the then (or else) branch names.
func (pr *prepared) gatesOf(then bool) []int {
	if then {
		return pr.thenGates
	}
	return pr.elseGates
}

type applies struct {
	path   string
	node   int32 // path's node in the engine's pathTree
	values []any
}

type preparedGate struct {
	gate  pack.ApprovalGate
	prog  *logic.Program
	info  logic.Info
	check []typeCheck
	// readsTool: the gate's when reads tool.*; toolVars: the tool.*
	// variables it reads without a default; perCall: the gate reads the
	// tool call (Gate.PerCall).
	readsTool, perCall bool
	toolVars           []string
	vars               varReads
}

// PerCallGate says when a gate that reads the tool call applies to a
// call: when its When holds for the call, or when one of Rules takes a
// branch that names it.
type PerCallGate struct {
	GateID string
	// When is the gate's when, compact, when it reads tool.* (nil
	// otherwise: it is then evaluated as at compile time).
	When json.RawMessage
	// Rules are the rules that read tool.* and name the gate in a branch,
	// as "bundle_id#rule_id", in evaluation order.
	Rules []string
}

// Prepare parses and checks every expression of p's policy layer and
// orders bundles by priority (lower numbers first; ties keep declaration
// order). It does not run the pack's other validation gates. An
// expression over its static budget is an *Error of KindPrepare matching
// ErrBudget. opts may be nil (the defaults).
func Prepare(p *pack.Pack, opts *Options) (*Engine, error) {
	e := &Engine{refuse: set(p.PolicyLayer.Guardrails.MustRefuse), escalate: set(p.PolicyLayer.Guardrails.MustEscalate)}
	e.signals = e.paths.intern(signalsPath)
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
			// it prepared from (a branch's allow, gate or requires, an
			// applies_to list) changes no verdict.
			r.AppliesTo, r.If = jsonv.CloneObject(r.AppliesTo), slices.Clone(r.If)
			r.Then, r.Else = cloneEffect(r.Then), cloneEffect(r.Else)
			prog, expr, err := parse(r.If)
			if err != nil {
				return nil, &Error{Kind: KindPrepare, BundleID: b.BundleID, RuleID: r.RuleID, Err: err}
			}
			pr := prepared{bundleID: b.BundleID, rule: r, prog: prog, info: prog.Info(), checks: typeChecks(expr)}
			for _, k := range sortedkeys.Of(r.AppliesTo) {
				pr.applies = append(pr.applies, applies{path: k, node: e.paths.intern(splitPath(k)), values: appliesValues(r.AppliesTo[k])})
				pr.readsTool = pr.readsTool || logic.Root(k) == toolRoot
			}
			pr.readsTool = pr.readsTool || readsTool(pr.info)
			pr.toolVars = toolVars(pr.info)
			pr.reads, pr.readsOK = canon.NewMembers(pr.info.Vars)
			names := pr.info.Vars
			if pr.readsOK {
				names = pr.reads.Names()
			}
			pr.vars = newVarReads(names, pr.info, pr.toolVars, pr.checks, &e.paths)
			pr.idParts = append(canon.AppendString(pr.idParts, b.BundleID), ',')
			pr.idParts = append(canon.AppendString(pr.idParts, r.RuleID), ',')
			e.rules = append(e.rules, pr)
		}
	}
	for _, g := range p.PolicyLayer.ApprovalGates {
		g.When = slices.Clone(g.When)
		prog, expr, err := parse(g.When)
		if err != nil {
			return nil, &Error{Kind: KindPrepare, GateID: g.GateID, Err: err}
		}
		pg := preparedGate{gate: g, prog: prog, info: prog.Info(), check: typeChecks(expr)}
		pg.readsTool, pg.toolVars = readsTool(pg.info), toolVars(pg.info)
		pg.vars = newVarReads(pg.info.Vars, pg.info, pg.toolVars, pg.check, &e.paths)
		e.gates = append(e.gates, pg)
	}
	gatesByID := make(map[string][]int, len(e.gates))
	for i := range e.gates {
		gatesByID[e.gates[i].gate.GateID] = append(gatesByID[e.gates[i].gate.GateID], i)
	}
	for i := range e.rules {
		r := &e.rules[i]
		r.thenGates, r.elseGates = gatesNamed(gatesByID, r.rule.Then), gatesNamed(gatesByID, r.rule.Else)
	}
	e.bundlesUnique = len(set(e.bundles)) == len(e.bundles)
	var err error
	if e.idHead, err = canon.AppendIDHead(nil, canon.PrefixPolicy); err != nil {
		return nil, &Error{Kind: KindPrepare, Err: err}
	}
	e.preparePerCall()
	return e, nil
}

// gatesNamed returns the indexes of the gates (byID: by gate id) eff's
// requires_approval_gate names (nil for none).
func gatesNamed(byID map[string][]int, eff *pack.Effect) []int {
	if eff == nil || eff.RequiresApprovalGate == "" {
		return nil
	}
	return byID[eff.RequiresApprovalGate]
}

// cloneEffect is a deep copy of e (nil stays nil).
func cloneEffect(e *pack.Effect) *pack.Effect {
	if e == nil {
		return nil
	}
	c := *e
	if e.Allow != nil {
		a := *e.Allow
		c.Allow = &a
	}
	c.Requires, c.Raise = slices.Clone(e.Requires), slices.Clone(e.Raise)
	return &c
}

// toolRoot is the member of the data document a per-call evaluation adds.
const toolRoot = "tool"

// readsTool reports an expression that reads tool.* (or the whole
// document).
func readsTool(info logic.Info) bool {
	for _, v := range info.Vars {
		if logic.Root(v) == toolRoot || v == "" {
			return true
		}
	}
	return false
}

// toolVars are the tool.* variables an expression reads without a
// default.
func toolVars(info logic.Info) []string {
	var out []string
	for _, v := range info.Required {
		if logic.Root(v) == toolRoot {
			out = append(out, v)
		}
	}
	return out
}

// preparePerCall works out which gates read the tool call and when they
// apply (PerCallGates), and whether the policy reads tool data at all
// (UsesTool).
func (e *Engine) preparePerCall() {
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
func namesGate(r pack.Rule, gate string) bool {
	return r.Then != nil && r.Then.RequiresApprovalGate == gate || r.Else != nil && r.Else.RequiresApprovalGate == gate
}

// parse compiles raw; the decoded expression feeds the operand type
// checks.
func parse(raw json.RawMessage) (*logic.Program, any, error) {
	prog, err := logic.Compile(raw)
	if err != nil {
		return nil, nil, err
	}
	return prog, prog.Expr(), nil
}

func appliesValues(v any) []any {
	if list, ok := v.([]any); ok {
		return list
	}
	if list, ok := v.([]string); ok {
		out := make([]any, len(list))
		for i, s := range list {
			out[i] = s
		}
		return out
	}
	return []any{v}
}

// hit is a rule an evaluation applied: what its decision is made of.
type hit struct {
	pr *prepared
	// eff is the branch taken (then when the if held), nil for none.
	eff  *pack.Effect
	then bool
	// The decision's data digest is the evaluation's provenance text
	// [start:mid], its policy decision id [mid:end].
	start, mid, end int
}

// gateAcc is what an evaluation learns of a gate before building its
// status: its when held, how many decisions name it, and whether one of
// them is a rule's that reads tool.* in a per-call evaluation.
type gateAcc struct {
	when, byRule bool
	named        int
}

// resultBox is an evaluation with room for a small result's decisions,
// manifest, gates and the decisions' allows: a result that fits takes one
// allocation for all of them. Every slice into the box is capped at its
// length, so that a caller's append copies instead of writing over its
// neighbour.
type resultBox struct {
	ev        Evaluation
	decisions [2]Decision
	manifest  [1]ManifestEntry
	gates     [2]Gate
	allows    [4]bool
}

// stackHits is how many decisions, and stackGates how many gates, an
// evaluation tracks without allocating.
const (
	stackHits  = 8
	stackGates = 8
)

// Evaluate runs guardrails, then every applicable rule, then the approval
// gates, and returns the result. It fails closed with an *Error.
//
// The result is built once its size is known: the decisions' data digests
// and ids are one string, the decisions' requires and raise lists, the
// manifest's rule ids and the gates' activations share one []string (each
// list capped at its own end), and the decisions' allows one []bool.
func (e *Engine) Evaluate(in Input) (*Evaluation, error) {
	// Guardrails first: labels raised by the request and by tool results
	// (sorted and made distinct at the end).
	var labelBuf [16]string
	memo := pathMemo{tree: &e.paths, doc: in.Data}
	sig, ok := memo.get(e.signals)
	raised := append(appendSignals(labelBuf[:0], sig, ok), in.Signals...)
	_, perCall := in.Data[toolRoot]
	var bufs varBufs
	var skipped []Skipped
	var hitBuf [stackHits]hit
	hits := hitBuf[:0]
	// The decisions' data digests and ids, in order, and the input each id
	// hashes, whose head and run id are written once.
	var textBuf [stackHits * 96]byte
	text := textBuf[:0]
	var idBuf [256]byte
	idIn := append(canon.AppendString(append(idBuf[:0], e.idHead...), in.RunID), ',')
	runN := len(idIn)
	var accBuf [stackGates]gateAcc
	var acc []gateAcc
	if len(e.gates) <= stackGates {
		acc = accBuf[:len(e.gates)]
	} else {
		acc = make([]gateAcc, len(e.gates))
	}
	nStrs, nAllow, denied := 0, 0, false
	for i := range e.rules {
		pr := &e.rules[i]
		if !pr.matches(&memo) {
			continue
		}
		rv := pr.vars.read(&memo, &bufs)
		if p, missing := rv.missing(&pr.vars, pr.vars.tool); missing {
			skipped = append(skipped, Skipped{BundleID: pr.bundleID, RuleID: pr.rule.RuleID, Path: p})
			continue
		}
		out, err := e.run(pr.prog, pr.checks, &pr.vars, &rv, in.Data, pr.bundleID, pr.rule.RuleID, "")
		if err != nil {
			return nil, err
		}
		// The data digest, then the id derived from the run id, bundle, rule
		// and digest: IDOf(PrefixPolicy, run, bundle, rule, digest). A
		// digest ("sha256:" and hex) is written in JSON as it stands.
		h := hit{pr: pr, start: len(text)}
		if text, err = pr.appendDataDigest(text, &rv); err != nil {
			return nil, &Error{BundleID: pr.bundleID, RuleID: pr.rule.RuleID, Kind: KindEvaluation, Msg: "data read has no canonical form"}
		}
		h.mid = len(text)
		idIn = append(append(idIn[:runN], pr.idParts...), '"')
		idIn = append(append(idIn, text[h.start:h.mid]...), '"', ']')
		text = canon.AppendIDSum(text, canon.PrefixPolicy, idIn)
		h.end = len(text)
		h.eff = pr.rule.Else
		if logic.Truthy(out) {
			h.eff, h.then = pr.rule.Then, true
		}
		if eff := h.eff; eff != nil {
			nStrs += len(eff.Requires) + len(eff.Raise)
			if eff.Allow != nil {
				nAllow++
				denied = denied || !*eff.Allow
			}
			raised = append(raised, eff.Raise...)
			for _, g := range pr.gatesOf(h.then) {
				acc[g].named++
				acc[g].byRule = acc[g].byRule || perCall && pr.readsTool
			}
		}
		hits = append(hits, h)
	}
	box := new(resultBox)
	var gates []Gate
	if n := len(e.gates); n > len(box.gates) {
		gates = make([]Gate, n)
	} else if n > 0 {
		gates = box.gates[:n:n]
	}
	for i := range e.gates {
		g := &e.gates[i]
		st := &gates[i]
		*st = Gate{GateID: g.gate.GateID, ApproverRole: g.gate.RequiredApproverRole, TTLSeconds: g.gate.TTLSeconds, PerCall: g.perCall}
		rv := g.vars.read(&memo, &bufs)
		if p, missing := rv.missing(&g.vars, g.vars.tool); missing {
			skipped = append(skipped, Skipped{GateID: g.gate.GateID, Path: p})
		} else {
			out, err := e.run(g.prog, g.check, &g.vars, &rv, in.Data, "", "", g.gate.GateID)
			if err != nil {
				return nil, err
			}
			acc[i].when = logic.Truthy(out)
		}
		if acc[i].when || acc[i].named > 0 {
			st.Active = true
			st.ByCall = acc[i].when && perCall && g.readsTool || acc[i].byRule
			nStrs += acc[i].named
			if acc[i].when {
				nStrs++
			}
		}
	}
	if e.bundlesUnique {
		nStrs += len(hits) // the manifest's rule ids
	}
	strs := make([]string, nStrs)
	allows := box.allows[:]
	if nAllow > len(box.allows) {
		allows = make([]bool, nAllow)
	}
	all := string(text)
	var ds []Decision
	if n := len(hits); n > len(box.decisions) {
		ds = make([]Decision, n)
	} else {
		ds = box.decisions[:n:n]
	}
	for k := range hits {
		h := &hits[k]
		r := &h.pr.rule
		d := &ds[k]
		*d = Decision{PolicyDecisionID: all[h.mid:h.end], BundleID: h.pr.bundleID, RuleID: r.RuleID, DecisionBinding: r.DecisionBinding, Rationale: r.Rationale, DataDigest: all[h.start:h.mid], Outcome: NotApplicable}
		eff := h.eff
		if eff == nil {
			continue
		}
		d.Branch = "else"
		if h.then {
			d.Branch = "then"
		}
		if eff.Allow != nil {
			// The decision's own copy: a pointer into the rule would let a
			// caller that edits its evaluation rewrite the rule itself.
			allows[0] = *eff.Allow
			d.Allow, allows = &allows[0], allows[1:]
		}
		d.Reason, d.ApprovalMode, d.RequiresApprovalGate = eff.Reason, eff.ApprovalMode, eff.RequiresApprovalGate
		d.Requires, strs = take(strs, eff.Requires)
		d.Raise, strs = take(strs, eff.Raise)
		d.Outcome = Allow
		if eff.Allow != nil && !*eff.Allow {
			d.Outcome = Deny
		}
	}
	res := &box.ev
	*res = Evaluation{Decisions: ds, Gates: gates, Skipped: skipped}
	if e.bundlesUnique {
		res.Manifest, strs = manifestOf(ds, strs, box.manifest[:])
	} else {
		res.Manifest = manifestByBundle(e.bundles, ds)
	}
	// Each active gate's activations: "when", then the rules whose
	// decisions name it, in decision order.
	for i := range gates {
		if !gates[i].Active {
			continue
		}
		n := acc[i].named
		if acc[i].when {
			n++
		}
		gates[i].ActivatedBy, strs = strs[:0:n], strs[n:]
		if acc[i].when {
			gates[i].ActivatedBy = append(gates[i].ActivatedBy, "when")
		}
	}
	for k := range hits {
		if h := &hits[k]; h.eff != nil {
			for _, g := range h.pr.gatesOf(h.then) {
				gates[g].ActivatedBy = append(gates[g].ActivatedBy, h.pr.rule.RuleID)
			}
		}
	}
	res.Raised = Raised{MustRefuse: []string{}, MustEscalate: []string{}}
	slices.Sort(raised)
	for _, l := range slices.Compact(raised) {
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
	case denied:
		res.Verdict = VerdictDeny
	default:
		res.Verdict = VerdictAllow
	}
	return res, nil
}

// take copies src to the front of strs and returns the copy, capped at its
// end, and the rest of strs; a nil src gives nil.
func take(strs, src []string) ([]string, []string) {
	if src == nil {
		return nil, strs
	}
	n := copy(strs, src)
	return strs[:n:n], strs[n:]
}

// manifestOf groups the decisions' rule ids by bundle, in order: when no
// two bundles share an id, each bundle's decisions are one run. The
// entries are room's when they fit, their lists are taken from strs, each
// capped at its own end; it returns the rest of strs.
func manifestOf(ds []Decision, strs []string, room []ManifestEntry) ([]ManifestEntry, []string) {
	if len(ds) == 0 {
		return nil, strs
	}
	n := 1
	for i := 1; i < len(ds); i++ {
		if ds[i].BundleID != ds[i-1].BundleID {
			n++
		}
	}
	ids, strs := strs[:len(ds)], strs[len(ds):]
	var out []ManifestEntry
	if n > len(room) {
		out = make([]ManifestEntry, 0, n)
	} else {
		out = room[:0:n]
	}
	start := 0
	for i := range ds {
		ids[i] = ds[i].RuleID
		if i+1 == len(ds) || ds[i+1].BundleID != ds[i].BundleID {
			out = append(out, ManifestEntry{BundleID: ds[i].BundleID, RuleIDs: ids[start : i+1 : i+1]})
			start = i + 1
		}
	}
	return out, strs
}

// manifestByBundle groups the decisions' rule ids by bundle id, in the
// order of bundles, when two bundles share an id. A shared id is listed
// once for each of its bundles, each entry with a list of its own (capped
// at its end): a caller that edits one entry's list changes no other.
func manifestByBundle(bundles []string, ds []Decision) []ManifestEntry {
	manifest := map[string][]string{}
	for _, d := range ds {
		manifest[d.BundleID] = append(manifest[d.BundleID], d.RuleID)
	}
	var out []ManifestEntry
	listed := make(map[string]bool, len(manifest))
	for _, b := range bundles {
		if ids, ok := manifest[b]; ok {
			if listed[b] {
				ids = slices.Clone(ids)
			}
			listed[b] = true
			out = append(out, ManifestEntry{BundleID: b, RuleIDs: slices.Clip(ids)})
		}
	}
	return out
}

func (pr *prepared) matches(m *pathMemo) bool {
	for _, a := range pr.applies {
		v, ok := m.get(a.node)
		if !ok || !slices.ContainsFunc(a.values, func(w any) bool { return equalJSON(v, w) }) {
			return false
		}
	}
	return true
}

func equalJSON(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case float64:
		switch y := b.(type) {
		case float64:
			return x == y
		case json.Number:
			f, err := y.Float64()
			return err == nil && f == x
		}
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	return false
}

// appendDataDigest appends the digest of the values the rule read (rv,
// read from pr.vars): the canonical JSON of the object of its variables,
// null for one the document lacks.
func (pr *prepared) appendDataDigest(dst []byte, rv *readVars) ([]byte, error) {
	vals := rv.vals[:pr.vars.digestN]
	if pr.readsOK {
		// Scalars (most reads) are written on the stack.
		var scratch [256]byte
		if out, ok, err := pr.reads.AppendDigestScalars(dst, scratch[:], vals); ok || err != nil {
			return out, err
		}
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
func (e *Engine) run(prog *logic.Program, checks []typeCheck, vr *varReads, rv *readVars, d Document, bundle, rule, gate string) (out any, err error) {
	if p, missing := rv.missing(vr, vr.required); missing {
		return nil, &Error{BundleID: bundle, RuleID: rule, GateID: gate, Kind: KindMissingVariable, Path: p, Msg: "the data document has no value for it"}
	}
	for k, c := range checks {
		i := vr.checks[k]
		if msg := c.check(rv.vals[i], rv.found[i]); msg != "" {
			return nil, &Error{BundleID: bundle, RuleID: rule, GateID: gate, Kind: KindTypeError, Path: c.path, Msg: msg}
		}
	}
	// The evaluator's top-level vars read the values read once above.
	out, err = prog.EvalVars(map[string]any(d), e.limits, func(i int) (any, bool) {
		j := vr.eval[i]
		return rv.vals[j], rv.found[j]
	})
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
// number.
type typeCheck struct {
	op, path string
}

// numericOps are the operators that read their operands as numbers: a
// non-number makes a comparison false (NaN) or a max, min or sum NaN, so a
// gate over a call's argument would not hold the call.
var numericOps = map[string]bool{">": true, ">=": true, "<": true, "<=": true, "+": true, "-": true, "*": true, "/": true, "%": true, "max": true, "min": true}

func typeChecks(expr any) []typeCheck {
	var out []typeCheck
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for op, arg := range x {
				args, ok := arg.([]any)
				if !ok {
					args = []any{arg}
				}
				if scoped[op] {
					if len(args) > 0 {
						walk(args[0])
					}
					continue
				}
				if numericOps[op] {
					for _, a := range args {
						if p, ok := plainVar(a); ok {
							out = append(out, typeCheck{op: op, path: p})
						}
					}
				}
				walk(arg)
			}
		}
	}
	walk(expr)
	return out
}

var scoped = map[string]bool{"map": true, "filter": true, "reduce": true, "all": true, "none": true, "some": true}

// plainVar reports a {"var": "path"} operand, with a default or without:
// the check reads the value the document holds (a default stands only for
// a value the document lacks, and a null the document holds is read as
// null, not as the default).
func plainVar(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return "", false
	}
	arg, ok := m["var"]
	if !ok {
		return "", false
	}
	if list, ok := arg.([]any); ok {
		if len(list) != 1 && len(list) != 2 {
			return "", false
		}
		arg = list[0]
	}
	p, ok := arg.(string)
	return p, ok && p != ""
}

// check checks the operand's value v (ok: the document has it).
func (c typeCheck) check(v any, ok bool) string {
	if !ok {
		return ""
	}
	f, num := v.(float64)
	if !num {
		return fmt.Sprintf("operator %q needs a number, got %s", c.op, kind(v))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		// JSON has neither; a host's NaN would make every comparison
		// false and so switch a gate off.
		return fmt.Sprintf("operator %q needs a finite number, got %v", c.op, f)
	}
	return ""
}

func kind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func set(list []string) map[string]bool {
	m := make(map[string]bool, len(list))
	for _, s := range list {
		m[s] = true
	}
	return m
}

// UsesTool reports whether any rule or gate reads the tool member of the
// data document (so a per-call evaluation can differ from the run's).
func (e *Engine) UsesTool() bool { return e.usesTool }

// PerCallGates returns the gates that read the tool call (Gate.PerCall),
// in declaration order, each with when it applies to a call. The list is
// the caller's own copy: what it does to it changes neither the engine
// nor what the next caller is given.
func (e *Engine) PerCallGates() []PerCallGate {
	if e.perCall == nil {
		return nil
	}
	out := make([]PerCallGate, len(e.perCall))
	for i, pc := range e.perCall {
		out[i] = PerCallGate{GateID: pc.GateID, When: slices.Clone(pc.When), Rules: slices.Clone(pc.Rules)}
	}
	return out
}
