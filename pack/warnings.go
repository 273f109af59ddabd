package pack

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/contextos/contextos/internal/logic"
	"github.com/contextos/contextos/internal/sortedkeys"
	"github.com/contextos/contextos/runcontext"
)

// CodeCallerAssertedControl is the risk warning of a write-class
// capability whose approval gate and deny rules read only what the caller
// asserts in request.context and nothing of the call's own arguments
// (tool.args): the model can call it with arguments other than the ones
// the caller asserted, and the control does not see them.
const CodeCallerAssertedControl = "caller_asserted_control"

// Warnings returns what the validation gates find risky in p without
// refusing it: problems in gate order, then document order, each with its
// gate, code, JSON path and a message that names the fix. A pack with
// warnings is valid (Validate accepts it); CI and `contextos pack validate`
// show them.
//
// The risk gate warns (CodeCallerAssertedControl) about each approval gate
// that guards a write-class capability when that gate's when, the rules
// that name the gate, and every deny rule that can apply to it (a rule
// whose applies_to names tool.capability_id applies only to those) read
// request.context.* and nothing of tool.args: a refund gated on request.context.refund_amount
// holds the call the caller described, not the call the model makes. The
// fix is the per-call form: a when, or a rule naming the gate, over
// tool.args.*, evaluated for each call at the gateway. A write-class
// capability with no gate (one below destructive: a destructive one without
// a gate is invalid) is warned about, at its permission, when its deny
// rules read request.context and nothing of tool.args.
func Warnings(p *Pack) []Problem {
	if p == nil {
		return nil
	}
	v := newValidator(p)
	v.callerAssertedControls()
	return v.probs
}

// exprVars returns the data paths an expression reads at its top level
// (nil for an expression logic.Check refuses: Validate reports it).
func exprVars(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	info, err := logic.Check(raw)
	if err != nil {
		return nil
	}
	return info.Vars
}

// ruleVars returns the data paths a rule reads: its condition's and its
// applies_to keys.
func ruleVars(r Rule) []string {
	return append(exprVars(r.If), sortedkeys.Of(r.AppliesTo)...)
}

// callerAssertedControls adds a CodeCallerAssertedControl warning for each
// approval gate (and each ungated permission) guarding a write-class
// capability whose controls read request.context and nothing of
// tool.args (see Warnings). A rule whose applies_to names
// tool.capability_id controls only the capabilities it names: its reads
// of another capability's arguments bind nothing of this one.
func (v *validator) callerAssertedControls() {
	p := v.p
	type control struct {
		reads []string
		caps  []string // applies_to tool.capability_id; nil: every capability
	}
	var deny []control
	gateRules := map[string][]control{} // gate id → the rules naming it
	for _, b := range p.PolicyLayer.PolicyBundles {
		for _, r := range b.PolicyDSL.Rules {
			c := control{reads: ruleVars(r)}
			if x, ok := r.AppliesTo["tool.capability_id"]; ok {
				c.caps = appliesValues(x)
				if c.caps == nil {
					c.caps = []string{} // applies to no capability
				}
			}
			for _, e := range []*Effect{r.Then, r.Else} {
				if e == nil {
					continue
				}
				if e.Allow != nil && !*e.Allow {
					deny = append(deny, c)
				}
				if g := e.RequiresApprovalGate; g != "" {
					gateRules[g] = append(gateRules[g], c)
				}
			}
		}
	}
	// readsFor returns the paths the controls that can apply to capability
	// id read.
	readsFor := func(id string, cs []control) []string {
		var out []string
		for _, c := range cs {
			if c.caps == nil || slices.Contains(c.caps, id) {
				out = append(out, c.reads...)
			}
		}
		return out
	}
	guarded := map[string][]Permission{} // gate id → the write-class permissions it guards
	for i, q := range p.ToolingLayer.Permissions {
		a := v.adapters[q.AdapterID]
		if a == nil || !q.Allow || !q.Mode(*a).IsWrite() {
			continue
		}
		if q.RequiresApprovalGate != "" {
			guarded[q.RequiresApprovalGate] = append(guarded[q.RequiresApprovalGate], q)
			continue
		}
		if q.Mode(*a) == runcontext.Destructive {
			continue // refused by the risk gate (CodeDestructiveWithoutGate)
		}
		if ctx, ok := callerAsserted(readsFor(q.CapabilityID(), deny)); ok {
			v.add(GateRisk, CodeCallerAssertedControl, idx("tooling_layer.permissions", i),
				"write-class capability %s (%s) has no approval gate, and the deny rules that guard it read only caller-asserted request.context (%s) and nothing of the call's arguments; bind it to the call: give permission %s a requires_approval_gate whose when reads %s, or add a rule over tool.args.*",
				q.CapabilityID(), q.Mode(*a), strings.Join(ctx, ", "), q.PermissionID, argsExample(q))
		}
	}
	for gi, g := range p.PolicyLayer.ApprovalGates {
		perms := guarded[g.GateID]
		if len(perms) == 0 || v.gateAt[g.GateID] != gi {
			continue
		}
		// The gate is warned about when, for a capability it guards, its
		// when, the rules naming it and the deny rules read only
		// request.context.
		var ctx []string
		when := exprVars(g.When)
		for _, q := range perms {
			id := q.CapabilityID()
			if c, ok := callerAsserted(slices.Concat(when, readsFor(id, gateRules[g.GateID]), readsFor(id, deny))); ok {
				ctx = append(ctx, c...)
			}
		}
		if ctx == nil {
			continue
		}
		slices.Sort(ctx)
		ctx = slices.Compact(ctx)
		caps := make([]string, len(perms))
		for i, q := range perms {
			caps[i] = q.CapabilityID() + " (" + string(q.Mode(*v.adapters[q.AdapterID])) + ")"
		}
		v.add(GateRisk, CodeCallerAssertedControl, idx("policy_layer.approval_gates", gi)+".when",
			"gate %s guards write-class %s, but its when, the rules naming it and the deny rules read only caller-asserted request.context (%s) and nothing of the call's arguments, so a call whose arguments differ from what the caller asserted is not held; bind it to the call: a when over tool.args, such as %s, or a rule over tool.args.* whose branch names requires_approval_gate %s",
			g.GateID, strings.Join(caps, ", "), strings.Join(ctx, ", "), gateExample(perms[0]), g.GateID)
	}
}

// callerAsserted returns the request.context members reads reads (without
// the prefix, sorted, unique) and true, when it reads at least one and no
// tool.args path.
func callerAsserted(reads []string) ([]string, bool) {
	set := map[string]bool{}
	for _, r := range reads {
		if r == "tool.args" || strings.HasPrefix(r, "tool.args.") {
			return nil, false
		}
		if name, ok := strings.CutPrefix(r, "request.context."); ok && name != "" {
			set[name] = true
		}
	}
	if len(set) == 0 {
		return nil, false
	}
	return sortedkeys.Of(set), true
}

// callArg names an argument of q's calls to show in a fix: the first of
// its constrained arguments other than the idempotency key, by name.
func callArg(q Permission) string {
	for _, k := range sortedkeys.Of(q.ArgConstraints) {
		if k != "idempotency_key" {
			return k
		}
	}
	return "<argument>"
}

func argsExample(q Permission) string { return "tool.args." + callArg(q) }

func gateExample(q Permission) string {
	return `{">": [{"var": "tool.args.` + callArg(q) + `"}, …]}`
}
