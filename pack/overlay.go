package pack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/contextos/contextos/internal/sortedkeys"
	"slices"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/wire"
)

// Overlay is a declared environment overlay applied to a base pack. It
// may only constrain: swap endpoint references, add stricter rules,
// guardrails, redactions and approval gates, set locale, currency and
// timezone defaults, tighten evaluation targets, and tighten permissions.
// Anything that would expand power is refused with an *OverlayError.
type Overlay struct {
	OverlayID   string `json:"overlay_id" jsonschema:"required"`
	Base        string `json:"base" jsonschema:"required"` // the pack ref it applies to
	Environment string `json:"environment" jsonschema:"required"`
	// EndpointRefs swaps adapter endpoint references (adapter_id → ref).
	EndpointRefs map[string]string `json:"endpoint_refs,omitempty"`
	// AdapterApprovalModes raises adapters' declared maximum approval mode.
	// A capability whose permission declares its own, lower mode keeps it
	// (Permission.Mode); restate the permission to raise that.
	AdapterApprovalModes map[string]ApprovalMode `json:"adapter_approval_modes,omitempty"`
	// Permissions restate existing permissions (by permission_id) with
	// tighter settings.
	Permissions []Permission `json:"permissions,omitempty"`
	// PolicyBundles are added bundles of stricter rules.
	PolicyBundles []PolicyBundle `json:"policy_bundles,omitempty"`
	// Guardrails are added guardrail labels and redaction rules.
	Guardrails Guardrails `json:"guardrails,omitzero"`
	// ApprovalGates are added approval gates.
	ApprovalGates []ApprovalGate `json:"approval_gates,omitempty"`
	// EnvironmentDefaults override locale, currency, timezone and region.
	EnvironmentDefaults *EnvironmentDefaults `json:"environment_defaults,omitempty"`
	// EvalTargets tighten targets of intents the base already has.
	EvalTargets []EvalTarget `json:"eval_targets,omitempty"`
	// DecisionSpecs restate decision specs; their outcomes may not change.
	DecisionSpecs []DecisionSpec `json:"decision_specs,omitempty"`
	// Ontology restates the ontology; a namespace change needs a version bump.
	Ontology *Ontology `json:"ontology,omitempty"`
	// Metadata is an open map for notes.
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Overlay rules named by OverlayError.Rule.
const (
	OverlayBase         = "base_mismatch"
	OverlayGrant        = "grant_capability"
	OverlayLowerMode    = "lower_approval_mode"
	OverlayOutcomes     = "change_decision_outcomes"
	OverlayOntology     = "swap_ontology_namespace"
	OverlaySecret       = "insert_secret"
	OverlayLoosen       = "loosen_constraint"
	OverlayInvalidAfter = "invalid_result"
	// OverlayNewIntent: an added rule or eval target serves an intent the
	// base pack does not.
	OverlayNewIntent = "new_intent"
	// OverlayRedefineGate: an added approval gate reuses a gate id.
	OverlayRedefineGate = "redefine_approval_gate"
	// OverlayContract: a restated decision spec changes its contract
	// (version, decision right, schema refs, owner).
	OverlayContract = "change_decision_contract"
	// OverlayExpand: an added rule that does not only constrain.
	OverlayExpand = "expand_power"
)

// AppliedOverlay records which overlay a resolved view applied.
type AppliedOverlay struct {
	OverlayID   string `json:"overlay_id"`
	Environment string `json:"environment"`
	Hash        string `json:"hash"`
}

// DecodeOverlay strictly decodes an overlay document.
func DecodeOverlay(data []byte) (*Overlay, error) {
	var o Overlay
	probs, _ := wire.Decode(data, &o)
	if len(probs) > 0 {
		out := make([]Problem, len(probs))
		for i, q := range probs {
			out[i] = Problem{Gate: GateSchema, Code: CodeDecode, Path: q.Path, Message: quiet(q.Message)}
		}
		return nil, invalid(out)
	}
	return &o, nil
}

// ApplyOverlay returns the resolved view of base with o applied, and the
// record of what was applied. base is not modified. The view must pass
// every validation gate, validated with opts (which may be nil).
//
// An overlay is refused before anything is applied when it is for another
// pack or carries a secret; then each layer it touches is applied in turn
// (tooling, policy, environment defaults, evaluation, decisions,
// ontology), and the first rule it breaks refuses it.
func ApplyOverlay(base *Pack, o *Overlay, opts *ValidateOptions) (*Pack, AppliedOverlay, error) {
	if base == nil || o == nil {
		return nil, AppliedOverlay{}, &OverlayError{Rule: OverlayBase, Message: "base pack and overlay are required"}
	}
	ref, err := base.Ref()
	if err != nil {
		return nil, AppliedOverlay{}, err
	}
	if o.Base != ref.String() {
		return nil, AppliedOverlay{}, refuse(OverlayBase, "base", "overlay is for %s, not %s", clip(o.Base), ref).of(o)
	}
	hash, err := canon.Digest(o)
	if err != nil {
		return nil, AppliedOverlay{}, err
	}
	// Secrets first: an overlay is never applied if it carries one.
	for _, f := range scanSecrets(o) {
		return nil, AppliedOverlay{}, refuse(OverlaySecret, f.Path, "%s", f.What).of(o)
	}
	view, err := clonePack(base)
	if err != nil {
		return nil, AppliedOverlay{}, err
	}
	for _, layer := range []func(*Pack, *Overlay) *OverlayError{
		overlayTooling, overlayPolicy, overlayEnvironment, overlayEvaluation, overlayDecisions, overlayOntology,
	} {
		if oe := layer(view, o); oe != nil {
			return nil, AppliedOverlay{}, oe.of(o)
		}
	}
	if err := Validate(view, opts); err != nil {
		path := ""
		if ve, ok := err.(*ValidationError); ok && len(ve.Problems) > 0 {
			path = ve.Problems[0].Path
		}
		return nil, AppliedOverlay{}, &OverlayError{OverlayID: o.OverlayID, Rule: OverlayInvalidAfter, Path: path, Message: "the resolved view fails validation: " + err.Error(), Err: err}
	}
	return view, AppliedOverlay{OverlayID: o.OverlayID, Environment: o.Environment, Hash: hash}, nil
}

// refuse returns the *OverlayError of a broken overlay rule; ApplyOverlay
// names the overlay (of).
func refuse(rule, path, format string, args ...any) *OverlayError {
	return &OverlayError{Rule: rule, Path: path, Message: quiet(fmt.Sprintf(format, args...))}
}

// of names the overlay e refuses.
func (e *OverlayError) of(o *Overlay) *OverlayError {
	e.OverlayID = o.OverlayID
	return e
}

// overlayTooling applies the tooling layer: endpoint swaps, raised adapter
// approval modes and tightened permissions. An overlay cannot add an
// adapter or a permission, re-point or allow a denied permission, lower a
// mode, drop a gate or loosen an argument constraint.
func overlayTooling(view *Pack, o *Overlay) *OverlayError {
	adapters := map[string]*Adapter{}
	for i := range view.ToolingLayer.AdapterRegistry {
		adapters[view.ToolingLayer.AdapterRegistry[i].AdapterID] = &view.ToolingLayer.AdapterRegistry[i]
	}
	for _, id := range sortedkeys.Of(o.EndpointRefs) {
		a := adapters[id]
		if a == nil {
			return refuse(OverlayGrant, "endpoint_refs."+id, "adapter %s is not in the base pack; an overlay cannot add adapters", id)
		}
		a.EndpointRef = o.EndpointRefs[id]
	}
	for _, id := range sortedkeys.Of(o.AdapterApprovalModes) {
		a := adapters[id]
		if a == nil {
			return refuse(OverlayGrant, "adapter_approval_modes."+id, "adapter %s is not in the base pack", id)
		}
		m := o.AdapterApprovalModes[id]
		if !m.Valid() || m.Compare(a.ApprovalMode) < 0 {
			return refuse(OverlayLowerMode, "adapter_approval_modes."+id, "cannot lower adapter %s's approval mode from %s to %s", id, a.ApprovalMode, m)
		}
		a.ApprovalMode = m
	}
	for i, q := range o.Permissions {
		path := idx("permissions", i)
		j := slices.IndexFunc(view.ToolingLayer.Permissions, func(b Permission) bool { return b.PermissionID == q.PermissionID })
		if j < 0 {
			return refuse(OverlayGrant, path, "permission %s is not in the base pack; an overlay cannot grant permissions", q.PermissionID)
		}
		b := view.ToolingLayer.Permissions[j]
		if q.AdapterID != b.AdapterID || q.Capability != b.Capability {
			return refuse(OverlayGrant, path, "permission %s exposes %s in the base pack; an overlay cannot point it at %s", q.PermissionID, b.CapabilityID(), q.CapabilityID())
		}
		if q.Allow && !b.Allow {
			return refuse(OverlayGrant, path+".allow", "permission %s is denied in the base pack", q.PermissionID)
		}
		if b.RequiresApprovalGate != "" && q.RequiresApprovalGate != b.RequiresApprovalGate {
			return refuse(OverlayLoosen, path+".requires_approval_gate", "permission %s keeps its approval gate %s", q.PermissionID, b.RequiresApprovalGate)
		}
		// The capability's mode (Permission.Mode) may rise, never fall:
		// restating a permission that declares no mode with one below its
		// adapter's would lower it as surely as restating a declared one.
		floor := b.ApprovalMode
		lowered := floor != "" && (q.ApprovalMode == "" || q.ApprovalMode.Compare(floor) < 0)
		if a := adapters[b.AdapterID]; a != nil {
			floor = b.Mode(*a)
			lowered = lowered || q.Mode(*a).Compare(floor) < 0
		}
		if lowered {
			return refuse(OverlayLowerMode, path+".approval_mode", "permission %s cannot lower its approval mode below %s", q.PermissionID, floor)
		}
		if msg := loosened(b.ArgConstraints, q.ArgConstraints); msg != "" {
			return refuse(OverlayLoosen, path+".arg_constraints", "permission %s: %s", q.PermissionID, msg)
		}
		view.ToolingLayer.Permissions[j] = q
	}
	return nil
}

// overlayPolicy applies the policy layer: added bundles of rules that only
// constrain intents the pack already serves, added guardrail labels and
// redaction rules, and added approval gates (never a redefined one).
func overlayPolicy(view *Pack, o *Overlay) *OverlayError {
	served := ServedIntents(view)
	for i, b := range o.PolicyBundles {
		for ri, r := range b.PolicyDSL.Rules {
			rp := idx(idx("policy_bundles", i)+".policy_dsl.rules", ri)
			for _, in := range appliesValues(r.AppliesTo["intent"]) {
				if !slices.Contains(served, in) {
					return refuse(OverlayNewIntent, rp+".applies_to.intent", "intent %s is not served by the base pack; an overlay cannot add intents", clip(in))
				}
			}
			if !restrictive(r.Then) || r.Else != nil && !restrictive(r.Else) {
				return refuse(OverlayExpand, rp, "an added rule must only constrain: each branch denies, requires a gate or evidence, or raises a guardrail")
			}
			for _, e := range []*Effect{r.Then, r.Else} {
				if e != nil && e.ApprovalMode != "" {
					if s := specOf(view, r.DecisionBinding); s == nil || e.ApprovalMode.Compare(s.ApprovalMode) < 0 {
						return refuse(OverlayLowerMode, rp, "an added rule cannot set an approval mode below its decision's")
					}
				}
			}
		}
		view.PolicyLayer.PolicyBundles = append(view.PolicyLayer.PolicyBundles, b)
	}
	g := &view.PolicyLayer.Guardrails
	g.MustRefuse = union(g.MustRefuse, o.Guardrails.MustRefuse)
	g.MustEscalate = union(g.MustEscalate, o.Guardrails.MustEscalate)
	g.RedactionRules = union(g.RedactionRules, o.Guardrails.RedactionRules)
	for i, g := range o.ApprovalGates {
		if slices.ContainsFunc(view.PolicyLayer.ApprovalGates, func(b ApprovalGate) bool { return b.GateID == g.GateID }) {
			return refuse(OverlayRedefineGate, idx("approval_gates", i)+".gate_id", "approval gate %s is already defined; an overlay cannot redefine a gate", clip(g.GateID))
		}
		view.PolicyLayer.ApprovalGates = append(view.PolicyLayer.ApprovalGates, g)
	}
	return nil
}

// overlayEnvironment applies the environment defaults of the pack meta:
// each one the overlay sets replaces the base's. It refuses nothing.
func overlayEnvironment(view *Pack, o *Overlay) *OverlayError {
	d := o.EnvironmentDefaults
	if d == nil {
		return nil
	}
	ed := &view.PackMeta.EnvironmentDefaults
	for _, f := range []struct {
		dst *string
		v   string
	}{{&ed.Language, d.Language}, {&ed.Locale, d.Locale}, {&ed.Timezone, d.Timezone}, {&ed.Currency, d.Currency}, {&ed.Region, d.Region}} {
		if f.v != "" {
			*f.dst = f.v
		}
	}
	return nil
}

// overlayEvaluation applies the evaluation layer: eval targets of intents
// the base has, only tightened (tighten).
func overlayEvaluation(view *Pack, o *Overlay) *OverlayError {
	for i, t := range o.EvalTargets {
		j := slices.IndexFunc(view.EvaluationLayer.EvalTargets, func(b EvalTarget) bool { return b.Intent == t.Intent })
		if j < 0 {
			return refuse(OverlayNewIntent, idx("eval_targets", i)+".intent", "intent %s has no eval target in the base pack; an overlay cannot add intents", clip(t.Intent))
		}
		merged, msg := tighten(view.EvaluationLayer.EvalTargets[j], t)
		if msg != "" {
			return refuse(OverlayLoosen, idx("eval_targets", i), "%s", msg)
		}
		view.EvaluationLayer.EvalTargets[j] = merged
	}
	return nil
}

// overlayDecisions applies the decision layer: a restated decision spec
// keeps its outcomes, contract and required evidence, and may only raise
// its approval mode or add evidence.
func overlayDecisions(view *Pack, o *Overlay) *OverlayError {
	for i, s := range o.DecisionSpecs {
		path := idx("decision_specs", i)
		j := slices.IndexFunc(view.DecisionLayer.DecisionSpecs, func(b DecisionSpec) bool { return b.DecisionKey == s.DecisionKey })
		if j < 0 {
			return refuse(OverlayGrant, path, "decision %s is not in the base pack", s.DecisionKey)
		}
		b := view.DecisionLayer.DecisionSpecs[j]
		if !sameSet(b.AllowedOutcomes, s.AllowedOutcomes) || !sameSet(b.RefusalOutcomes, s.RefusalOutcomes) || !sameSet(b.EscalationOutcomes, s.EscalationOutcomes) {
			return refuse(OverlayOutcomes, path+".allowed_outcomes", "decision %s's outcomes cannot change in an overlay", s.DecisionKey)
		}
		if !s.ApprovalMode.Valid() || s.ApprovalMode.Compare(b.ApprovalMode) < 0 {
			return refuse(OverlayLowerMode, path+".approval_mode", "decision %s cannot lower its approval mode below %s", s.DecisionKey, b.ApprovalMode)
		}
		for _, e := range b.RequiredEvidence {
			if !slices.Contains(s.RequiredEvidence, e) {
				return refuse(OverlayLoosen, path+".required_evidence", "decision %s cannot drop required evidence %s", s.DecisionKey, e)
			}
		}
		if s.Version != b.Version || s.DecisionRight != b.DecisionRight || s.InputsSchemaRef != b.InputsSchemaRef || s.OutputsSchemaRef != b.OutputsSchemaRef || s.OwnerRole != b.OwnerRole {
			return refuse(OverlayContract, path, "decision %s's contract (version, decision right, schema refs, owner) cannot change in an overlay", s.DecisionKey)
		}
		view.DecisionLayer.DecisionSpecs[j] = s
	}
	return nil
}

// overlayOntology applies the ontology of the intelligence refs: a
// restated ontology may swap its namespace only with a major version bump.
func overlayOntology(view *Pack, o *Overlay) *OverlayError {
	on := o.Ontology
	if on == nil {
		return nil
	}
	b := view.IntelligenceRefs.Ontology
	if on.Namespace != b.Namespace {
		ov, err1 := semverOf(on.Version)
		bv, err2 := semverOf(b.Version)
		if err1 != nil || err2 != nil || ov.Major() <= bv.Major() {
			return refuse(OverlayOntology, "ontology.namespace", "swapping ontology namespace %s for %s needs a major version bump", b.Namespace, clip(on.Namespace))
		}
	}
	view.IntelligenceRefs.Ontology = *on
	return nil
}

func specOf(p *Pack, key string) *DecisionSpec {
	for i := range p.DecisionLayer.DecisionSpecs {
		if p.DecisionLayer.DecisionSpecs[i].DecisionKey == key {
			return &p.DecisionLayer.DecisionSpecs[i]
		}
	}
	return nil
}

func num(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// tighten merges an overlay target into a base target; scores may only
// rise and ceilings only fall.
func tighten(b, o EvalTarget) (EvalTarget, string) {
	up := []struct {
		name     string
		dst, src **float64
	}{{"policy", &b.Policy, &o.Policy}, {"utility", &b.Utility, &o.Utility}, {"safety", &b.Safety, &o.Safety}}
	for _, f := range up {
		if *f.src != nil {
			if *f.dst != nil && **f.src < **f.dst {
				return b, fmt.Sprintf("eval target %s.%s can only be raised", b.Intent, f.name)
			}
			*f.dst = *f.src
		}
	}
	down := []struct {
		name     string
		dst, src **float64
	}{{"latency_p99_ms", &b.LatencyP99MS, &o.LatencyP99MS}, {"economics_cents_per_decision", &b.EconomicsCentsPerDecision, &o.EconomicsCentsPerDecision}}
	for _, f := range down {
		if *f.src != nil {
			if *f.dst != nil && **f.src > **f.dst {
				return b, fmt.Sprintf("eval target %s.%s can only be lowered", b.Intent, f.name)
			}
			*f.dst = *f.src
		}
	}
	return b, ""
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

// Clone returns a deep copy of p, made through its JSON form; the error
// is encoding/json's for a pack that has no JSON form. Its raw JSON
// (rules, gate conditions) is copied as written, not HTML-escaped, so the
// copy has p's bytes and hashes.
func (p *Pack) Clone() (*Pack, error) { return clonePack(p) }

// clonePack deep-copies a pack through its JSON form.
func clonePack(p *Pack) (*Pack, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("pack: copy: %w", err)
	}
	var out Pack
	if err := json.Unmarshal(b.Bytes(), &out); err != nil {
		return nil, fmt.Errorf("pack: copy: %w", err)
	}
	return &out, nil
}
