package compiler

import (
	"fmt"
	"sort"
	"strconv"
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
	b.Grow(256)
	b.WriteString("Rule " + d.RuleID + " (bundle " + d.BundleID + ", priority " + strconv.Itoa(p.ruleMeta[d.RuleID].priority) + "): " + string(d.Outcome))
	if d.Branch != "" {
		b.WriteString(" (" + d.Branch + " branch)")
	}
	b.WriteString(".")
	if d.Rationale != "" {
		b.WriteString(" Rationale: " + d.Rationale)
	}
	if d.Reason != "" {
		b.WriteString(" Reason: " + d.Reason)
	}
	if len(d.Requires) > 0 {
		b.WriteString(" Requires evidence: " + strings.Join(d.Requires, ", ") + ".")
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
	b.Grow(len(it.EvidenceRef) + len(it.Content) + 64)
	b.WriteString("Evidence ")
	b.WriteString(it.EvidenceRef)
	sep := " ("
	for _, kv := range [...][2]string{{"kind", it.Kind}, {"source", it.SourceID}, {"snapshot", it.Snapshot}} {
		if kv[1] != "" {
			b.WriteString(sep)
			b.WriteString(kv[0])
			b.WriteByte(' ')
			b.WriteString(kv[1])
			sep = ", "
		}
	}
	if sep == ", " {
		b.WriteByte(')')
	}
	b.WriteString(", data only: ")
	b.WriteString(strconv.Quote(it.Content))
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
