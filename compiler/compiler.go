package compiler

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/compilehook"
	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/internal/ontology"
	"github.com/contextos/contextos/internal/packview"
	"github.com/contextos/contextos/internal/problem"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// Input is one resolved, verified pack (pack.Resolver gives these).
// ContentHash, when set, is the content hash the pack was verified under
// (its signed content hash); Prepare refuses a Pack that does not hash to
// it. Empty: Prepare computes it.
type Input struct {
	Ref         pack.Ref
	Pack        *pack.Pack
	ContentHash string
}

// Options tunes compilation. The zero value compiles with no evidence, no
// memory and the estimate tokenizer; Ontologies must name the pack's
// ontology or the compile is refused.
type Options struct {
	// Ontologies are the ontology versions the host declares,
	// "namespace@version" (e.g. "ont.support@1.0.0").
	Ontologies []string
	// Host is what the host provides, checked against every input pack's
	// contract_meta.compatibility.requires (stage 2; a pack it does not
	// satisfy is refused with ErrIncompatible). Nil: what a runtime of
	// this module declares by default — "runtime" at
	// pack.RuntimeContractVersion and, when Ontologies are set,
	// "ontology" at the highest of their versions. A runtime passes the
	// host its pack.Resolver checks with (Resolver.Host).
	Host pack.Host
	// Overlays are the declared environment overlays; each applies to the
	// input pack its base names (stage 3) and is recorded in the ledger
	// (packs[].overlay: id, environment, digest). An overlay naming no
	// input pack is not applied; two naming the same pack are refused (a
	// run is in one environment).
	Overlays []*pack.Overlay
	// Evidence retrieves evidence (stage 7). Default: none.
	Evidence EvidenceSource
	// Memory recalls memories (stage 7). Default: none.
	Memory MemoryRecall
	// Tokenizer counts block tokens (stage 8). Default: EstimateTokenizer.
	Tokenizer Tokenizer
	// At is the instant evidence expiry is judged at (the run's start, on
	// the runtime's injected clock). It is an input like the others, not
	// a clock: the same instant gives the same compiled context and hash.
	// Zero: evidence with an expires_at is omitted, since its freshness
	// cannot be judged.
	At time.Time
	// KnowledgeSnapshot is the knowledge-graph snapshot the run is pinned
	// to; "kg:" evidence from another snapshot is stale and omitted.
	KnowledgeSnapshot string
	// Policy bounds each JsonLogic evaluation of the prepared policy (at
	// stage 5 and at the gateway's per-call evaluations). Zero: the
	// defaults of policy.Options.
	Policy policy.Options
	// Form is the compiled form. Zero: the current form; a replay of a
	// packet recorded in an earlier form sets that form.
	Form Form
	// Validation tunes the validation of the overlaid and merged pack view
	// (the host's redaction rule names). Zero: the defaults of
	// pack.ValidateOptions.
	Validation pack.ValidateOptions
}

// Prepared is a set of packs merged, overlaid and checked once (stages 1,
// 3 and the host half of 4), with its policy prepared. Compile it for many
// requests, concurrently.
type Prepared struct {
	pack     *pack.Pack
	engine   *policy.Engine
	packs    []LedgerPack
	tenants  []tenant
	opts     Options
	ontology string
	intents  []string
	business string
	// developer and system are the compiled prompt's developer and system
	// text: they depend on the packs only.
	developer, system string
	gates             map[string]pack.ApprovalGate
	ruleMeta          map[string]ruleMeta
	perms             map[string]pack.Permission // "adapter_id.capability" → its governing permission (packview.EffectivePermissions)
	unbound           []string                   // the gates no permission names (packview.UnboundGates)
	class             pack.DataClassification    // the highest of the input packs'
	// The tool surface's work that the pack alone decides (prepareSurface).
	perCall                 []policy.PerCallGate
	surfaces                []*adapterSurface // one per adapter of the registry, in its order
	gateTexts, unboundTexts map[string]string // per-call and unbound gates' blocks, by gate_id
	toolBlocks              int               // the most tool blocks a compile writes (adapters and gates)
	capabilities            int               // the capabilities of the pack's adapters (prepareSurface)
	gateIndex               map[string]int    // each approval gate's index, in the pack's order
	// evMemo keeps the digest of the last evidence its compiles
	// retrieved, shared by the copies At, WithSources and WithForm make.
	evMemo *evidenceMemo
	// sealMemo remembers the content its compiles hashed last, shared
	// by the copies At, WithSources and WithForm make.
	sealMemo *sealMemo
}

// evidenceMemo is the digest of one list of evidence items, and the
// blocks of those admitted: a source that serves the same items to every
// run (a static corpus) has them digested and written out once, not at
// every compile. What it holds is never changed, only replaced: a
// compile reads the texts it was handed while another replaces them.
type evidenceMemo struct {
	mu    sync.Mutex
	items []EvidenceItem
	hash  string
	// texts[i] is evidenceBlock(items[i]) for each item a compile of
	// these items admitted, "" for the others; nil until one has.
	texts []string
}

// digestOf returns canon.Digest(items) and, when the memo holds items,
// its texts (nil: none yet).
func (m *evidenceMemo) digestOf(items []EvidenceItem) (string, []string, error) {
	if m == nil {
		d, err := canon.Digest(items)
		return d, nil, err
	}
	m.mu.Lock()
	if m.items != nil && slices.Equal(m.items, items) {
		d, t := m.hash, m.texts
		m.mu.Unlock()
		return d, t, nil
	}
	m.mu.Unlock()
	d, err := canon.Digest(items)
	if err != nil {
		return "", nil, err
	}
	m.mu.Lock()
	m.items, m.hash, m.texts = slices.Clone(items), d, nil
	m.mu.Unlock()
	return d, nil, nil
}

// keepTexts keeps texts, the blocks a compile wrote for items, when the
// memo still holds items.
func (m *evidenceMemo) keepTexts(items []EvidenceItem, texts []string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	if m.texts == nil && slices.Equal(m.items, items) {
		m.texts = texts
	}
	m.mu.Unlock()
}

// size is how many items the memo holds: the evidence blocks the next
// compile is likely to write.
func (m *evidenceMemo) size() int {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.items)
}

type tenant struct {
	ref, id string
	shared  bool
}

type ruleMeta struct {
	priority int
	// text is the policy block and citation a compile wrote last for the
	// rule, and the decision they were written from.
	text *atomic.Pointer[policyText]
}

type policyText struct {
	d          policy.Decision // the members policyBlock reads
	text, cite string
}

// policyText returns p.policyBlock(*d) and the block's citation,
// "policy:bundle_id#rule_id": those a compile wrote last for the rule
// when they were written from the same decision.
func (p *Prepared) policyText(d *policy.Decision) (text, cite string) {
	slot := p.ruleMeta[d.RuleID].text
	if slot == nil {
		return p.policyBlock(*d), "policy:" + d.BundleID + "#" + d.RuleID
	}
	if t := slot.Load(); t != nil && sameText(&t.d, d) {
		return t.text, t.cite
	}
	t := &policyText{
		d: policy.Decision{BundleID: d.BundleID, RuleID: d.RuleID, Outcome: d.Outcome, Branch: d.Branch, Reason: d.Reason, Requires: slices.Clone(d.Requires),
			ApprovalMode: d.ApprovalMode, RequiresApprovalGate: d.RequiresApprovalGate, DecisionBinding: d.DecisionBinding, Rationale: d.Rationale},
		text: p.policyBlock(*d), cite: "policy:" + d.BundleID + "#" + d.RuleID,
	}
	slot.Store(t)
	return t.text, t.cite
}

// sameText reports whether decisions a and b have the same policy block
// and citation: the members policyBlock reads are equal.
func sameText(a, b *policy.Decision) bool {
	return a.BundleID == b.BundleID && a.RuleID == b.RuleID && a.Outcome == b.Outcome && a.Branch == b.Branch && a.Reason == b.Reason &&
		slices.Equal(a.Requires, b.Requires) && a.ApprovalMode == b.ApprovalMode && a.RequiresApprovalGate == b.RequiresApprovalGate &&
		a.DecisionBinding == b.DecisionBinding && a.Rationale == b.Rationale
}

// Compile runs the nine stages for one request: Prepare then
// Prepared.Compile.
func Compile(ctx context.Context, packs []Input, req *runcontext.InvokeRequest, rc *runcontext.RunContext, opts *Options) (*CompiledContext, error) {
	p, err := Prepare(packs, opts)
	if err != nil {
		return nil, err
	}
	return p.Compile(ctx, req, rc)
}

// Prepare runs the request-independent stages: 1, merge the packs (the
// first is primary; a duplicate id with different content is an error);
// 2, each pack's content is the content hash it was verified under and
// its compatibility.requires holds for Options.Host; 3, apply overlays;
// 4, check the ontology against the host's. It then validates the merged
// view and prepares its policy.
func Prepare(packs []Input, opts *Options) (*Prepared, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Tokenizer == nil {
		o.Tokenizer = EstimateTokenizer{}
	}
	if len(packs) == 0 {
		return nil, fail(1, ErrInput, nil, "no packs")
	}
	host := o.Host
	if host == nil {
		host = pack.Host{"runtime": pack.RuntimeContractVersion}
		if v := ontology.Highest(o.Ontologies); v != "" {
			host["ontology"] = v
		}
	}
	pr := &Prepared{opts: o, gates: map[string]pack.ApprovalGate{}, ruleMeta: map[string]ruleMeta{}, evMemo: &evidenceMemo{}, sealMemo: &sealMemo{}}
	views := make([]*pack.Pack, len(packs))
	for i, in := range packs {
		if in.Pack == nil {
			return nil, fail(1, ErrInput, nil, "pack %d is nil", i)
		}
		ref, err := in.Pack.Ref()
		if err != nil || ref != in.Ref {
			return nil, fail(1, ErrInput, err, "pack %d is %s@%s, not %s", i, in.Pack.PackMeta.PackID, in.Pack.PackMeta.PackVersion, in.Ref)
		}
		lp := LedgerPack{Ref: in.Ref.String(), ContentHash: in.ContentHash}
		h, err := pack.ContentHash(in.Pack)
		if err != nil {
			return nil, fail(1, ErrInput, err, "hash %s", in.Ref)
		}
		if lp.ContentHash == "" {
			lp.ContentHash = h
		} else if h != lp.ContentHash {
			// The pack changed after it was verified under that hash.
			return nil, fail(2, ErrInput, pack.ErrSignature, "pack %s does not hash to the content hash it was verified under", in.Ref)
		}
		if err := checkOverlayVersion(in.Ref, o.Overlays); err != nil {
			return nil, err
		}
		view := in.Pack
		for _, ov := range o.Overlays {
			if ov == nil || ov.Base != in.Ref.String() {
				continue
			}
			if lp.Overlay != nil {
				return nil, fail(3, ErrInput, nil, "overlays %q and %q both apply to %s: a run is in one environment", lp.Overlay.OverlayID, ov.OverlayID, in.Ref)
			}
			v, applied, err := pack.ApplyOverlay(view, ov, &o.Validation)
			if err != nil {
				return nil, fail(3, ErrInput, err, "overlay %s", ov.OverlayID)
			}
			view, lp.Overlay = v, &applied
		}
		// The Prepared compiles its own copy of the pack, as it was
		// checked, and of what an overlay added (its permissions, rules,
		// gates): a caller that edits the pack or overlay it handed over
		// changes no later compile (its controls, tool surface or hash).
		own, err := view.Clone()
		if err != nil {
			return nil, fail(1, ErrInput, err, "copy %s", in.Ref)
		}
		views[i] = own
		view = own
		if c := view.PackMeta.DataClassification; slices.Index(pack.DataClassifications(), c) > slices.Index(pack.DataClassifications(), pr.class) {
			pr.class = c
		}
		pr.packs = append(pr.packs, lp)
		t := view.PackMeta.Tenant
		pr.tenants = append(pr.tenants, tenant{ref: lp.Ref, id: t.TenantID, shared: t.Shared})
	}
	merged, err := merge(views)
	if err != nil {
		return nil, err
	}
	if err := pack.Validate(merged, &o.Validation); err != nil {
		return nil, fail(1, ErrMerge, err, "the merged pack view is invalid")
	}
	ont := merged.IntelligenceRefs.Ontology
	pr.ontology = ont.Namespace + "@" + ont.Version
	if err := checkOntology(ont, o.Ontologies); err != nil {
		return nil, err
	}
	// Stage 2's compatibility check, made once the ontology check has
	// said, in its own words, how to declare a missing ontology.
	for _, in := range packs {
		if err := pack.CheckCompatibility(in.Pack, host); err != nil {
			return nil, fail(2, ErrIncompatible, err, "pack %s", in.Ref)
		}
	}
	if pr.engine, err = policy.Prepare(merged, &o.Policy); err != nil {
		return nil, fail(5, ErrPolicy, err, "prepare policy")
	}
	pr.pack = merged
	pr.intents = pack.ServedIntents(merged)
	pr.business = businessBlock(merged)
	pr.developer = developerText(merged)
	pr.system = "You are an agent governed by ContextOS, running pack " + pr.packs[0].Ref + ". You act only through the tools in the tool manifest, within the runtime controls; policy is enforced outside you and you cannot change it."
	for _, g := range merged.PolicyLayer.ApprovalGates {
		pr.gates[g.GateID] = g
	}
	for _, b := range merged.PolicyLayer.PolicyBundles {
		for _, r := range b.PolicyDSL.Rules {
			pr.ruleMeta[r.RuleID] = ruleMeta{priority: b.Priority, text: &atomic.Pointer[policyText]{}}
		}
	}
	pr.perms = packview.EffectivePermissions(merged) // an explicit deny wins over any allow
	pr.unbound = packview.UnboundGates(merged, pr.perms)
	pr.prepareSurface()
	return pr, nil
}

// At returns a copy of p that judges evidence expiry at now (the run's
// time); the prepared packs and policy are shared.
func (p *Prepared) At(now time.Time) *Prepared {
	c := *p
	c.opts.At = now
	return &c
}

// WithSources returns a copy of p that retrieves evidence from ev and
// recalls memory from mem (nil for none): a runtime gives each run its own
// sources, to pin what the run's compile saw.
func (p *Prepared) WithSources(ev EvidenceSource, mem MemoryRecall) *Prepared {
	c := *p
	c.opts.Evidence, c.opts.Memory = ev, mem
	return &c
}

// WithForm returns a copy of p that compiles in form f (see Form); the
// prepared packs and policy are shared.
func (p *Prepared) WithForm(f Form) *Prepared {
	c := *p
	c.opts.Form = f
	return &c
}

// Pack returns the merged, overlaid pack view the compile uses. The view
// is the Prepared's own, read by every later Compile and every gateway
// run over p: callers must not change it (pack.Pack.Clone gives a copy to
// edit). Prepare itself works on its own copies of the packs and
// overlays it is handed, so editing those changes nothing here.
func (p *Prepared) Pack() *pack.Pack { return p.pack }

// Engine returns the prepared policy engine (the gateway evaluates per-call
// policy with it).
func (p *Prepared) Engine() *policy.Engine { return p.engine }

// merge combines packs: lists concatenate, a duplicate id must carry
// identical content, single-valued layers come from the first pack.
func merge(views []*pack.Pack) (*pack.Pack, error) {
	if len(views) == 1 {
		return views[0], nil
	}
	b, err := json.Marshal(views[0])
	if err != nil {
		return nil, fail(1, ErrMerge, err, "copy primary pack")
	}
	var m pack.Pack
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fail(1, ErrMerge, err, "copy primary pack")
	}
	for _, v := range views[1:] {
		src := v.PackMeta.PackID
		if err := appendUnique(&m.PolicyLayer.PolicyBundles, v.PolicyLayer.PolicyBundles, func(x pack.PolicyBundle) string { return x.BundleID }, "bundle_id", src); err != nil {
			return nil, err
		}
		if err := appendUnique(&m.PolicyLayer.ApprovalGates, v.PolicyLayer.ApprovalGates, func(x pack.ApprovalGate) string { return x.GateID }, "gate_id", src); err != nil {
			return nil, err
		}
		if err := appendUnique(&m.ToolingLayer.AdapterRegistry, v.ToolingLayer.AdapterRegistry, func(x pack.Adapter) string { return x.AdapterID }, "adapter_id", src); err != nil {
			return nil, err
		}
		if err := appendUnique(&m.ToolingLayer.Permissions, v.ToolingLayer.Permissions, func(x pack.Permission) string { return x.PermissionID }, "permission_id", src); err != nil {
			return nil, err
		}
		if err := appendUnique(&m.DecisionLayer.DecisionSpecs, v.DecisionLayer.DecisionSpecs, func(x pack.DecisionSpec) string { return x.DecisionKey }, "decision_key", src); err != nil {
			return nil, err
		}
		if err := appendUnique(&m.EvaluationLayer.EvalTargets, v.EvaluationLayer.EvalTargets, func(x pack.EvalTarget) string { return x.Intent }, "eval target intent", src); err != nil {
			return nil, err
		}
		if err := appendUnique(&m.EvaluationLayer.ReleaseGates, v.EvaluationLayer.ReleaseGates, func(x pack.ReleaseGate) string { return x.Metric }, "release gate metric", src); err != nil {
			return nil, err
		}
		g := &m.PolicyLayer.Guardrails
		g.MustRefuse = unionStrings(g.MustRefuse, v.PolicyLayer.Guardrails.MustRefuse)
		g.MustEscalate = unionStrings(g.MustEscalate, v.PolicyLayer.Guardrails.MustEscalate)
		g.RedactionRules = unionStrings(g.RedactionRules, v.PolicyLayer.Guardrails.RedactionRules)
		if on, vo := m.IntelligenceRefs.Ontology, v.IntelligenceRefs.Ontology; on.Namespace != vo.Namespace || on.Version != vo.Version {
			return nil, fail(1, ErrMerge, nil, "pack %s uses ontology %s@%s, the primary pack %s@%s", src, vo.Namespace, vo.Version, on.Namespace, on.Version)
		}
	}
	return &m, nil
}

func appendUnique[T any](dst *[]T, src []T, id func(T) string, kind, from string) error {
	for _, x := range src {
		i := slices.IndexFunc(*dst, func(y T) bool { return id(y) == id(x) })
		if i < 0 {
			*dst = append(*dst, x)
			continue
		}
		a, _ := canon.JSON((*dst)[i])
		b, _ := canon.JSON(x)
		if !bytes.Equal(a, b) {
			return fail(1, ErrMerge, nil, "%s %q in pack %s conflicts with an earlier pack", kind, id(x), from)
		}
	}
	return nil
}

func unionStrings(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// blockID is prefix followed by i in decimal, from ids (the table of
// prefix's first ids) when it holds it.
func blockID(ids *[blockIDs]string, prefix string, i int) string {
	if i >= 0 && i < len(ids) {
		return ids[i]
	}
	return prefix + strconv.Itoa(i)
}

// blockIDs is how many ids of each kind are written once, not per compile.
const blockIDs = 32

var polIDs, toolIDs, gateIDs, evIDs, memIDs = idTable("pol_"), idTable("tool_"), idTable("gate_"), idTable("ev_"), idTable("mem_")

func idTable(prefix string) *[blockIDs]string {
	var t [blockIDs]string
	for i := range t {
		t[i] = prefix + strconv.Itoa(i)
	}
	return &t
}

// Block priorities per bucket (seed 003's published output).
const (
	priorityBusiness = 90
	priorityPolicy   = 80
	priorityTool     = 70
	priorityEvidence = 60
	priorityMemory   = 50
	prioritySession  = 40
)

// Compile runs the per-request stages: 2, tenancy; 4, the intent must be
// served; 5, guardrails and policy; 6, the tool surface; 7, evidence and
// memory admission; 8, token budgets and buckets; 9, controls, prompt,
// budget report, ledger and hashes. It is deterministic: the same inputs
// give the same bytes, compiled_context_hash and ledger_hash; inputs that
// differ only in run-specific members (run, request and trace ids, the
// identity claim) give the same compiled_context_hash.
//
// A request and run context that disagree (runcontext.CheckAgreement) are
// refused with ErrConflict. The pack's environment_defaults fill the
// locale (input.locale, else the run context's locale), the currency
// (input.context.currency) and the timezone (input.context.timezone) the
// request leaves empty; the session block shows them and the ledger's
// environment records them.
func (p *Prepared) Compile(ctx context.Context, req *runcontext.InvokeRequest, rc *runcontext.RunContext) (*CompiledContext, error) {
	return p.compile(ctx, req, rc, nil)
}

func init() {
	compilehook.CompileWithPolicy = func(p any, ctx context.Context, req *runcontext.InvokeRequest, rc *runcontext.RunContext) (any, *policy.Evaluation, error) {
		var eval *policy.Evaluation
		cc, err := p.(*Prepared).compile(ctx, req, rc, &eval)
		if err != nil {
			return nil, nil, err
		}
		return cc, eval, nil
	}
}

// compile is Compile; when eval is not nil, it is set to a copy of the
// run-level policy evaluation, taken before the compile reads it.
func (p *Prepared) compile(ctx context.Context, req *runcontext.InvokeRequest, rc *runcontext.RunContext, eval **policy.Evaluation) (*CompiledContext, error) {
	if req == nil || rc == nil {
		return nil, fail(0, ErrInput, nil, "request and run context are required")
	}
	// The run context must be the request's: the check Materialize makes.
	if err := runcontext.CheckAgreement(req, rc); err != nil {
		return nil, fail(0, ErrConflict, err, "the run context is not the request's")
	}
	form := p.opts.Form.resolve()
	env := p.environment(req, rc, form)
	reqContext, err := requestContext(req)
	if err != nil {
		return nil, fail(0, ErrInput, err, "input.context has no canonical form")
	}
	// The user message is bounded first, before any work on it.
	session, task := sessionBlock(req, rc, env, reqContext, form), taskText(req, cmp.Or(rc.Intent, req.Input.Intent))
	if err := p.checkSession(session, task, rc.RunBudget.BucketTokens); err != nil {
		return nil, err
	}
	// Stage 2: tenancy.
	for _, t := range p.tenants {
		if t.id != rc.TenantID && !t.shared {
			return nil, fail(2, ErrTenant, nil, "pack %s belongs to tenant %s, the run to %s, and the pack is not shared", t.ref, t.id, rc.TenantID)
		}
	}
	// Stage 4: the intent must be served.
	intent := rc.Intent
	if intent == "" {
		intent = req.Input.Intent
	}
	if !slices.Contains(p.intents, intent) {
		return nil, fail(4, ErrIntent, nil, "intent %q is not served by the pack (serves %v)", problem.Quote(intent), p.intents)
	}
	// Stage 5: guardrails and policy.
	res, err := p.engine.Evaluate(policy.Input{RunID: rc.RunID, Data: policy.NewDocument(req.Input, rc)})
	if err != nil {
		return nil, fail(5, ErrPolicy, err, "evaluate policy")
	}
	if eval != nil {
		*eval = res.Clone()
	}
	cc := &CompiledContext{}
	ledger := &cc.ContextLedger
	// The packs are copied: the compiled context goes to the run's result,
	// and the prepared packs' list to every run of them.
	*ledger = ContextLedger{
		PackRef: p.packs[0].Ref, Packs: clonePacks(p.packs), RequestID: req.RequestID, RunID: rc.RunID, TraceID: rc.TraceID,
		TenantID: rc.TenantID, Intent: intent, SafetyMode: string(rc.SafetyMode), Ontology: p.ontology,
		PolicyResults: res.Decisions, PolicyVerdict: res.Verdict, GuardrailsRaised: res.Raised, ApprovalGates: res.Gates,
		PolicyBundles: []string{}, Tools: []string{}, EvidenceRefs: []string{}, MemoryRefs: []string{},
	}
	if form != Form1 {
		ledger.Environment, ledger.DataClassification = env, p.class
	}
	if ledger.Inputs.RequestHash, err = canon.DigestOf(requestEncoding{req}); err != nil {
		return nil, fail(0, ErrInput, err, "request has no canonical form")
	}
	if ledger.Inputs.RunContextHash, err = canon.DigestOf(runContextEncoding{rc}); err != nil {
		return nil, fail(0, ErrInput, err, "run context has no canonical form")
	}
	cc.Manifests.PolicyManifest = make([]PolicyManifestEntry, 0, len(res.Manifest))
	for _, m := range res.Manifest {
		cc.Manifests.PolicyManifest = append(cc.Manifests.PolicyManifest, PolicyManifestEntry{BundleID: m.BundleID, RuleIDs: m.RuleIDs})
		ledger.PolicyBundles = append(ledger.PolicyBundles, m.BundleID)
	}
	activeGates := res.ActiveGates()
	g := p.pack.PolicyLayer.Guardrails
	cc.RuntimeControls = RuntimeControls{
		MustRefuse: nonNil(g.MustRefuse), MustEscalate: nonNil(g.MustEscalate),
		ApprovalGatesActive: nonNil(activeGates), RedactionRulesActive: nonNil(g.RedactionRules),
	}
	// The blocks are gathered in one list, sized for the pack's blocks
	// and the evidence the last compile admitted.
	blocks := make([]ContextBlock, 0, 2+len(res.Decisions)+p.toolBlocks+p.evMemo.size())
	blocks = append(blocks, ContextBlock{BlockID: "biz_summary", Bucket: runcontext.BucketBusiness, Content: p.business, Priority: priorityBusiness})
	// Each block's provenance is its own list, cut from one array:
	// appending to one cannot write into another.
	perProv := 1
	if form == Form1 {
		perProv = 2
	}
	provs := make([]string, perProv*len(res.Decisions))
	for i := range res.Decisions {
		d := &res.Decisions[i]
		// The block cites its rule; its policy decision id (derived from
		// the run id) is in the ledger's policy_results[i], so the prompt
		// and compiled_context_hash stay free of run-specific ids.
		text, cite := p.policyText(d)
		prov := provs[perProv*i : perProv*(i+1) : perProv*(i+1)]
		prov[0] = cite
		if form == Form1 {
			prov[1] = d.PolicyDecisionID
		}
		blocks = append(blocks, ContextBlock{BlockID: blockID(polIDs, "pol_", i), Bucket: runcontext.BucketPolicy, Content: text, Priority: priorityPolicy,
			ProvenanceRefs: prov})
	}
	// Stage 6: tool surface.
	blocks = p.surface(cc, res, rc.SafetyMode, activeGates, blocks)
	// Stage 7: evidence and memory.
	evStart := len(blocks)
	blocks, evItems, evAdmitted, err := p.evidence(ctx, req, rc, ledger, blocks)
	if err != nil {
		return nil, err
	}
	if blocks, err = p.memory(ctx, rc, intent, ledger, blocks); err != nil {
		return nil, err
	}
	blocks = append(blocks, ContextBlock{BlockID: "session", Bucket: runcontext.BucketSession, Content: session, Priority: prioritySession})
	// Stage 8: budgets and buckets.
	blocks, dropped := p.budget(cc, blocks, rc.RunBudget.BucketTokens)
	// The admitted evidence is blocks evStart on, in order: an item is in
	// the manifest when the budget kept its block.
	cc.Manifests.EvidenceManifest = make([]EvidenceManifestEntry, 0, len(evAdmitted))
	ledger.EvidenceRefs = make([]string, 0, len(evAdmitted))
	for k, i := range evAdmitted {
		if !dropped[evStart+k] {
			it := &evItems[i]
			cc.Manifests.EvidenceManifest = append(cc.Manifests.EvidenceManifest, EvidenceManifestEntry{EvidenceRef: it.EvidenceRef, SourceID: it.SourceID, Hash: it.Hash})
			ledger.EvidenceRefs = append(ledger.EvidenceRefs, it.EvidenceRef)
		}
	}
	for _, b := range blocks {
		if b.Bucket == runcontext.BucketMemory {
			ledger.MemoryRefs = append(ledger.MemoryRefs, b.ProvenanceRefs...)
		}
	}
	// Stage 9: prompt, ledger, hash.
	cc.CompiledPrompt = CompiledPrompt{
		System:        p.system,
		Developer:     p.developer,
		Task:          task,
		ContextBlocks: blocks,
	}
	ledger.Budget = LedgerBudget{TokensUsedAtCompile: cc.BudgetReport.TokensUsedAtCompile, TruncatedBuckets: []string{}}
	for _, b := range runcontext.Buckets() {
		if cc.BudgetReport.BucketTruncations[b] {
			ledger.Budget.TruncatedBuckets = append(ledger.Budget.TruncatedBuckets, string(b))
		}
	}
	if err := seal(cc, form, p.sealMemo); err != nil {
		return nil, fail(9, ErrInput, err, "the compiled context has no canonical form")
	}
	return cc, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}

// riskLevel names the risk of an approval mode in capability metadata.
func riskLevel(m runcontext.ApprovalMode) string {
	switch m {
	case runcontext.ReadOnly:
		return "read_only"
	case runcontext.LocalWrite:
		return "write_reversible"
	case runcontext.Network:
		return "network"
	case runcontext.Delegated:
		return "write_delegated"
	case runcontext.Destructive:
		return "write_irreversible"
	}
	return "unknown"
}

// surface computes stage 6: adapter registry ∩ allowed permissions ∩
// approval mode (pack.Permission.Mode) ≤ safety mode, minus what policy blocks (a refusal blocks
// everything; a deny or escalation blocks write-class capabilities).
func (p *Prepared) surface(cc *CompiledContext, res *policy.Evaluation, safety runcontext.ApprovalMode, activeGates []string, blocks []ContextBlock) []ContextBlock {
	ledger := &cc.ContextLedger
	cc.Manifests.ToolManifest = make([]ToolManifestEntry, 0, len(p.surfaces))
	// Policy may lower a capability's mode (never raise it) through the gate
	// that governs it: the lowest mode a taken branch asks for, per gate.
	// Both are indexed by p.gateIndex ("": no branch asks; false: no
	// surfaced capability's permission names the gate); a gate the pack
	// does not declare is keyed by its id.
	var gateMode []runcontext.ApprovalMode
	var otherMode map[string]runcontext.ApprovalMode
	for _, d := range res.Decisions {
		if d.ApprovalMode.Valid() && d.RequiresApprovalGate != "" {
			gi, ok := p.gateIndex[d.RequiresApprovalGate]
			if !ok {
				if m, ok := otherMode[d.RequiresApprovalGate]; !ok || d.ApprovalMode.Compare(m) < 0 {
					if otherMode == nil {
						otherMode = map[string]runcontext.ApprovalMode{}
					}
					otherMode[d.RequiresApprovalGate] = d.ApprovalMode
				}
				continue
			}
			if gateMode == nil {
				gateMode = make([]runcontext.ApprovalMode, len(p.gateIndex))
			}
			if m := gateMode[gi]; m == "" || d.ApprovalMode.Compare(m) < 0 {
				gateMode[gi] = d.ApprovalMode
			}
		}
	}
	named := make([]bool, len(p.gateIndex)) // gates a surfaced capability's permission names
	var otherNamed map[string]bool
	// Each block's provenance is its own one-string list, cut from one
	// array: appending to one cannot write into another.
	provs := make([]string, p.toolBlocks)
	// The ledger's tools are sized for every capability of the pack, and
	// each entry's metadata for its adapter's: lists and maps grown one
	// capability at a time copy themselves at each growth.
	ledger.Tools = slices.Grow(ledger.Tools, p.capabilities)
	// Each entry's capabilities are cut from one array, sized for every
	// capability of the pack and capped at the entry's: appending to one
	// entry's list cannot write into another's.
	capRoom := make([]string, 0, p.capabilities)
	var sigBuf [16]capSig
	for ai, a := range p.pack.ToolingLayer.AdapterRegistry {
		as := p.surfaces[ai]
		entry := ToolManifestEntry{AdapterID: a.AdapterID, Capabilities: []string{}, CapabilityMetadata: make(map[string]CapabilityMetadata, len(as.caps))}
		sig := sigBuf[:0]
		capFrom := len(capRoom)
		for ci := range as.caps {
			cs := &as.caps[ci]
			reason := ""
			switch {
			case cs.perm == nil:
				reason = "no allowed permission exposes it"
			case !cs.mode.AtMost(safety):
				reason = fmt.Sprintf("approval mode %s is above the run's safety mode %s", cs.mode, safety)
			case res.Verdict == policy.VerdictRefuse:
				reason = "a must_refuse guardrail fired"
			case cs.mode.IsWrite() && (res.Verdict == policy.VerdictDeny || res.Verdict == policy.VerdictEscalate):
				reason = "policy " + string(res.Verdict) + " blocks write-class capabilities"
			}
			if reason != "" {
				ledger.ToolsWithheld = append(ledger.ToolsWithheld, WithheldTool{Capability: cs.id, Reason: reason})
				continue
			}
			perm := cs.perm
			mode := cs.mode
			if perm.RequiresApprovalGate != "" {
				m := otherMode[perm.RequiresApprovalGate]
				if cs.gate >= 0 && gateMode != nil {
					m = gateMode[cs.gate]
				}
				if m != "" && m.Compare(mode) < 0 {
					mode = m
				}
			}
			capRoom = append(capRoom, cs.name)
			// The constraints are copied: the compiled context goes to the
			// run's result, and the pack's own map to every run of it.
			md := CapabilityMetadata{
				Kind: cs.kind, RiskLevel: riskLevel(mode), ApprovalMode: mode, Source: "adapter_registry", PermissionID: perm.PermissionID,
				Constraints: cloneConstraints(perm.ArgConstraints), ApprovalGate: perm.RequiresApprovalGate, GateActive: perm.RequiresApprovalGate != "" && slices.Contains(activeGates, perm.RequiresApprovalGate),
			}
			if md.ApprovalGate != "" && !md.GateActive {
				md.GatePerCall = cs.perCall
			}
			switch {
			case cs.gate >= 0:
				named[cs.gate] = true
			case md.ApprovalGate != "":
				if otherNamed == nil {
					otherNamed = map[string]bool{}
				}
				otherNamed[md.ApprovalGate] = true
			}
			entry.CapabilityMetadata[cs.name] = md
			ledger.Tools = append(ledger.Tools, cs.id)
			sig = append(sig, capSig{cap: ci, mode: mode, active: md.GateActive})
		}
		if len(capRoom) == capFrom {
			continue
		}
		entry.Capabilities = capRoom[capFrom:len(capRoom):len(capRoom)]
		n := len(cc.Manifests.ToolManifest)
		provs[n] = as.prov
		blocks = append(blocks, ContextBlock{BlockID: blockID(toolIDs, "tool_", n), Bucket: runcontext.BucketTool,
			Content: as.textOf(a, entry, sig), Priority: priorityTool, ProvenanceRefs: provs[n : n+1 : n+1]})
		cc.Manifests.ToolManifest = append(cc.Manifests.ToolManifest, entry)
	}
	// A gate that reads the tool call and that no surfaced capability's
	// permission names can still hold any call: the model is told when. A
	// gate no permission names at all holds every write-class call while
	// it is active: the model is told it is.
	if len(cc.Manifests.ToolManifest) > 0 {
		n, k := 0, len(cc.Manifests.ToolManifest)
		for _, pc := range p.perCall {
			if gi, ok := p.gateIndex[pc.GateID]; ok && named[gi] || otherNamed[pc.GateID] || slices.Contains(activeGates, pc.GateID) && slices.Contains(p.unbound, pc.GateID) {
				continue
			}
			provs[k] = "gate:" + pc.GateID
			blocks = append(blocks, ContextBlock{BlockID: blockID(gateIDs, "gate_", n), Bucket: runcontext.BucketTool,
				Content: p.gateTexts[pc.GateID], Priority: priorityTool, ProvenanceRefs: provs[k : k+1 : k+1]})
			n, k = n+1, k+1
		}
		for _, id := range p.unbound {
			if !slices.Contains(activeGates, id) {
				continue
			}
			provs[k] = "gate:" + id
			blocks = append(blocks, ContextBlock{BlockID: blockID(gateIDs, "gate_", n), Bucket: runcontext.BucketTool,
				Content: p.unboundTexts[id], Priority: priorityTool, ProvenanceRefs: provs[k : k+1 : k+1]})
			n, k = n+1, k+1
		}
	}
	return blocks
}

// adapterSurface is what the tool surface of one adapter of the pack
// needs that the pack alone decides, made once by Prepare and only read
// after (but for text, which is replaced whole).
type adapterSurface struct {
	prov string // the block's provenance, "adapter:" + adapter_id
	caps []capSurface
	// text is the last block a compile wrote for the adapter and what
	// it was written from.
	text atomic.Pointer[toolText]
}

// capSurface is one capability of an adapter: its name, its id
// ("adapter_id.capability"), its governing permission (nil: no allowed
// permission exposes it), its mode and kind, and when its permission's
// approval gate, if it reads the tool call, applies to a call.
type capSurface struct {
	name, id string
	perm     *pack.Permission
	mode     runcontext.ApprovalMode
	kind     string
	perCall  string
	gate     int // the index of its permission's approval gate in Prepared.gateIndex, -1 for none or one the pack does not declare
}

// capSig is what a tool block says of a surfaced capability that varies
// from compile to compile: which capability, its mode after policy, and
// whether its gate is active. The rest follows from the capability.
type capSig struct {
	cap    int
	mode   runcontext.ApprovalMode
	active bool
}

type toolText struct {
	sig  []capSig
	text string
}

// textOf returns toolBlock(a, entry), where sig says what of entry varies:
// the text written last when sig is the same.
func (as *adapterSurface) textOf(a pack.Adapter, entry ToolManifestEntry, sig []capSig) string {
	if t := as.text.Load(); t != nil && slices.Equal(t.sig, sig) {
		return t.text
	}
	text := toolBlock(a, entry)
	as.text.Store(&toolText{sig: slices.Clone(sig), text: text})
	return text
}

// prepareSurface makes p's adapter surfaces and gate texts (Prepare).
func (p *Prepared) prepareSurface() {
	p.perCall = p.engine.PerCallGates()
	p.gateIndex = make(map[string]int, len(p.gates))
	for _, g := range p.pack.PolicyLayer.ApprovalGates {
		if _, ok := p.gateIndex[g.GateID]; !ok {
			p.gateIndex[g.GateID] = len(p.gateIndex)
		}
	}
	for _, a := range p.pack.ToolingLayer.AdapterRegistry {
		as := &adapterSurface{prov: "adapter:" + a.AdapterID, caps: make([]capSurface, len(a.Capabilities))}
		for i, c := range a.Capabilities {
			id := a.AdapterID + "." + c
			perm, mode, ok := p.exposed(a, id)
			cs := capSurface{name: c, id: id, mode: mode, kind: "read", gate: -1}
			if mode.IsWrite() {
				cs.kind = "write"
			}
			if ok {
				cs.perm = &perm
				if perm.RequiresApprovalGate != "" {
					cs.perCall = perCallCondition(p.perCall, perm.RequiresApprovalGate)
					if gi, ok := p.gateIndex[perm.RequiresApprovalGate]; ok {
						cs.gate = gi
					}
				}
			}
			as.caps[i] = cs
		}
		p.surfaces = append(p.surfaces, as)
		p.capabilities += len(as.caps)
	}
	p.gateTexts = map[string]string{}
	for _, pc := range p.perCall {
		p.gateTexts[pc.GateID] = perCallGateBlock(p.gates[pc.GateID], perCallCondition(p.perCall, pc.GateID))
	}
	p.unboundTexts = map[string]string{}
	for _, id := range p.unbound {
		p.unboundTexts[id] = unboundGateBlock(p.gates[id])
	}
	p.toolBlocks = len(p.surfaces) + len(p.perCall) + len(p.unbound)
}

// exposed returns the permission that governs capability id
// ("adapter_id.capability") of adapter a and the capability's own mode
// (pack.Permission.Mode: its permission's when it declares one, else the
// adapter's); ok is false when no allowed permission exposes it.
func (p *Prepared) exposed(a pack.Adapter, id string) (perm pack.Permission, mode runcontext.ApprovalMode, ok bool) {
	perm, ok = p.perms[id]
	return perm, perm.Mode(a), ok
}

// ModeWithheld is a capability that an allowed permission exposes and a
// run's safety mode withholds, with the approval mode that is above it.
type ModeWithheld struct {
	Capability   string                  `json:"capability"`
	ApprovalMode runcontext.ApprovalMode `json:"approval_mode"`
}

// AboveSafetyMode lists, in the pack's order, the capabilities a compile
// at safety withholds for their approval mode (pack.Permission.Mode) being
// above it: the ledger's tools_withheld entries with that reason. Under a
// safety mode at least as high as their mode they are surfaced unless
// policy blocks them (a guardrail refusal, a deny of write-class work).
// The result is nil when safety withholds nothing the pack allows.
func (p *Prepared) AboveSafetyMode(safety runcontext.ApprovalMode) []ModeWithheld {
	var out []ModeWithheld
	// Each capability's id is looked up from a scratch buffer (a run asks
	// at its end, for every capability of the pack): only a withheld one's
	// is made a string.
	var scratch [64]byte
	for _, a := range p.pack.ToolingLayer.AdapterRegistry {
		for _, c := range a.Capabilities {
			id := append(append(append(scratch[:0], a.AdapterID...), '.'), c...)
			perm, ok := p.perms[string(id)]
			if mode := perm.Mode(a); ok && !mode.AtMost(safety) {
				out = append(out, ModeWithheld{Capability: string(id), ApprovalMode: mode})
			}
		}
	}
	return out
}

// perCallCondition says when the per-call gate applies to a call ("" when
// the gate does not read the tool call): its when, then each rule over
// tool.* that names it.
func perCallCondition(perCall []policy.PerCallGate, gate string) string {
	for _, pc := range perCall {
		if pc.GateID != gate {
			continue
		}
		var conds []string
		if pc.When != nil {
			conds = append(conds, string(pc.When))
		}
		for _, r := range pc.Rules {
			conds = append(conds, "policy rule "+r+" requires it for the call")
		}
		return strings.Join(conds, " or ")
	}
	return ""
}

// evidence computes stage 7's evidence: only trusted, unexpired, fresh,
// well-formed, unique items are admitted; the rest are omissions. It
// appends the admitted items' blocks to blocks and returns the items
// retrieved with the indexes of the admitted ones, in block order.
func (p *Prepared) evidence(ctx context.Context, req *runcontext.InvokeRequest, rc *runcontext.RunContext, ledger *ContextLedger, blocks []ContextBlock) ([]ContextBlock, []EvidenceItem, []int, error) {
	if p.opts.Evidence == nil {
		return blocks, nil, nil, nil
	}
	// The source is handed its own copy of the request's context: what
	// it does to it is not the request's (a runtime's record reads that
	// context for required evidence, and its replay packet pins it).
	items, err := p.opts.Evidence.Evidence(ctx, EvidenceQuery{TenantID: rc.TenantID, Intent: ledger.Intent, SnapshotPinRule: p.pack.IntelligenceRefs.KnowledgeGraph.SnapshotPinRule, Context: jsonv.CloneObject(req.Input.Context)})
	if err != nil {
		return nil, nil, nil, fail(7, ErrEvidence, err, "retrieve evidence")
	}
	if items == nil {
		items = []EvidenceItem{} // none is none, however a source says it
	}
	// texts are the blocks of the items the memo holds (when it holds
	// these): a block's text is the item's alone.
	var texts []string
	if ledger.Inputs.EvidenceHash, texts, err = p.evMemo.digestOf(items); err != nil {
		return nil, nil, nil, fail(7, ErrEvidence, err, "evidence has no canonical form")
	}
	var made []string // the texts made here, for the memo
	if texts == nil {
		made = make([]string, len(items))
	}
	blocks = slices.Grow(blocks, len(items))
	// Each block's provenance, and each omission's source, is its own
	// one-string list, cut from one array: appending to one cannot write
	// into another.
	refs := make([]string, len(items))
	var admitted []int
	seen := make(map[string]bool, len(items))
	for i := range items {
		it := &items[i]
		reason := ""
		dup := seen[it.EvidenceRef]
		seen[it.EvidenceRef] = true
		switch {
		case it.EvidenceRef == "" || strings.TrimSpace(it.Content) == "":
			reason = "malformed: evidence_ref and content are required"
		case dup:
			reason = "duplicate evidence_ref"
		case it.Trust != Trusted:
			reason = "untrusted: only trusted evidence is admitted"
		case it.ExpiresAt != "":
			exp, err := time.Parse(time.RFC3339, it.ExpiresAt)
			switch {
			case err != nil:
				reason = "malformed: expires_at is not RFC 3339"
			case p.opts.At.IsZero():
				reason = "expiry cannot be judged without a clock"
			case !p.opts.At.Before(exp):
				reason = "expired at " + it.ExpiresAt
			}
		}
		if reason == "" && p.opts.KnowledgeSnapshot != "" && strings.HasPrefix(it.EvidenceRef, "kg:") && it.Snapshot != p.opts.KnowledgeSnapshot {
			reason = "stale: snapshot " + it.Snapshot + " is not the pinned " + p.opts.KnowledgeSnapshot
		}
		if reason != "" {
			var src []string
			if it.SourceID != "" {
				refs[i] = it.SourceID
				src = refs[i : i+1 : i+1]
			}
			ledger.Omissions = append(ledger.Omissions, Omission{Kind: "evidence", Ref: it.EvidenceRef, Reason: reason, EstimatedTokens: p.opts.Tokenizer.Count(it.Content), Priority: priorityEvidence, SourceRefs: src})
			continue
		}
		var text string
		switch {
		case texts != nil && texts[i] != "":
			text = texts[i]
		case made != nil:
			text = evidenceBlock(*it)
			made[i] = text
		default:
			text = evidenceBlock(*it) // admitted here, not when the memo's texts were made
		}
		refs[i] = it.EvidenceRef
		blocks = append(blocks, ContextBlock{BlockID: blockID(evIDs, "ev_", len(admitted)), Bucket: runcontext.BucketEvidence, Content: text, Priority: priorityEvidence, ProvenanceRefs: refs[i : i+1 : i+1]})
		admitted = append(admitted, i)
	}
	if made != nil {
		p.evMemo.keepTexts(items, made)
	}
	return blocks, items, admitted, nil
}

// memory computes stage 7's memory: only promoted memories are recalled.
func (p *Prepared) memory(ctx context.Context, rc *runcontext.RunContext, intent string, ledger *ContextLedger, blocks []ContextBlock) ([]ContextBlock, error) {
	if p.opts.Memory == nil {
		return blocks, nil
	}
	items, err := p.opts.Memory.Recall(ctx, MemoryQuery{TenantID: rc.TenantID, UserID: rc.User.UserID, Intent: intent})
	if err != nil {
		return nil, fail(7, ErrEvidence, err, "recall memory")
	}
	if items == nil {
		items = []MemoryItem{} // none is none, however a store says it
	}
	if ledger.Inputs.MemoryHash, err = canon.Digest(items); err != nil {
		return nil, fail(7, ErrEvidence, err, "memory has no canonical form")
	}
	n := 0
	for _, m := range items {
		if m.State != MemoryPromoted || m.MemoryRef == "" || strings.TrimSpace(m.Content) == "" {
			reason := "not promoted (" + m.State + "): candidates and captures are not trusted context"
			if m.State == MemoryPromoted {
				reason = "malformed: memory_ref and content are required"
			}
			ledger.Omissions = append(ledger.Omissions, Omission{Kind: "memory", Ref: m.MemoryRef, Reason: reason, EstimatedTokens: p.opts.Tokenizer.Count(m.Content), Priority: priorityMemory})
			continue
		}
		blocks = append(blocks, ContextBlock{BlockID: blockID(memIDs, "mem_", n), Bucket: runcontext.BucketMemory,
			Content: memoryBlock(m), Priority: priorityMemory, ProvenanceRefs: []string{m.MemoryRef}})
		n++
	}
	return blocks, nil
}

// budget computes stage 8: one allocation per bucket; a bucket over its
// allocation drops whole blocks, last first, and says so in the budget
// report, the warnings and the ledger's omissions. It returns the blocks
// kept, in order, in blocks' own array, and which of blocks it dropped.
func (p *Prepared) budget(cc *CompiledContext, blocks []ContextBlock, alloc map[runcontext.Bucket]int) (kept []ContextBlock, dropped []bool) {
	br := &cc.BudgetReport
	br.TokensAllocated = map[runcontext.Bucket]int{}
	br.TokensUsedByBucket = map[runcontext.Bucket]int{}
	br.BucketTruncations = map[runcontext.Bucket]bool{}
	// The blocks' token counts are the budget's own: on the stack for a
	// compile's usual number of blocks.
	var tokBuf [64]int
	var tokens []int
	if len(blocks) > len(tokBuf) {
		tokens = make([]int, len(blocks))
	} else {
		tokens = tokBuf[:len(blocks)]
	}
	// The tokens each bucket uses, in runcontext.Buckets' order (a block
	// is in one of them: the compile writes no other).
	buckets := runcontext.Buckets()
	var usedBy [8]int
	used := usedBy[:len(buckets)]
	for i, b := range blocks {
		tokens[i] = p.opts.Tokenizer.Count(b.Content)
		if k := slices.Index(buckets, b.Bucket); k >= 0 {
			used[k] += tokens[i]
		}
	}
	drop := make([]bool, len(blocks))
	for k, bucket := range buckets {
		u := &used[k]
		limit, ok := alloc[bucket]
		br.TokensAllocated[bucket] = limit
		if !ok && *u > 0 {
			br.Warnings = append(br.Warnings, fmt.Sprintf("%s bucket has no allocation in run_budget.bucket_tokens", bucket))
		}
		var dropped []string
		for i := len(blocks) - 1; i >= 0 && *u > limit; i-- {
			if blocks[i].Bucket != bucket || drop[i] {
				continue
			}
			drop[i] = true
			*u -= tokens[i]
			dropped = append(dropped, blocks[i].BlockID)
			cc.ContextLedger.Omissions = append(cc.ContextLedger.Omissions, Omission{Kind: "block", Ref: blocks[i].BlockID,
				Reason: fmt.Sprintf("%s bucket over its budget of %d tokens", bucket, limit), EstimatedTokens: tokens[i], Priority: blocks[i].Priority, SourceRefs: blocks[i].ProvenanceRefs})
		}
		if len(dropped) > 0 {
			slices.Reverse(dropped)
			br.BucketTruncations[bucket] = true
			if br.DroppedBlockIDs == nil {
				br.DroppedBlockIDs = map[runcontext.Bucket][]string{}
			}
			br.DroppedBlockIDs[bucket] = dropped
			br.Warnings = append(br.Warnings, fmt.Sprintf("%s bucket exceeded budget; dropped %d block(s): %s", bucket, len(dropped), strings.Join(dropped, ", ")))
		}
		br.TokensUsedByBucket[bucket] = *u
		br.TokensUsedAtCompile += *u
	}
	out := blocks[:0] // each kept block moves to an index at most its own
	for i, b := range blocks {
		if !drop[i] {
			out = append(out, b)
		}
	}
	// Ordered by priority, highest first, then by index (stable).
	slices.SortStableFunc(out, func(a, b ContextBlock) int { return b.Priority - a.Priority })
	return out, drop
}

// checkOverlayVersion fails closed when overlays hold an environment
// overlay for ref's pack id but none for ref's version: a caller naming
// another published version of the pack must not run outside the
// environment's rules. An overlay whose base does not parse names no
// version; ApplyOverlay refuses it where it would apply.
func checkOverlayVersion(ref pack.Ref, overlays []*pack.Overlay) error {
	var others []string
	for _, ov := range overlays {
		if ov == nil {
			continue
		}
		// A base that is not exactly a pinned ref (white space, a range,
		// build metadata, leading zeros) would match no pack and silently
		// not apply: it is refused.
		if b, err := pack.ParseRef(ov.Base); err != nil || b.String() != ov.Base {
			return &Error{Stage: 3, Kind: ErrInput, Message: fmt.Sprintf("environment overlay %s: base is not a pinned pack ref (id@major.minor.patch)", clipID(ov.OverlayID))}
		}
	}
	for _, ov := range overlays {
		if ov == nil {
			continue
		}
		if ov.Base == ref.String() {
			return nil
		}
		// Pack ids differing only in case name the same pack to a reader:
		// an overlay for one is not silently skipped for the other.
		if b, err := pack.ParseRef(ov.Base); err == nil && strings.EqualFold(b.ID, ref.ID) {
			others = append(others, strings.TrimPrefix(b.String(), b.ID+"@"))
		}
	}
	if len(others) == 0 {
		return nil
	}
	slices.Sort(others)
	others = slices.Compact(others)
	v := strings.TrimPrefix(ref.String(), ref.ID+"@")
	return &Error{Stage: 3, Kind: ErrInput, Message: "environment overlay", Err: &OverlayVersionError{PackID: ref.ID, Version: v, OverlayVersions: others}}
}

// clipID is an overlay id fit for an error message: at most 64 bytes, with
// anything but printable ASCII replaced.
func clipID(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}
