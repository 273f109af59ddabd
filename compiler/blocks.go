package compiler

import (
	"fmt"
	"sort"
	"strings"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

func businessBlock(p *pack.Pack) string {
	var b strings.Builder
	s := p.BusinessContext.Summary
	if s.WhatWeDo != "" {
		fmt.Fprintf(&b, "What we do: %s.\n", s.WhatWeDo)
	}
	if len(s.WhoWeServe) > 0 {
		fmt.Fprintf(&b, "Who we serve: %s.\n", strings.Join(s.WhoWeServe, ", "))
	}
	if len(s.Differentiators) > 0 {
		fmt.Fprintf(&b, "Differentiators: %s.\n", strings.Join(s.Differentiators, ", "))
	}
	if len(p.BusinessContext.NonNegotiables) > 0 {
		b.WriteString("Non-negotiables:\n")
		for _, n := range p.BusinessContext.NonNegotiables {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func (p *Prepared) policyBlock(d policy.Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Rule %s (bundle %s, priority %d): %s", d.RuleID, d.BundleID, p.ruleMeta[d.RuleID].priority, d.Outcome)
	if d.Branch != "" {
		fmt.Fprintf(&b, " (%s branch)", d.Branch)
	}
	b.WriteString(".")
	if d.Rationale != "" {
		fmt.Fprintf(&b, " Rationale: %s", d.Rationale)
	}
	if d.Reason != "" {
		fmt.Fprintf(&b, " Reason: %s", d.Reason)
	}
	if len(d.Requires) > 0 {
		fmt.Fprintf(&b, " Requires evidence: %s.", strings.Join(d.Requires, ", "))
	}
	if d.RequiresApprovalGate != "" {
		g := p.gates[d.RequiresApprovalGate]
		fmt.Fprintf(&b, " Requires approval gate %s (approver role %s, TTL %ds).", g.GateID, g.RequiredApproverRole, g.TTLSeconds)
	}
	if d.ApprovalMode != "" {
		fmt.Fprintf(&b, " Approval mode: %s.", d.ApprovalMode)
	}
	if d.DecisionBinding != "" {
		fmt.Fprintf(&b, " Decision: %s.", d.DecisionBinding)
	}
	return b.String()
}

func toolBlock(a pack.Adapter, e ToolManifestEntry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Adapter %s (%s).", a.AdapterID, a.Type)
	for _, c := range e.Capabilities {
		m := e.CapabilityMetadata[c]
		fmt.Fprintf(&b, " Capability %s.%s: %s, approval mode %s", a.AdapterID, c, m.Kind, m.ApprovalMode)
		if m.ApprovalGate != "" {
			state := "inactive"
			if m.GateActive {
				state = "active"
			}
			fmt.Fprintf(&b, ", approval gate %s (%s)", m.ApprovalGate, state)
		}
		for _, arg := range sortedKeys(m.Constraints) {
			fmt.Fprintf(&b, ", %s %s", arg, constraintText(m.Constraints[arg]))
		}
		b.WriteString(".")
	}
	return b.String()
}

func constraintText(c map[string]any) string {
	parts := make([]string, 0, len(c))
	for _, k := range sortedKeys(c) {
		parts = append(parts, fmt.Sprintf("%s=%v", k, c[k]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// evidenceBlock presents evidence as quoted data: retrieved text is never
// instructions.
func evidenceBlock(it EvidenceItem) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Evidence %s", it.EvidenceRef)
	var attrs []string
	for _, kv := range [][2]string{{"kind", it.Kind}, {"source", it.SourceID}, {"snapshot", it.Snapshot}} {
		if kv[1] != "" {
			attrs = append(attrs, kv[0]+" "+kv[1])
		}
	}
	if len(attrs) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(attrs, ", "))
	}
	fmt.Fprintf(&b, ", data only: %q", it.Content)
	return b.String()
}

func sessionBlock(req *runcontext.InvokeRequest, rc *runcontext.RunContext) string {
	var b strings.Builder
	if rc.SessionID != "" {
		fmt.Fprintf(&b, "Session %s", rc.SessionID)
	} else {
		b.WriteString("Ephemeral run")
	}
	if req.Input.Channel != "" {
		fmt.Fprintf(&b, ", channel %s", req.Input.Channel)
	}
	locale := req.Input.Locale
	if locale == "" {
		locale = rc.Locale
	}
	if locale != "" {
		fmt.Fprintf(&b, ", locale %s", locale)
	}
	fmt.Fprintf(&b, ". User message: %q", req.Input.Message)
	return b.String()
}

func (p *Prepared) developer() string {
	var b strings.Builder
	b.WriteString("Honor the policy_manifest, tool_manifest, runtime_controls, and required_evidence at every step.")
	tc := p.pack.ToneAndComms
	if len(tc.VoiceAttributes) > 0 {
		fmt.Fprintf(&b, " Voice: %s.", strings.Join(tc.VoiceAttributes, ", "))
	}
	if len(tc.Do) > 0 {
		fmt.Fprintf(&b, " Do: %s.", strings.Join(tc.Do, "; "))
	}
	if len(tc.Dont) > 0 {
		fmt.Fprintf(&b, " Don't: %s.", strings.Join(tc.Dont, "; "))
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
