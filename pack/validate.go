package pack

import (
	"encoding/json"
	"fmt"
	"github.com/contextos/contextos/internal/sortedkeys"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/contextos/contextos/internal/logic"
	"github.com/contextos/contextos/internal/packrules"
	"github.com/contextos/contextos/runcontext"
)

// Problem codes: one per failure mode, stable across versions.
const (
	CodeDecode   = "decode"
	CodeRequired = "required"
	CodeFormat   = "format"

	CodeDuplicateID                = "duplicate_id"
	CodeGateIDAsRuleID             = "gate_id_as_rule_id"
	CodeBindingWithoutDecisionSpec = "binding_without_decision_spec"
	CodeUnknownApprovalGate        = "unknown_approval_gate"
	CodePermissionWithoutAdapter   = "permission_without_adapter"
	CodeUnknownCapability          = "unknown_capability"
	CodeUnresolvableEvidence       = "unresolvable_evidence"
	CodeUnknownGuardrail           = "unknown_guardrail"
	CodeEmptyOutcomes              = "empty_outcomes"

	CodeUnsupportedLanguage     = "unsupported_language"
	CodeInvalidExpression       = "invalid_expression"
	CodeUnknownVarRoot          = "unknown_var_root"
	CodeMissingRationale        = "missing_rationale"
	CodeRuleWithoutEffect       = "rule_without_effect"
	CodeUnreachableCriticalRule = "unreachable_critical_rule"
	CodeUnsatisfiableGate       = "unsatisfiable_approval_gate"
	CodePriorityTie             = "priority_tie"

	CodePermissionAboveAdapterMode = "permission_above_adapter_mode"
	CodeDestructiveWithoutGate     = "destructive_without_gate"
	CodeMissingIdempotency         = "missing_idempotency"
	CodeDecisionModeTooLow         = "decision_mode_too_low"
	CodeGateNeverActivates         = "gate_never_activates"
	CodeSharedEndpoint             = "shared_endpoint_mode"
	CodeDenyOverridden             = "deny_overridden"

	CodeUnknownArgConstraint = "unknown_arg_constraint"

	CodeTenantMismatch  = "tenant_mismatch"
	CodeRawEndpoint     = "raw_endpoint"
	CodeSnapshotPinRule = "snapshot_pin_rule"

	CodeSecret                  = "secret"
	CodePII                     = "pii"
	CodeUnrestrictedToolSurface = "unrestricted_tool_surface"

	CodeMissingEvalTarget  = "missing_eval_target"
	CodeMissingReleaseGate = "missing_release_gate"
	CodeTargetRange        = "target_range"
)

// dataRoots returns the top-level members of the policy data document that
// a var path may start with (docs/policy.md, "The policy data document").
func dataRoots() []string {
	return []string{"request", "user", "agent", "tenant_id", "session_id", "intent", "safety_mode", "tool"}
}

// registrySchemes returns the endpoint_ref schemes accepted as registry
// references.
func registrySchemes() []string { return []string{"internal", "registry"} }

// Validate runs every validation gate on p and returns a *ValidationError
// listing all problems (gate, code, JSON path, message), or nil. Problems
// come in gate order, then in document order. opts may be nil (only the
// built-in redaction rules are known); an invalid option is an error
// matching ErrRedactionRuleName. The gates in opts.Gates run after the
// built-in ones, when those pass.
func Validate(p *Pack, opts *ValidateOptions) error {
	if err := opts.Check(); err != nil {
		return err
	}
	if p == nil {
		return invalid([]Problem{{Gate: GateSchema, Code: CodeRequired, Message: "pack is nil"}})
	}
	v := newValidator(p)
	v.opts = opts
	v.schema()
	v.referential()
	v.redactionRules() // pack/redaction.go
	v.policy()
	v.risk()
	v.tenancy()
	v.security()
	v.evaluation()
	if len(v.probs) == 0 && opts != nil {
		for i, g := range opts.Gates {
			if g != nil {
				v.probs = append(v.probs, runGate(i, g, p)...)
			}
		}
	}
	if len(v.probs) == 0 {
		return nil
	}
	return invalid(v.probs)
}

// runGate runs host gate i and fails closed: a panic is a problem of
// GateHost (the panic value is not repeated: it may hold anything), and a
// problem naming no known gate is filed under GateHost.
func runGate(i int, g GateFunc, p *Pack) (probs []Problem) {
	defer func() {
		if r := recover(); r != nil {
			probs = []Problem{{Gate: GateHost, Code: CodeGatePanicked, Path: "", Message: fmt.Sprintf("host gate %d panicked; the pack fails it", i)}}
		}
	}()
	probs = g(p)
	for j := range probs {
		if !slices.Contains(Gates(), probs[j].Gate) && probs[j].Gate != GateReplay {
			probs[j].Gate = GateHost
		}
	}
	return probs
}

type validator struct {
	p        *Pack
	opts     *ValidateOptions // nil: built-in redaction rules only
	probs    []Problem
	adapters map[string]*Adapter
	gates    map[string]bool
	gateAt   map[string]int // gate id → index of its first declaration
	specs    map[string]*DecisionSpec
	labels   map[string]bool
	denies   map[string]int // "adapter.capability" or "adapter.*" → index of the first permission denying it
	// nouns maps an evidence-name noun to the lowest adapter id (in byte
	// order) with that noun, so designates looks a name up by its prefixes
	// instead of scanning every adapter.
	nouns map[string]string
	// allows holds the adapter and capability (or "*") of every allowing
	// permission.
	allows map[toolRef]bool
	// whenChecked[i] reports that approval gate i's when passed logic.Check.
	whenChecked []bool
}

func newValidator(p *Pack) *validator {
	v := &validator{p: p, adapters: map[string]*Adapter{}, gates: map[string]bool{}, gateAt: map[string]int{}, specs: map[string]*DecisionSpec{}, labels: map[string]bool{}, denies: map[string]int{}, nouns: map[string]string{}, allows: map[toolRef]bool{}, whenChecked: make([]bool, len(p.PolicyLayer.ApprovalGates))}
	for i := range p.ToolingLayer.AdapterRegistry {
		a := &p.ToolingLayer.AdapterRegistry[i]
		if _, dup := v.adapters[a.AdapterID]; !dup {
			v.adapters[a.AdapterID] = a
		}
		if noun := packrules.AdapterNoun(a.AdapterID); noun != "" {
			if id, ok := v.nouns[noun]; !ok || a.AdapterID < id {
				v.nouns[noun] = a.AdapterID
			}
		}
	}
	for i, g := range p.PolicyLayer.ApprovalGates {
		v.gates[g.GateID] = true
		if _, dup := v.gateAt[g.GateID]; !dup {
			v.gateAt[g.GateID] = i
		}
	}
	for i, q := range p.ToolingLayer.Permissions {
		if _, dup := v.denies[q.CapabilityID()]; !q.Allow && !dup {
			v.denies[q.CapabilityID()] = i
		}
		if q.Allow {
			v.allows[toolRef{q.AdapterID, q.Capability}] = true
		}
	}
	for i := range p.DecisionLayer.DecisionSpecs {
		s := &p.DecisionLayer.DecisionSpecs[i]
		if _, dup := v.specs[s.DecisionKey]; !dup {
			v.specs[s.DecisionKey] = s
		}
	}
	g := p.PolicyLayer.Guardrails
	for _, l := range slices.Concat(g.MustRefuse, g.MustEscalate) {
		v.labels[l] = true
	}
	return v
}

func (v *validator) add(gate, code, path, format string, args ...any) {
	v.probs = append(v.probs, Problem{Gate: gate, Code: Code(code), Path: path, Message: quiet(fmt.Sprintf(format, args...))})
}

func idx(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// ---- schema ----

func (v *validator) schema() {
	p := v.p
	cm, pm := p.ContractMeta, p.PackMeta
	req := func(path, val string) bool {
		if strings.TrimSpace(val) == "" {
			v.add(GateSchema, CodeRequired, path, "is required")
			return false
		}
		return true
	}
	req("contract_meta.contract_name", cm.ContractName)
	if req("contract_meta.contract_version", cm.ContractVersion) {
		if _, err := semverOf(cm.ContractVersion); err != nil {
			v.add(GateSchema, CodeFormat, "contract_meta.contract_version", "must be a semantic version MAJOR.MINOR.PATCH")
		}
	}
	req("contract_meta.issuer", cm.Issuer)
	if req("contract_meta.created_at", cm.CreatedAt) {
		if _, err := time.Parse(time.RFC3339, cm.CreatedAt); err != nil {
			v.add(GateSchema, CodeFormat, "contract_meta.created_at", "must be an RFC 3339 date-time")
		}
	}
	reqs := cm.Compatibility.Requires
	if len(reqs) == 0 {
		v.add(GateSchema, CodeRequired, "contract_meta.compatibility.requires", "must name what the pack requires (at least runtime) so old runtimes fail closed")
	} else if _, ok := reqs["runtime"]; !ok {
		v.add(GateSchema, CodeRequired, "contract_meta.compatibility.requires.runtime", "is required so old runtimes fail closed")
	}
	for _, k := range sortedkeys.Of(reqs) {
		if _, err := semver.NewConstraint(reqs[k]); err != nil {
			v.add(GateSchema, CodeFormat, "contract_meta.compatibility.requires."+k, "is not a semantic version constraint")
		}
	}
	if req("pack_meta.pack_id", pm.PackID) && req("pack_meta.pack_version", pm.PackVersion) {
		if _, err := p.Ref(); err != nil {
			v.add(GateSchema, CodeFormat, "pack_meta", "pack_id@pack_version must be a pinned ref: %s", strings.TrimPrefix(err.Error(), ErrUnpinnedRef.Error()+": "))
		}
	}
	req("pack_meta.tenant.tenant_id", pm.Tenant.TenantID)
	if pm.TTLSeconds <= 0 {
		v.add(GateSchema, CodeFormat, "pack_meta.ttl_seconds", "must be > 0")
	}
	if !slices.Contains(DataClassifications(), pm.DataClassification) {
		v.add(GateSchema, CodeFormat, "pack_meta.data_classification", "must be one of PUBLIC, INTERNAL, CONFIDENTIAL, RESTRICTED")
	}
	ont := p.IntelligenceRefs.Ontology
	req("intelligence_refs.ontology.namespace", ont.Namespace)
	if req("intelligence_refs.ontology.version", ont.Version) {
		if _, err := semverOf(ont.Version); err != nil {
			v.add(GateSchema, CodeFormat, "intelligence_refs.ontology.version", "must be a semantic version MAJOR.MINOR.PATCH")
		}
	}
	for i, k := range p.IntelligenceRefs.EmbeddingKeys {
		if !versionedKey.MatchString(k) {
			v.add(GateSchema, CodeFormat, idx("intelligence_refs.embedding_keys", i), "embedding keys must be versioned (end in _v<N>)")
		}
	}
	mp := p.MemoryLayer.MemoryPolicy
	for _, tier := range sortedkeys.Of(mp.TierTTLs) {
		if _, err := parseTTL(mp.TierTTLs[tier]); err != nil {
			v.add(GateSchema, CodeFormat, "memory_layer.memory_policy.tier_ttls."+tier, "must be a duration such as 30m, 1h, 24h or 365d")
		}
	}
	for i, w := range mp.WriteClassesAllowed {
		if !slices.Contains(WriteClasses(), w) {
			v.add(GateSchema, CodeFormat, idx("memory_layer.memory_policy.write_classes_allowed", i), "must be one of evidence_link, preference, decision_outcome, correction")
		}
	}
	if c := p.MemoryLayer.PromotionThresholds.AutoPromoteConfidence; c < 0 || c > 1 {
		v.add(GateSchema, CodeFormat, "memory_layer.promotion_thresholds.auto_promote_confidence", "must be in [0, 1]")
	}
	for i, a := range p.ToolingLayer.AdapterRegistry {
		if !a.ApprovalMode.Valid() {
			v.add(GateSchema, CodeFormat, idx("tooling_layer.adapter_registry", i)+".approval_mode", "must be one of read_only, local_write, network, delegated, destructive")
		}
	}
	for i, q := range p.ToolingLayer.Permissions {
		v.argConstraints(idx("tooling_layer.permissions", i)+".arg_constraints", q.ArgConstraints)
	}
	if len(p.DecisionLayer.DecisionSpecs) == 0 {
		v.add(GateSchema, CodeRequired, "decision_layer.decision_specs", "a pack declares at least one decision spec: every run binds its outcome to one")
	}
	for i, s := range p.DecisionLayer.DecisionSpecs {
		if !s.ApprovalMode.Valid() {
			v.add(GateSchema, CodeFormat, idx("decision_layer.decision_specs", i)+".approval_mode", "must be one of read_only, local_write, network, delegated, destructive")
		}
		if _, err := semverOf(s.Version); err != nil {
			v.add(GateSchema, CodeFormat, idx("decision_layer.decision_specs", i)+".version", "must be a semantic version MAJOR.MINOR.PATCH")
		}
	}
}

var versionedKey = regexp.MustCompile(`_v[0-9]+$`)

// parseTTL parses a memory tier TTL: a positive integer followed by s, m,
// h or d.
func parseTTL(s string) (time.Duration, error) {
	if len(s) < 2 {
		return 0, fmt.Errorf("invalid ttl %q", clip(s))
	}
	n, err := strconv.ParseUint(s[:len(s)-1], 10, 32)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("invalid ttl %q", clip(s))
	}
	unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[s[len(s)-1]]
	if unit == 0 {
		return 0, fmt.Errorf("invalid ttl %q", clip(s))
	}
	return time.Duration(n) * unit, nil
}

// ---- referential ----

func (v *validator) referential() {
	p := v.p
	unique := func(kind, path string, ids []string) {
		seen := map[string]int{}
		for i, id := range ids {
			if j, dup := seen[id]; dup && id != "" {
				v.add(GateReferential, CodeDuplicateID, idx(path, i), "%s %q is already declared at index %d", kind, id, j)
				continue
			}
			seen[id] = i
		}
	}
	bundles := p.PolicyLayer.PolicyBundles
	unique("bundle_id", "policy_layer.policy_bundles", mapSlice(bundles, func(b PolicyBundle) string { return b.BundleID }))
	ruleSeen := map[string]string{}
	for bi, b := range bundles {
		for ri, r := range b.PolicyDSL.Rules {
			path := rulePath(bi, ri)
			if r.RuleID == "" {
				v.add(GateReferential, CodeRequired, path+".rule_id", "is required")
			} else if prev, dup := ruleSeen[r.RuleID]; dup {
				v.add(GateReferential, CodeDuplicateID, path+".rule_id", "rule_id %q is already declared at %s", r.RuleID, prev)
			} else {
				ruleSeen[r.RuleID] = path
			}
			if v.gates[r.RuleID] {
				v.add(GateReferential, CodeGateIDAsRuleID, path+".rule_id", "%q is an approval gate id; a gate id is never a rule id", r.RuleID)
			}
			if r.DecisionBinding != "" && v.specs[r.DecisionBinding] == nil {
				v.add(GateReferential, CodeBindingWithoutDecisionSpec, path+".decision_binding", "decision_binding %q does not resolve to a decision_layer.decision_specs[].decision_key", r.DecisionBinding)
			}
			for _, br := range []struct {
				name string
				e    *Effect
			}{{"then", r.Then}, {"else", r.Else}} {
				if br.e == nil {
					continue
				}
				bp := path + "." + br.name
				if g := br.e.RequiresApprovalGate; g != "" && !v.gates[g] {
					v.add(GateReferential, CodeUnknownApprovalGate, bp+".requires_approval_gate", "requires_approval_gate %q does not resolve to a policy_layer.approval_gates[].gate_id", g)
				}
				for i, name := range br.e.Requires {
					v.evidenceName(idx(bp+".requires", i), name)
				}
				for i, l := range br.e.Raise {
					if !v.labels[l] {
						v.add(GateReferential, CodeUnknownGuardrail, idx(bp+".raise", i), "guardrail label %q is not declared in policy_layer.guardrails must_refuse or must_escalate", l)
					}
				}
			}
		}
	}
	unique("gate_id", "policy_layer.approval_gates", mapSlice(p.PolicyLayer.ApprovalGates, func(g ApprovalGate) string { return g.GateID }))
	adapters := p.ToolingLayer.AdapterRegistry
	unique("adapter_id", "tooling_layer.adapter_registry", mapSlice(adapters, func(a Adapter) string { return a.AdapterID }))
	for i, a := range adapters {
		unique("capability", idx("tooling_layer.adapter_registry", i)+".capabilities", a.Capabilities)
		if len(a.Capabilities) == 0 {
			v.add(GateReferential, CodeRequired, idx("tooling_layer.adapter_registry", i)+".capabilities", "an adapter declares at least one capability")
		}
	}
	perms := p.ToolingLayer.Permissions
	unique("permission_id", "tooling_layer.permissions", mapSlice(perms, func(q Permission) string { return q.PermissionID }))
	exposedBy := map[string]int{}
	for i, q := range perms {
		if !q.Allow {
			continue
		}
		if j, dup := exposedBy[q.CapabilityID()]; dup {
			v.add(GateReferential, CodeDuplicateID, idx("tooling_layer.permissions", i)+".capability", "capability %s is already allowed by permission %s (index %d); one permission governs a capability", q.CapabilityID(), perms[j].PermissionID, j)
			continue
		}
		exposedBy[q.CapabilityID()] = i
	}
	for i, q := range perms {
		path := idx("tooling_layer.permissions", i)
		a := v.adapters[q.AdapterID]
		switch {
		case a == nil:
			v.add(GateReferential, CodePermissionWithoutAdapter, path+".adapter_id", "adapter %q is not declared in tooling_layer.adapter_registry", q.AdapterID)
		case !slices.Contains(a.Capabilities, q.Capability) && q.Capability != "*":
			v.add(GateReferential, CodeUnknownCapability, path+".capability", "capability %q is not one of adapter %s's capabilities (%s)", q.Capability, q.AdapterID, strings.Join(a.Capabilities, ", "))
		}
		if g := q.RequiresApprovalGate; g != "" && !v.gates[g] {
			v.add(GateReferential, CodeUnknownApprovalGate, path+".requires_approval_gate", "requires_approval_gate %q does not resolve to a policy_layer.approval_gates[].gate_id", g)
		}
	}
	specs := p.DecisionLayer.DecisionSpecs
	unique("decision_key", "decision_layer.decision_specs", mapSlice(specs, func(s DecisionSpec) string { return s.DecisionKey }))
	for i, s := range specs {
		path := idx("decision_layer.decision_specs", i)
		for j, name := range s.RequiredEvidence {
			v.evidenceName(idx(path+".required_evidence", j), name)
		}
		if len(s.AllowedOutcomes) == 0 {
			v.add(GateReferential, CodeEmptyOutcomes, path+".allowed_outcomes", "allowed_outcomes must be a closed, non-empty set")
		}
		unique("outcome", path+".allowed_outcomes", s.AllowedOutcomes)
		for j, o := range slices.Concat(s.RefusalOutcomes, s.EscalationOutcomes) {
			if !slices.Contains(s.AllowedOutcomes, o) {
				v.add(GateReferential, CodeEmptyOutcomes, path, "refusal/escalation outcome %q (index %d) is not in allowed_outcomes", o, j)
			}
		}
	}
	unique("intent", "evaluation_layer.eval_targets", mapSlice(p.EvaluationLayer.EvalTargets, func(t EvalTarget) string { return t.Intent }))
}

func rulePath(bi, ri int) string {
	return idx(idx("policy_layer.policy_bundles", bi)+".policy_dsl.rules", ri)
}

// evidenceName checks a required evidence name (docs/evidence.md): a
// name may only be rejected when it designates an adapter or capability
// that does not exist, or a capability no permission allows.
func (v *validator) evidenceName(path, name string) {
	if strings.TrimSpace(name) == "" {
		v.add(GateReferential, CodeUnresolvableEvidence, path, "evidence name is empty")
		return
	}
	adapterID, capability, ok := v.designates(name)
	if !ok {
		return // request context, policy_eval or an evidence kind: resolved at run time
	}
	a := v.adapters[adapterID]
	switch {
	case a == nil:
		v.add(GateReferential, CodeUnresolvableEvidence, path, "%q designates adapter %s, which is not declared", name, adapterID)
	case !slices.Contains(a.Capabilities, capability):
		v.add(GateReferential, CodeUnresolvableEvidence, path, "%q designates %s.%s, which adapter %s does not declare", name, adapterID, capability, adapterID)
	case !v.allowed(adapterID, capability):
		v.add(GateReferential, CodeUnresolvableEvidence, path, "%q designates %s.%s, which no allowed permission exposes", name, adapterID, capability)
	}
}

// designates resolves an evidence name to the capability it names, if it
// names one: "adapter_id.capability", or "<noun>_<capability>" where noun
// is an adapter id without "adp_" and without a trailing plural s.
func (v *validator) designates(name string) (adapterID, capability string, ok bool) {
	if a, c, dotted := strings.Cut(name, "."); dotted {
		if strings.HasPrefix(a, "adp_") || v.adapters[a] != nil {
			return a, c, true
		}
		return "", "", false
	}
	// The first adapter id in byte order whose noun and "_" begin the
	// name: every "_" in the name ends a candidate noun.
	for i := 0; i < len(name); i++ {
		if name[i] != '_' {
			continue
		}
		if id, found := v.nouns[name[:i]]; found && (!ok || id < adapterID) {
			adapterID, capability, ok = id, name[i+1:], true
		}
	}
	return adapterID, capability, ok
}

// allowed reports whether a permission allows adapterID.capability and no
// permission denies it (deny wins).
func (v *validator) allowed(adapterID, capability string) bool {
	if v.deny(adapterID, capability) >= 0 {
		return false
	}
	return v.allows[toolRef{adapterID, capability}] || v.allows[toolRef{adapterID, "*"}]
}

// capabilityMode returns the approval mode adapterID.capability is
// governed at (Permission.Mode): the declared mode of the first
// permission that allows it by name, else its adapter's. ok is false when
// the adapter is not declared.
func (v *validator) capabilityMode(adapterID, capability string) (mode ApprovalMode, ok bool) {
	a := v.adapters[adapterID]
	if a == nil {
		return "", false
	}
	for _, q := range v.p.ToolingLayer.Permissions {
		if q.Allow && q.AdapterID == adapterID && q.Capability == capability {
			return q.Mode(*a), true
		}
	}
	return a.ApprovalMode, true
}

// deny returns the index of the first permission that explicitly denies
// adapterID.capability (by name, or "*" on the adapter), or -1.
func (v *validator) deny(adapterID, capability string) int {
	i, byName := v.denies[adapterID+"."+capability]
	j, byStar := v.denies[adapterID+".*"]
	switch {
	case byName && byStar:
		return min(i, j)
	case byName:
		return i
	case byStar:
		return j
	}
	return -1
}

// ---- policy ----

func (v *validator) policy() {
	p := v.p
	for bi, b := range p.PolicyLayer.PolicyBundles {
		bp := idx("policy_layer.policy_bundles", bi)
		if b.PolicyDSL.Language != "jsonlogic" {
			v.add(GatePolicy, CodeUnsupportedLanguage, bp+".policy_dsl.language", "policy language %q is not supported (jsonlogic)", clip(b.PolicyDSL.Language))
		}
		if b.Priority < 0 {
			v.add(GatePolicy, CodeFormat, bp+".priority", "must be ≥ 0")
		}
		for ri, r := range b.PolicyDSL.Rules {
			path := rulePath(bi, ri)
			_, ok := v.expression(path+".if", r.If)
			v.appliesTo(path+".applies_to", r.AppliesTo)
			if r.Then == nil && r.Else == nil {
				v.add(GatePolicy, CodeRuleWithoutEffect, path, "rule %s has neither then nor else", r.RuleID)
			}
			if strings.TrimSpace(r.Rationale) == "" {
				v.add(GatePolicy, CodeMissingRationale, path+".rationale", "rule %s must carry a rationale so operators know why it fired", r.RuleID)
			}
			for _, br := range []struct {
				name string
				e    *Effect
			}{{"then", r.Then}, {"else", r.Else}} {
				if br.e != nil && br.e.ApprovalMode != "" && !br.e.ApprovalMode.Valid() {
					v.add(GatePolicy, CodeFormat, path+"."+br.name+".approval_mode", "must be one of read_only, local_write, network, delegated, destructive")
				}
			}
			if ok {
				if f := fold(r.If); f != truthUnknown {
					truthy := f == truthTrue
					dead, branch := r.Then, "then"
					if truthy {
						dead, branch = r.Else, "else"
					}
					if v.critical(dead) {
						v.add(GatePolicy, CodeUnreachableCriticalRule, path+"."+branch, "rule %s's %s branch is critical but can never apply: its condition is always %v", r.RuleID, branch, truthy)
					}
				}
			}
		}
	}
	for gi, g := range p.PolicyLayer.ApprovalGates {
		path := idx("policy_layer.approval_gates", gi)
		if _, ok := v.expression(path+".when", g.When); ok {
			v.whenChecked[gi] = true
		}
		if strings.TrimSpace(g.RequiredApproverRole) == "" {
			v.add(GatePolicy, CodeUnsatisfiableGate, path+".required_approver_role", "gate %s names no approver role, so no approval can satisfy it", g.GateID)
		}
		if g.TTLSeconds <= 0 {
			v.add(GatePolicy, CodeUnsatisfiableGate, path+".ttl_seconds", "gate %s needs a positive ttl_seconds, or every approval is expired", g.GateID)
		}
	}
	v.priorityTies()
}

func (v *validator) expression(path string, raw json.RawMessage) (logic.Info, bool) {
	info, err := logic.Check(raw)
	if err != nil {
		v.add(GatePolicy, CodeInvalidExpression, path, "%v", err)
		return info, false
	}
	for _, vp := range info.Vars {
		if !slices.Contains(dataRoots(), logic.Root(vp)) {
			v.add(GatePolicy, CodeUnknownVarRoot, path, "var %q does not start with a policy data document member (%s)", clip(vp), strings.Join(dataRoots(), ", "))
		}
	}
	return info, true
}

func (v *validator) appliesTo(path string, m map[string]any) {
	for _, k := range sortedkeys.Of(m) {
		if !slices.Contains(dataRoots(), logic.Root(k)) {
			v.add(GatePolicy, CodeUnknownVarRoot, path+"."+k, "applies_to key %q is not a policy data document path", clip(k))
		}
		if !scalarOrList(m[k]) {
			v.add(GatePolicy, CodeFormat, path+"."+k, "applies_to values are a string, number, boolean or a list of them")
		}
	}
}

func scalarOrList(x any) bool {
	switch t := x.(type) {
	case string, float64, bool, json.Number, int:
		return true
	case []any:
		for _, e := range t {
			if !scalarOrList(e) {
				return false
			}
			if _, nested := e.([]any); nested {
				return false
			}
		}
		return len(t) > 0
	case []string:
		return len(t) > 0
	}
	return false
}

// critical reports an effect that refuses, gates, raises a guardrail or
// asks for delegated or destructive approval.
func (v *validator) critical(e *Effect) bool {
	if e == nil {
		return false
	}
	return e.Allow != nil && !*e.Allow || e.RequiresApprovalGate != "" || len(e.Raise) > 0 ||
		e.ApprovalMode.Valid() && e.ApprovalMode.Compare(runcontext.Delegated) >= 0
}

// priorityTies refuses two bundles of equal priority that govern the same
// decision or intent: their order, and so the outcome, would be ambiguous.
func (v *validator) priorityTies() {
	bundles := v.p.PolicyLayer.PolicyBundles
	for i := range bundles {
		for j := i + 1; j < len(bundles); j++ {
			if bundles[i].Priority != bundles[j].Priority {
				continue
			}
			if shared := overlap(governs(bundles[i]), governs(bundles[j])); shared != "" {
				v.add(GatePolicy, CodePriorityTie, idx("policy_layer.policy_bundles", j)+".priority",
					"bundles %s and %s both have priority %d and both govern %s; give them distinct priorities", bundles[i].BundleID, bundles[j].BundleID, bundles[i].Priority, shared)
			}
		}
	}
}

func governs(b PolicyBundle) map[string]bool {
	out := map[string]bool{}
	for _, r := range b.PolicyDSL.Rules {
		if r.DecisionBinding != "" {
			out["decision "+r.DecisionBinding] = true
		}
		for _, in := range appliesValues(r.AppliesTo["intent"]) {
			out["intent "+in] = true
		}
	}
	return out
}

func overlap(a, b map[string]bool) string {
	for _, k := range sortedkeys.Of(a) {
		if b[k] {
			return k
		}
	}
	return ""
}

// appliesValues returns the string values of an applies_to entry.
func appliesValues(x any) []string {
	switch t := x.(type) {
	case string:
		return []string{t}
	case []string:
		return t
	case []any:
		var out []string
		for _, e := range t {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// ---- risk ----

func (v *validator) risk() {
	p := v.p
	for i, q := range p.ToolingLayer.Permissions {
		path := idx("tooling_layer.permissions", i)
		a := v.adapters[q.AdapterID]
		if a == nil || !q.Allow {
			continue
		}
		if q.ApprovalMode != "" && a.ApprovalMode.Valid() && q.ApprovalMode.Compare(a.ApprovalMode) > 0 {
			v.add(GateRisk, CodePermissionAboveAdapterMode, path+".approval_mode", "permission %s asks for %s, above adapter %s's approval_mode %s", q.PermissionID, q.ApprovalMode, a.AdapterID, a.ApprovalMode)
		}
		// The capability is governed at its own mode: the permission's
		// when it declares one (lower than or equal to the adapter's).
		mode := q.Mode(*a)
		if mode == runcontext.Destructive && q.RequiresApprovalGate == "" {
			v.add(GateRisk, CodeDestructiveWithoutGate, path+".requires_approval_gate", "permission %s exposes destructive capability %s without an approval gate", q.PermissionID, q.CapabilityID())
		}
		if mode.IsWrite() && !requiresIdempotency(q) {
			v.add(GateRisk, CodeMissingIdempotency, path+".arg_constraints.idempotency_key", "permission %s exposes write-class capability %s (%s) without arg_constraints.idempotency_key.required", q.PermissionID, q.CapabilityID(), mode)
		}
		if j := v.deny(q.AdapterID, q.Capability); j >= 0 {
			v.add(GateRisk, CodeDenyOverridden, path+".allow", "permission %s allows %s, which permission %s denies; a deny always wins, so remove the allow or the deny", q.PermissionID, q.CapabilityID(), p.ToolingLayer.Permissions[j].PermissionID)
		}
		if gi, ok := v.gateAt[q.RequiresApprovalGate]; ok && mode.IsWrite() {
			g := p.PolicyLayer.ApprovalGates[gi]
			if v.whenChecked[gi] && fold(g.When) == truthFalse {
				v.add(GateRisk, CodeGateNeverActivates, idx("policy_layer.approval_gates", gi)+".when", "gate %s guards write-class capability %s (%s) but its when is always false, so it never activates by itself", g.GateID, q.CapabilityID(), mode)
			}
		}
	}
	v.sharedEndpoints()
	for i, s := range p.DecisionLayer.DecisionSpecs {
		if !s.ApprovalMode.Valid() {
			continue
		}
		path := idx("decision_layer.decision_specs", i) + ".approval_mode"
		for _, t := range v.boundTools(s) {
			if m, ok := v.capabilityMode(t.adapterID, t.capability); ok && m.Compare(s.ApprovalMode) > 0 {
				v.add(GateRisk, CodeDecisionModeTooLow, path, "decision %s has approval_mode %s but bound tool %s.%s can produce %s", s.DecisionKey, s.ApprovalMode, t.adapterID, t.capability, m)
			}
		}
		for bi, b := range p.PolicyLayer.PolicyBundles {
			for ri, r := range b.PolicyDSL.Rules {
				if r.DecisionBinding != s.DecisionKey {
					continue
				}
				for _, e := range []*Effect{r.Then, r.Else} {
					if e != nil && e.ApprovalMode.Valid() && e.ApprovalMode.Compare(s.ApprovalMode) > 0 {
						v.add(GateRisk, CodeDecisionModeTooLow, path, "decision %s has approval_mode %s but rule %s (%s) can require %s", s.DecisionKey, s.ApprovalMode, r.RuleID, rulePath(bi, ri), e.ApprovalMode)
					}
				}
			}
		}
	}
}

func requiresIdempotency(q Permission) bool {
	c, ok := q.ArgConstraints["idempotency_key"]
	if !ok {
		return false
	}
	r, _ := c["required"].(bool)
	return r
}

type toolRef struct{ adapterID, capability string }

// boundTools are the tools a decision can cause: the capabilities its
// required evidence designates, and the permissions gated by a gate that
// a rule bound to the decision requires.
func (v *validator) boundTools(s DecisionSpec) []toolRef {
	seen := map[toolRef]bool{}
	var out []toolRef
	add := func(t toolRef) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	for _, name := range s.RequiredEvidence {
		if a, c, ok := v.designates(name); ok {
			add(toolRef{a, c})
		}
	}
	gates := map[string]bool{}
	for _, b := range v.p.PolicyLayer.PolicyBundles {
		for _, r := range b.PolicyDSL.Rules {
			if r.DecisionBinding != s.DecisionKey {
				continue
			}
			for _, e := range []*Effect{r.Then, r.Else} {
				if e != nil && e.RequiresApprovalGate != "" {
					gates[e.RequiresApprovalGate] = true
				}
				if e != nil {
					for _, name := range e.Requires {
						if a, c, ok := v.designates(name); ok {
							add(toolRef{a, c})
						}
					}
				}
			}
		}
	}
	for _, q := range v.p.ToolingLayer.Permissions {
		if q.Allow && gates[q.RequiresApprovalGate] {
			add(toolRef{q.AdapterID, q.Capability})
		}
	}
	return out
}

// ---- tenancy ----

func (v *validator) tenancy() {
	p := v.p
	tenant := p.PackMeta.Tenant.TenantID
	if hasPrefixFold(p.ContractMeta.Issuer, "tenant_") && tenant != "" && p.ContractMeta.Issuer != tenant {
		v.add(GateTenancy, CodeTenantMismatch, "contract_meta.issuer", "issuer names tenant %q but pack_meta.tenant.tenant_id is %q", p.ContractMeta.Issuer, tenant)
	}
	for i, a := range p.ToolingLayer.AdapterRegistry {
		checkEndpointRef(v, idx("tooling_layer.adapter_registry", i)+".endpoint_ref", a.EndpointRef)
	}
	if r := p.IntelligenceRefs.KnowledgeGraph.SnapshotPinRule; r != "" {
		kind, name, ok := strings.Cut(r, ":")
		if !ok || name == "" || kind != "alias" && kind != "snapshot" {
			v.add(GateTenancy, CodeSnapshotPinRule, "intelligence_refs.knowledge_graph.snapshot_pin_rule", "must be alias:<name> or snapshot:<id>")
		}
	}
}

func checkEndpointRef(v *validator, path, ref string) {
	if ref == "" {
		v.add(GateTenancy, CodeRequired, path, "is required")
		return
	}
	u, err := url.Parse(ref)
	switch {
	case err != nil || u.Scheme == "":
		v.add(GateTenancy, CodeRawEndpoint, path, "must be a registry reference such as internal://orders")
	case u.User != nil:
		v.add(GateTenancy, CodeRawEndpoint, path, "must not carry credentials; credentials are exchanged by the Tool Gateway")
	case !slices.Contains(registrySchemes(), u.Scheme):
		v.add(GateTenancy, CodeRawEndpoint, path, "scheme %q is not a registry reference (%s://…); raw URLs belong in the host's adapter registry", u.Scheme, strings.Join(registrySchemes(), "://…, "))
	case u.RawQuery != "" || u.Fragment != "":
		v.add(GateTenancy, CodeRawEndpoint, path, "a registry reference has no query or fragment")
	}
}

// ---- security ----

func (v *validator) security() {
	for _, f := range scanSecrets(v.p) {
		v.add(GateSecurity, f.Code, f.Path, "%s", f.What)
	}
	for i, q := range v.p.ToolingLayer.Permissions {
		if q.Allow && (q.Capability == "*" || strings.ContainsAny(q.Capability, "*?")) {
			v.add(GateSecurity, CodeUnrestrictedToolSurface, idx("tooling_layer.permissions", i)+".capability", "wildcard capabilities give an unrestricted tool surface; name each capability")
		}
	}
}

// ---- evaluation ----

func (v *validator) evaluation() {
	p := v.p
	el := p.EvaluationLayer
	targets := map[string]bool{}
	for i, t := range el.EvalTargets {
		targets[t.Intent] = true
		path := idx("evaluation_layer.eval_targets", i)
		if t.Intent == "" {
			v.add(GateEvaluation, CodeRequired, path+".intent", "is required")
		}
		for _, s := range []struct {
			name string
			v    *float64
		}{{"policy", t.Policy}, {"utility", t.Utility}, {"safety", t.Safety}} {
			if s.v != nil && (*s.v < 0 || *s.v > 1) {
				v.add(GateEvaluation, CodeTargetRange, path+"."+s.name, "must be in [0, 1]")
			}
		}
		for _, s := range []struct {
			name string
			v    *float64
		}{{"latency_p99_ms", t.LatencyP99MS}, {"economics_cents_per_decision", t.EconomicsCentsPerDecision}} {
			if s.v != nil && *s.v < 0 {
				v.add(GateEvaluation, CodeTargetRange, path+"."+s.name, "must be ≥ 0")
			}
		}
	}
	if len(el.EvalTargets) == 0 {
		v.add(GateEvaluation, CodeMissingEvalTarget, "evaluation_layer.eval_targets", "a pack needs score targets for the intents it serves")
	}
	for _, in := range ruleIntents(p) {
		if !targets[in] {
			v.add(GateEvaluation, CodeMissingEvalTarget, "evaluation_layer.eval_targets", "intent %q is served by policy rules but has no eval target", in)
		}
	}
	metrics := map[string]bool{}
	for i, g := range el.ReleaseGates {
		metrics[g.Metric] = true
		if g.MaxDelta < 0 {
			v.add(GateEvaluation, CodeTargetRange, idx("evaluation_layer.release_gates", i)+".max_delta", "must be ≥ 0")
		}
	}
	for _, m := range []string{"policy", "safety"} {
		if !metrics[m] {
			v.add(GateEvaluation, CodeMissingReleaseGate, "evaluation_layer.release_gates", "release gates must include %s so utility gains cannot buy %s regressions", m, m)
		}
	}
}

// ruleIntents returns the intents named by the rules' applies_to, sorted.
func ruleIntents(p *Pack) []string {
	set := map[string]bool{}
	for _, b := range p.PolicyLayer.PolicyBundles {
		for _, r := range b.PolicyDSL.Rules {
			for _, in := range appliesValues(r.AppliesTo["intent"]) {
				set[in] = true
			}
		}
	}
	return sortedkeys.Of(set)
}

// ServedIntents returns the intents the pack serves: those its rules apply
// to and those it has eval targets for, sorted.
func ServedIntents(p *Pack) []string {
	set := map[string]bool{}
	for _, in := range ruleIntents(p) {
		set[in] = true
	}
	for _, t := range p.EvaluationLayer.EvalTargets {
		if t.Intent != "" {
			set[t.Intent] = true
		}
	}
	return sortedkeys.Of(set)
}

func mapSlice[T any](s []T, f func(T) string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = f(x)
	}
	return out
}
