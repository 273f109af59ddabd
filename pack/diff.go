package pack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/contextos/contextos/internal/sortedkeys"
	"reflect"
	"slices"
	"strings"

	"github.com/contextos/contextos/runcontext"
)

// Class is a version class (seed 003, "Versioning").
type Class string

// Version classes, in increasing order of impact.
const (
	ClassPatch  Class = "patch"  // metadata only
	ClassMinor  Class = "minor"  // constrained behaviour
	ClassMajor  Class = "major"  // expanded or changed behaviour
	ClassReject Class = "reject" // unsafe or ambiguous
)

func (c Class) rank() int {
	return slices.Index([]Class{ClassPatch, ClassMinor, ClassMajor, ClassReject}, c)
}

// Change is one classified difference.
type Change struct {
	Class  Class  `json:"class"`
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// DiffResult is the classification of new against old.
type DiffResult struct {
	Class   Class    `json:"class"`
	Changes []Change `json:"changes"`
	// VersionOK reports whether new's pack_version is greater than old's by
	// at least the class (major → MAJOR bump, minor → MINOR or MAJOR,
	// patch → any increase). A reject is never OK.
	VersionOK bool   `json:"version_ok"`
	Version   string `json:"version_message,omitempty"`
}

// Diff classifies the change from old to new: the class is the highest of
// its changes. A new version that fails validation, or that changes the
// pack id, is a reject. new is validated with opts, which may be nil.
func Diff(old, new *Pack, opts *ValidateOptions) DiffResult {
	d := differ{}
	if old.PackMeta.PackID != new.PackMeta.PackID {
		d.add(ClassReject, "pack_meta.pack_id", "pack id changed from %s to %s; a new pack is not a new version", old.PackMeta.PackID, new.PackMeta.PackID)
	}
	if err := Validate(new, opts); err != nil {
		if ve, ok := err.(*ValidationError); ok {
			for _, p := range ve.Problems {
				d.add(ClassReject, p.Path, "%s: %s", p.Code, p.Message)
			}
		} else {
			d.add(ClassReject, "", "%v", err) // invalid options: nothing was validated
		}
	}
	d.meta(old, new)
	d.intelligence(old, new)
	d.policy(old, new)
	d.tooling(old, new)
	d.decisions(old, new)
	d.memory(old, new)
	d.evaluation(old, new)
	d.text("business_context", old.BusinessContext, new.BusinessContext, ClassMinor, "business context changed (it shapes the prompt)")
	d.text("tone_and_comms", old.ToneAndComms, new.ToneAndComms, ClassMinor, "communication constraints changed")
	for _, f := range []struct {
		path string
		a, b []string
	}{{"business_context.non_negotiables", old.BusinessContext.NonNegotiables, new.BusinessContext.NonNegotiables}, {"tone_and_comms.dont", old.ToneAndComms.Dont, new.ToneAndComms.Dont}} {
		if removed := minus(f.a, f.b); len(removed) > 0 {
			d.add(ClassMajor, f.path, "removed %d constraint(s) the prompt carried", len(removed))
		}
	}
	res := DiffResult{Class: ClassPatch, Changes: d.changes}
	for _, c := range d.changes {
		if c.Class.rank() > res.Class.rank() {
			res.Class = c.Class
		}
	}
	res.VersionOK, res.Version = versionBump(old.PackMeta.PackVersion, new.PackMeta.PackVersion, res.Class)
	return res
}

func versionBump(oldV, newV string, class Class) (bool, string) {
	if class == ClassReject {
		return false, "a rejected change cannot be released under any version"
	}
	o, err1 := semverOf(oldV)
	n, err2 := semverOf(newV)
	if err1 != nil || err2 != nil {
		return false, "pack versions must be MAJOR.MINOR.PATCH"
	}
	if !n.GreaterThan(o) {
		return false, fmt.Sprintf("new version %s must be greater than %s (versions are immutable)", newV, oldV)
	}
	switch class {
	case ClassMajor:
		if n.Major() <= o.Major() {
			return false, fmt.Sprintf("a major change needs a MAJOR bump: %s → at least %d.0.0", oldV, o.Major()+1)
		}
	case ClassMinor:
		if n.Major() == o.Major() && n.Minor() <= o.Minor() {
			return false, fmt.Sprintf("a minor change needs at least a MINOR bump: %s → at least %d.%d.0", oldV, o.Major(), o.Minor()+1)
		}
	}
	return true, ""
}

type differ struct{ changes []Change }

func (d *differ) add(c Class, path, format string, args ...any) {
	d.changes = append(d.changes, Change{Class: c, Path: path, Reason: fmt.Sprintf(format, args...)})
}

func same(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// version classifies a change of a referenced version: a new major
// version (or one that does not parse) is major, anything else minor.
func (d *differ) version(path, old, new, what string) {
	if old == new {
		return
	}
	ov, e1 := semverOf(old)
	nv, e2 := semverOf(new)
	if e1 != nil || e2 != nil || ov.Major() != nv.Major() {
		d.add(ClassMajor, path, "%s major version changed (changed semantics)", what)
	} else {
		d.add(ClassMinor, path, "%s version changed within its major version", what)
	}
}

func (d *differ) text(path string, a, b any, c Class, reason string) {
	if !same(a, b) {
		d.add(c, path, "%s", reason)
	}
}

func (d *differ) meta(old, new *Pack) {
	om, nm := old.ContractMeta, new.ContractMeta
	if !reflect.DeepEqual(om.Compatibility.Requires, nm.Compatibility.Requires) {
		d.add(ClassMajor, "contract_meta.compatibility.requires", "compatibility requirements changed")
	}
	if om.ContractName != nm.ContractName {
		d.add(ClassMajor, "contract_meta.contract_name", "contract name changed; consumers pin by it")
	}
	d.version("contract_meta.contract_version", om.ContractVersion, nm.ContractVersion, "contract schema")
	for _, f := range []struct {
		path string
		a, b any
	}{{"contract_meta.description", om.Description, nm.Description}, {"contract_meta.created_at", om.CreatedAt, nm.CreatedAt},
		{"contract_meta.issuer", om.Issuer, nm.Issuer}, {"pack_meta.description", old.PackMeta.Description, new.PackMeta.Description},
		{"pack_meta.metadata", old.PackMeta.Metadata, new.PackMeta.Metadata}, {"pack_meta.tenant.name", old.PackMeta.Tenant.Name, new.PackMeta.Tenant.Name}} {
		d.text(f.path, f.a, f.b, ClassPatch, "metadata changed")
	}
	switch ot, nt := old.PackMeta.TTLSeconds, new.PackMeta.TTLSeconds; {
	case nt > ot:
		d.add(ClassMajor, "pack_meta.ttl_seconds", "resolved packs are cached longer (a revocation takes longer to apply)")
	case nt < ot:
		d.add(ClassMinor, "pack_meta.ttl_seconds", "resolved packs are cached for less time")
	}
	op, np := old.PackMeta, new.PackMeta
	if op.Tenant.TenantID != np.Tenant.TenantID || op.Tenant.Shared != np.Tenant.Shared {
		d.add(ClassMajor, "pack_meta.tenant", "tenancy changed")
	}
	d.text("pack_meta.environment_defaults", op.EnvironmentDefaults, np.EnvironmentDefaults, ClassMinor, "environment defaults changed")
	if op.DataClassification != np.DataClassification {
		if classRank(np.DataClassification) > classRank(op.DataClassification) {
			d.add(ClassMinor, "pack_meta.data_classification", "data classification raised to %s", np.DataClassification)
		} else {
			d.add(ClassMajor, "pack_meta.data_classification", "data classification lowered to %s", np.DataClassification)
		}
	}
}

func classRank(c DataClassification) int { return slices.Index(DataClassifications(), c) }

func (d *differ) intelligence(old, new *Pack) {
	o, n := old.IntelligenceRefs.Ontology, new.IntelligenceRefs.Ontology
	if o.Namespace != n.Namespace {
		d.add(ClassMajor, "intelligence_refs.ontology.namespace", "ontology namespace changed (changed semantics)")
	}
	d.version("intelligence_refs.ontology.version", o.Version, n.Version, "ontology")
	for _, f := range []struct {
		path string
		a, b []string
	}{{"intelligence_refs.ontology.entity_types", o.EntityTypes, n.EntityTypes}, {"intelligence_refs.ontology.relationship_types", o.RelationshipTypes, n.RelationshipTypes},
		{"intelligence_refs.identity_layer.ceid_namespaces", old.IntelligenceRefs.IdentityLayer.CEIDNamespaces, new.IntelligenceRefs.IdentityLayer.CEIDNamespaces},
		{"intelligence_refs.embedding_keys", old.IntelligenceRefs.EmbeddingKeys, new.IntelligenceRefs.EmbeddingKeys}} {
		if removed := minus(f.a, f.b); len(removed) > 0 {
			d.add(ClassMajor, f.path, "removed %s (changed semantics)", strings.Join(removed, ", "))
		}
		if added := minus(f.b, f.a); len(added) > 0 {
			d.add(ClassMinor, f.path, "added %s", strings.Join(added, ", "))
		}
	}
	d.text("intelligence_refs.knowledge_graph", old.IntelligenceRefs.KnowledgeGraph, new.IntelligenceRefs.KnowledgeGraph, ClassMajor, "graph snapshot pin rule changed")
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func (d *differ) policy(old, new *Pack) {
	oldRules, newRules := rulesByID(old), rulesByID(new)
	oldPrio, newPrio := rulePriorities(old), rulePriorities(new)
	for _, id := range sortedkeys.Of(oldRules) {
		o := oldRules[id]
		n, ok := newRules[id]
		path := "policy_layer.rules." + id
		if !ok {
			d.add(ClassMajor, path, "rule %s removed", id)
			continue
		}
		if !same(o.AppliesTo, n.AppliesTo) || o.DecisionBinding != n.DecisionBinding || !same(o.Then, n.Then) || !same(o.Else, n.Else) {
			d.add(ClassMajor, path, "rule %s's scope or outcome changed", id)
		} else if !sameJSON(o.If, n.If) {
			d.ruleCondition(path+".if", id, o.If, n.If, n.Then, n.Else, new)
		}
		if oldPrio[id] != newPrio[id] {
			d.add(ClassMajor, path, "rule %s moved to a bundle of another priority (evaluation order)", id)
		}
		if o.Rationale != n.Rationale {
			d.add(ClassPatch, path+".rationale", "rule %s's rationale changed", id)
		}
	}
	boundDecisions := map[string]bool{}
	for _, r := range oldRules {
		boundDecisions[r.DecisionBinding] = true
	}
	for _, id := range sortedkeys.Of(newRules) {
		if _, ok := oldRules[id]; ok {
			continue
		}
		n := newRules[id]
		switch {
		case lowersMode(new, n.Then) || lowersMode(new, n.Else):
			d.add(ClassMajor, "policy_layer.rules."+id, "rule %s added and can lower a gated capability's approval mode", id)
		case n.DecisionBinding != "" && !boundDecisions[n.DecisionBinding]:
			d.add(ClassMajor, "policy_layer.rules."+id, "rule %s added and binds runs to decision %s, which no existing rule did", id, n.DecisionBinding)
		case restrictive(n.Then) && (n.Else == nil || restrictive(n.Else)):
			d.add(ClassMinor, "policy_layer.rules."+id, "rule %s added (it only constrains)", id)
		default:
			d.add(ClassMajor, "policy_layer.rules."+id, "rule %s added and can allow", id)
		}
	}
	ob, nb := bundlePriorities(old), bundlePriorities(new)
	for _, id := range sortedkeys.Of(ob) {
		if p, ok := nb[id]; ok && p != ob[id] {
			d.add(ClassMajor, "policy_layer.policy_bundles."+id+".priority", "bundle %s's priority changed (evaluation order)", id)
		}
	}
	og, ng := old.PolicyLayer.Guardrails, new.PolicyLayer.Guardrails
	for _, f := range []struct {
		path string
		a, b []string
	}{{"policy_layer.guardrails.must_refuse", og.MustRefuse, ng.MustRefuse}, {"policy_layer.guardrails.must_escalate", og.MustEscalate, ng.MustEscalate}, {"policy_layer.guardrails.redaction_rules", og.RedactionRules, ng.RedactionRules}} {
		if removed := minus(f.a, f.b); len(removed) > 0 {
			d.add(ClassMajor, f.path, "removed %s (loosens controls)", strings.Join(removed, ", "))
		}
		if added := minus(f.b, f.a); len(added) > 0 {
			d.add(ClassMinor, f.path, "added %s", strings.Join(added, ", "))
		}
	}
	oldGates, newGates := gatesByID(old), gatesByID(new)
	for _, id := range sortedkeys.Of(oldGates) {
		o := oldGates[id]
		n, ok := newGates[id]
		path := "policy_layer.approval_gates." + id
		switch {
		case !ok:
			d.add(ClassMajor, path, "approval gate %s removed", id)
		case o.RequiredApproverRole != n.RequiredApproverRole:
			d.add(ClassMajor, path+".required_approver_role", "approval gate %s's approver role changed", id)
		case n.TTLSeconds > o.TTLSeconds:
			d.add(ClassMajor, path+".ttl_seconds", "approval gate %s's approvals live longer", id)
		case n.TTLSeconds < o.TTLSeconds:
			d.add(ClassMinor, path+".ttl_seconds", "approval gate %s's approvals expire sooner", id)
		}
		if ok && o.AllowSelfApproval != n.AllowSelfApproval {
			if n.AllowSelfApproval {
				d.add(ClassMajor, path+".allow_self_approval", "approval gate %s lets the requesting user approve (loosens controls)", id)
			} else {
				d.add(ClassMinor, path+".allow_self_approval", "approval gate %s needs an approver other than the requesting user", id)
			}
		}
		if ok && !sameJSON(o.When, n.When) {
			switch compareGuards(o.When, n.When) {
			case guardEquivalent:
				d.add(ClassMinor, path+".when", "approval gate %s's condition rewritten (provably equivalent)", id)
			case guardWider:
				d.add(ClassMinor, path+".when", "approval gate %s activates in every case it did, and more", id)
			case guardNarrower:
				d.add(ClassMajor, path+".when", "approval gate %s activates in fewer cases (loosens approval)", id)
			default:
				d.add(ClassMajor, path+".when", "approval gate %s's condition changed and cannot be shown to activate in every case it did", id)
			}
		}
	}
	for _, id := range sortedkeys.Of(newGates) {
		if _, ok := oldGates[id]; !ok {
			d.add(ClassMinor, "policy_layer.approval_gates."+id, "approval gate %s added", id)
		}
	}
	if added := minus(ServedIntents(new), ServedIntents(old)); len(added) > 0 {
		d.add(ClassMajor, "policy_layer", "new served intent %s (expanded behaviour)", strings.Join(added, ", "))
	}
}

// ruleCondition classifies a change of a rule's condition when its
// branches did not change: the change only constrains when the stricter
// branch applies in every case it did (a wider condition for a stricter
// then, a narrower one for a stricter else), or the branches are equally
// strict.
func (d *differ) ruleCondition(path, id string, old, new json.RawMessage, then, els *Effect, p *Pack) {
	thenStricter, elseStricter := covers(p, then, els), covers(p, els, then)
	change := compareGuards(old, new)
	switch {
	case change == guardEquivalent:
		d.add(ClassMinor, path, "rule %s's condition rewritten (provably equivalent)", id)
	case thenStricter && elseStricter:
		d.add(ClassMinor, path, "rule %s's condition changed; both branches constrain alike", id)
	case thenStricter && change == guardWider:
		d.add(ClassMinor, path, "rule %s's stricter branch (then) applies in every case it did, and more", id)
	case elseStricter && change == guardNarrower:
		d.add(ClassMinor, path, "rule %s's stricter branch (else) applies in every case it did, and more", id)
	case change == guardUnknown:
		d.add(ClassMajor, path, "rule %s's condition changed and cannot be shown to keep its stricter branch in every case", id)
	default:
		d.add(ClassMajor, path, "rule %s's condition changed so its stricter branch applies in fewer cases (loosens controls)", id)
	}
}

// covers reports that effect a constrains at least as much as b: it denies
// when b does, keeps b's gate, evidence and guardrails, and lowers no
// gated capability's approval mode below what b does. nil constrains
// nothing.
func covers(p *Pack, a, b *Effect) bool {
	if a == nil {
		return b == nil
	}
	if lowersMode(p, a) && (b == nil || !b.ApprovalMode.Valid() || a.ApprovalMode.Compare(b.ApprovalMode) < 0) {
		return false
	}
	if b == nil {
		return true
	}
	denies := func(e *Effect) bool { return e.Allow != nil && !*e.Allow }
	return (!denies(b) || denies(a)) &&
		(b.RequiresApprovalGate == "" || a.RequiresApprovalGate == b.RequiresApprovalGate) &&
		len(minus(b.Requires, a.Requires)) == 0 && len(minus(b.Raise, a.Raise)) == 0
}

// lowersMode reports an effect whose approval mode would lower the
// surfaced mode of a capability its gate governs (the compiler surfaces a
// gated capability at the lowest mode a taken branch asks for).
func lowersMode(p *Pack, e *Effect) bool {
	if e == nil || e.ApprovalMode == "" || e.RequiresApprovalGate == "" {
		return false
	}
	adapters := adaptersByID(p)
	for _, q := range p.ToolingLayer.Permissions {
		if q.RequiresApprovalGate == e.RequiresApprovalGate && (!e.ApprovalMode.Valid() || e.ApprovalMode.Compare(q.Mode(adapters[q.AdapterID])) < 0) {
			return true
		}
	}
	return false
}

func rulePriorities(p *Pack) map[string]int {
	out := map[string]int{}
	for _, b := range p.PolicyLayer.PolicyBundles {
		for _, r := range b.PolicyDSL.Rules {
			out[r.RuleID] = b.Priority
		}
	}
	return out
}

func rulesByID(p *Pack) map[string]Rule {
	out := map[string]Rule{}
	for _, b := range p.PolicyLayer.PolicyBundles {
		for _, r := range b.PolicyDSL.Rules {
			out[r.RuleID] = r
		}
	}
	return out
}

func bundlePriorities(p *Pack) map[string]int {
	out := map[string]int{}
	for _, b := range p.PolicyLayer.PolicyBundles {
		out[b.BundleID] = b.Priority
	}
	return out
}

func gatesByID(p *Pack) map[string]ApprovalGate {
	out := map[string]ApprovalGate{}
	for _, g := range p.PolicyLayer.ApprovalGates {
		out[g.GateID] = g
	}
	return out
}

// restrictive reports an effect that only constrains: it denies, gates,
// requires evidence, raises a guardrail or asks for an approval mode, and
// never allows without one of those.
func restrictive(e *Effect) bool {
	if e == nil {
		return true
	}
	constrains := e.Allow != nil && !*e.Allow || e.RequiresApprovalGate != "" || len(e.Requires) > 0 || len(e.Raise) > 0 || e.ApprovalMode != ""
	return constrains
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

func (d *differ) tooling(old, new *Pack) {
	oa, na := adaptersByID(old), adaptersByID(new)
	for _, id := range sortedkeys.Of(oa) {
		o := oa[id]
		n, ok := na[id]
		path := "tooling_layer.adapter_registry." + id
		if !ok {
			d.add(ClassMajor, path, "adapter %s removed (removed capability)", id)
			continue
		}
		if removed := minus(o.Capabilities, n.Capabilities); len(removed) > 0 {
			d.add(ClassMajor, path+".capabilities", "removed capability %s", strings.Join(removed, ", "))
		}
		if added := minus(n.Capabilities, o.Capabilities); len(added) > 0 {
			d.add(ClassMinor, path+".capabilities", "declared capability %s (exposed only through permissions)", strings.Join(added, ", "))
		}
		switch c := n.ApprovalMode.Compare(o.ApprovalMode); {
		case c < 0:
			d.add(ClassMajor, path+".approval_mode", "adapter %s's approval mode lowered to %s (surfaces under more safety modes)", id, n.ApprovalMode)
		case c > 0:
			d.add(ClassMinor, path+".approval_mode", "adapter %s's approval mode raised to %s", id, n.ApprovalMode)
		}
		if o.EndpointRef != n.EndpointRef || o.Type != n.Type {
			d.add(ClassMajor, path, "adapter %s's endpoint or type changed", id)
		}
		if o.Description != n.Description {
			d.add(ClassPatch, path+".description", "description changed")
		}
	}
	for _, id := range sortedkeys.Of(na) {
		if _, ok := oa[id]; !ok {
			d.add(ClassMinor, "tooling_layer.adapter_registry."+id, "adapter %s declared (exposed only through permissions)", id)
		}
	}
	op, np := permsByID(old), permsByID(new)
	for _, id := range sortedkeys.Of(op) {
		o := op[id]
		n, ok := np[id]
		path := "tooling_layer.permissions." + id
		if !ok || o.Allow && !n.Allow {
			d.add(ClassMajor, path, "permission %s removed or denied (removed capability %s)", id, o.CapabilityID())
			continue
		}
		if o.CapabilityID() != n.CapabilityID() {
			d.add(ClassMajor, path, "permission %s now exposes %s instead of %s", id, n.CapabilityID(), o.CapabilityID())
			continue
		}
		if !o.Allow && n.Allow {
			d.add(ClassMajor, path+".allow", "permission %s now allowed (new capability)", id)
		}
		if o.RequiresApprovalGate != n.RequiresApprovalGate {
			if n.RequiresApprovalGate == "" {
				d.add(ClassMajor, path+".requires_approval_gate", "permission %s no longer needs approval", id)
			} else if o.RequiresApprovalGate == "" {
				d.add(ClassMinor, path+".requires_approval_gate", "permission %s now needs approval", id)
			} else {
				d.add(ClassMajor, path+".requires_approval_gate", "permission %s's approval gate changed", id)
			}
		}
		if !same(o.ArgConstraints, n.ArgConstraints) {
			if loosened(o.ArgConstraints, n.ArgConstraints) == "" {
				d.add(ClassMinor, path+".arg_constraints", "permission %s's argument constraints tightened", id)
			} else {
				d.add(ClassMajor, path+".arg_constraints", "permission %s's argument constraints loosened", id)
			}
		}
		if o.ApprovalMode != n.ApprovalMode {
			// Compared as the capability's mode (Permission.Mode) under
			// the new adapter: an adapter's own change is its entry's.
			a := na[n.AdapterID]
			switch c := n.Mode(a).Compare(o.Mode(a)); {
			case c < 0:
				d.add(ClassMajor, path+".approval_mode", "permission %s's approval mode lowered to %s (surfaces under more safety modes)", id, n.Mode(a))
			case c > 0:
				d.add(ClassMinor, path+".approval_mode", "permission %s's approval mode raised to %s", id, n.Mode(a))
			default:
				d.add(ClassPatch, path+".approval_mode", "permission %s's approval mode restated (still %s)", id, n.Mode(a))
			}
		}
	}
	for _, id := range sortedkeys.Of(np) {
		if _, ok := op[id]; ok {
			continue
		}
		n := np[id]
		if !n.Allow {
			d.add(ClassMinor, "tooling_layer.permissions."+id, "new deny of %s", n.CapabilityID())
			continue
		}
		// Classed by the adapter's mode: a new capability an adapter that
		// can write exposes is major even when its permission declares it
		// read-only.
		if a := na[n.AdapterID]; a.AdapterID == "" || a.ApprovalMode != runcontext.ReadOnly {
			if m := n.Mode(a); m != a.ApprovalMode {
				d.add(ClassMajor, "tooling_layer.permissions."+id, "new capability %s (declared %s on an adapter that can produce %s)", n.CapabilityID(), m, a.ApprovalMode)
			} else {
				d.add(ClassMajor, "tooling_layer.permissions."+id, "new write capability %s (%s)", n.CapabilityID(), m)
			}
		} else {
			d.add(ClassMinor, "tooling_layer.permissions."+id, "new read-only capability %s (evidence source)", n.CapabilityID())
		}
	}
}

func adaptersByID(p *Pack) map[string]Adapter {
	out := map[string]Adapter{}
	for _, a := range p.ToolingLayer.AdapterRegistry {
		out[a.AdapterID] = a
	}
	return out
}

func permsByID(p *Pack) map[string]Permission {
	out := map[string]Permission{}
	for _, q := range p.ToolingLayer.Permissions {
		out[q.PermissionID] = q
	}
	return out
}

func (d *differ) decisions(old, new *Pack) {
	os, ns := map[string]DecisionSpec{}, map[string]DecisionSpec{}
	for _, s := range old.DecisionLayer.DecisionSpecs {
		os[s.DecisionKey] = s
	}
	for _, s := range new.DecisionLayer.DecisionSpecs {
		ns[s.DecisionKey] = s
	}
	for _, k := range sortedkeys.Of(os) {
		o := os[k]
		n, ok := ns[k]
		path := "decision_layer.decision_specs." + k
		if !ok {
			d.add(ClassMajor, path, "decision %s removed", k)
			continue
		}
		if !sameSet(o.AllowedOutcomes, n.AllowedOutcomes) || !sameSet(o.RefusalOutcomes, n.RefusalOutcomes) || !sameSet(o.EscalationOutcomes, n.EscalationOutcomes) {
			d.add(ClassMajor, path+".allowed_outcomes", "decision %s's outcome set changed", k)
		}
		if !sameSet(o.RequiredEvidence, n.RequiredEvidence) {
			d.add(ClassMajor, path+".required_evidence", "decision %s's required evidence changed", k)
		}
		if o.ApprovalMode != n.ApprovalMode {
			if n.ApprovalMode.Compare(o.ApprovalMode) > 0 {
				d.add(ClassMinor, path+".approval_mode", "decision %s's approval mode raised", k)
			} else {
				d.add(ClassMajor, path+".approval_mode", "decision %s's approval mode lowered", k)
			}
		}
		if o.Version != n.Version || o.DecisionRight != n.DecisionRight || o.InputsSchemaRef != n.InputsSchemaRef || o.OutputsSchemaRef != n.OutputsSchemaRef {
			d.add(ClassMajor, path, "decision %s's contract changed", k)
		}
		if o.OwnerRole != n.OwnerRole {
			d.add(ClassPatch, path+".owner_role", "owner changed")
		}
	}
	for _, k := range sortedkeys.Of(ns) {
		if _, ok := os[k]; !ok {
			d.add(ClassMajor, "decision_layer.decision_specs."+k, "decision %s added (expanded behaviour)", k)
		}
	}
}

func (d *differ) memory(old, new *Pack) {
	om, nm := old.MemoryLayer.MemoryPolicy, new.MemoryLayer.MemoryPolicy
	if added := minus(toStrings(nm.WriteClassesAllowed), toStrings(om.WriteClassesAllowed)); len(added) > 0 {
		d.add(ClassMajor, "memory_layer.memory_policy.write_classes_allowed", "write classes allowed: added %s", strings.Join(added, ", "))
	}
	if removed := minus(toStrings(om.WriteClassesAllowed), toStrings(nm.WriteClassesAllowed)); len(removed) > 0 {
		d.add(ClassMinor, "memory_layer.memory_policy.write_classes_allowed", "write classes no longer allowed: %s", strings.Join(removed, ", "))
	}
	if !om.ConsentGating.PIIWriteBackAllowed && nm.ConsentGating.PIIWriteBackAllowed {
		d.add(ClassMajor, "memory_layer.memory_policy.consent_gating.pii_write_back_allowed", "PII write-back now allowed")
	} else if om.ConsentGating.PIIWriteBackAllowed && !nm.ConsentGating.PIIWriteBackAllowed {
		d.add(ClassMinor, "memory_layer.memory_policy.consent_gating.pii_write_back_allowed", "PII write-back no longer allowed")
	}
	d.text("memory_layer.memory_policy.tier_ttls", om.TierTTLs, nm.TierTTLs, ClassMajor, "memory tier TTLs changed")
	op, np := old.MemoryLayer.PromotionThresholds.AutoPromoteConfidence, new.MemoryLayer.PromotionThresholds.AutoPromoteConfidence
	switch {
	case np < op:
		d.add(ClassMajor, "memory_layer.promotion_thresholds.auto_promote_confidence", "memories promote at lower confidence")
	case np > op:
		d.add(ClassMinor, "memory_layer.promotion_thresholds.auto_promote_confidence", "memories promote at higher confidence")
	}
}

func toStrings[T ~string](v []T) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = string(x)
	}
	return out
}

func (d *differ) evaluation(old, new *Pack) {
	ot, nt := map[string]EvalTarget{}, map[string]EvalTarget{}
	for _, t := range old.EvaluationLayer.EvalTargets {
		ot[t.Intent] = t
	}
	for _, t := range new.EvaluationLayer.EvalTargets {
		nt[t.Intent] = t
	}
	for _, in := range sortedkeys.Of(ot) {
		n, ok := nt[in]
		path := "evaluation_layer.eval_targets." + in
		if !ok {
			d.add(ClassMajor, path, "eval target for %s removed", in)
			continue
		}
		if same(ot[in], n) {
			continue
		}
		if _, msg := tighten(ot[in], n); msg == "" && targetsKept(ot[in], n) {
			d.add(ClassMinor, path, "eval target for %s tightened", in)
		} else {
			d.add(ClassMajor, path, "eval target for %s loosened or dropped a metric", in)
		}
	}
	for _, in := range sortedkeys.Of(nt) {
		if _, ok := ot[in]; !ok {
			d.add(ClassMinor, "evaluation_layer.eval_targets."+in, "eval target for %s added", in)
		}
	}
	og, ng := map[string]float64{}, map[string]float64{}
	for _, g := range old.EvaluationLayer.ReleaseGates {
		og[g.Metric] = g.MaxDelta
	}
	for _, g := range new.EvaluationLayer.ReleaseGates {
		ng[g.Metric] = g.MaxDelta
	}
	for _, m := range sortedkeys.Of(og) {
		n, ok := ng[m]
		switch {
		case !ok:
			d.add(ClassMajor, "evaluation_layer.release_gates."+m, "release gate on %s removed", m)
		case n > og[m]:
			d.add(ClassMajor, "evaluation_layer.release_gates."+m, "release gate on %s loosened", m)
		case n < og[m]:
			d.add(ClassMinor, "evaluation_layer.release_gates."+m, "release gate on %s tightened", m)
		}
	}
	for _, m := range sortedkeys.Of(ng) {
		if _, ok := og[m]; !ok {
			d.add(ClassMinor, "evaluation_layer.release_gates."+m, "release gate on %s added", m)
		}
	}
}

// targetsKept reports that n keeps every metric o sets.
func targetsKept(o, n EvalTarget) bool {
	return (o.Policy == nil || n.Policy != nil) && (o.Utility == nil || n.Utility != nil) && (o.Safety == nil || n.Safety != nil) &&
		(o.LatencyP99MS == nil || n.LatencyP99MS != nil) && (o.EconomicsCentsPerDecision == nil || n.EconomicsCentsPerDecision != nil)
}
