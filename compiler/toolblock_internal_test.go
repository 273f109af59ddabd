package compiler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/contextos/contextos/internal/sortedkeys"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// toolBlockByFmt is toolBlock as it was written with fmt and string
// concatenation: the text the model is given, which toolBlock must keep.
func toolBlockByFmt(a pack.Adapter, e ToolManifestEntry) string {
	var b strings.Builder
	b.WriteString("Adapter " + a.AdapterID + " (" + a.Type + ").")
	for _, c := range e.Capabilities {
		m := e.CapabilityMetadata[c]
		b.WriteString(" Capability " + a.AdapterID + "." + c + ": " + m.Kind + ", approval mode " + m.ApprovalMode.String())
		if m.ApprovalGate != "" {
			state := "inactive"
			switch {
			case m.GateActive:
				state = "active"
			case m.GatePerCall != "":
				state = "applies per call when " + m.GatePerCall
			}
			b.WriteString(", approval gate " + m.ApprovalGate + " (" + state + ")")
		}
		for _, arg := range sortedkeys.Of(m.Constraints) {
			parts := []string{}
			for _, k := range sortedkeys.Of(m.Constraints[arg]) {
				parts = append(parts, fmt.Sprintf("%s=%v", k, m.Constraints[arg][k]))
			}
			b.WriteString(", " + arg + " " + "{" + strings.Join(parts, " ") + "}")
		}
		b.WriteString(".")
	}
	return b.String()
}

// TestToolBlockText: toolBlock writes what the fmt form wrote, for
// constraint values of every JSON type (and Go ints), gates active,
// inactive and per call, and floats of every magnitude.
func TestToolBlockText(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 37))
	values := func() any {
		switch r.IntN(9) {
		case 0:
			return nil
		case 1:
			return []string{"a", "é", ""}[r.IntN(3)]
		case 2:
			return r.IntN(2) == 0
		case 3:
			return []float64{0, math.Copysign(0, -1), 1, 50000, 1e21, 1e20, 1e-5, 1e-4, 0.1, math.Inf(1), math.NaN(), 123456789.125}[r.IntN(12)]
		case 4:
			return math.Float64frombits(r.Uint64())
		case 5:
			return r.IntN(1000) - 500
		case 6:
			return []any{1.5, "x", true}
		case 7:
			return map[string]any{"b": 1.0, "a": "y"}
		}
		return runcontext.Destructive // a named string type
	}
	modes := []runcontext.ApprovalMode{runcontext.ReadOnly, runcontext.Destructive, "bogus"}
	for range 3000 {
		a := pack.Adapter{AdapterID: "adp_" + fmt.Sprint(r.IntN(5)), Type: []string{"rest", "", "grpc"}[r.IntN(3)]}
		e := ToolManifestEntry{AdapterID: a.AdapterID, CapabilityMetadata: map[string]CapabilityMetadata{}}
		for i := range r.IntN(4) {
			c := fmt.Sprintf("cap%d", i)
			e.Capabilities = append(e.Capabilities, c)
			m := CapabilityMetadata{Kind: []string{"read", "write"}[r.IntN(2)], ApprovalMode: modes[r.IntN(len(modes))]}
			if r.IntN(2) == 0 {
				m.ApprovalGate = "gate_" + c
				m.GateActive = r.IntN(3) == 0
				if r.IntN(2) == 0 {
					m.GatePerCall = "tool.args.amount > 5000"
				}
			}
			if n := r.IntN(3); n > 0 {
				m.Constraints = map[string]map[string]any{}
				for j := range n {
					c := map[string]any{}
					for k := range r.IntN(4) {
						c[[]string{"min", "max", "required", "enum", "pattern"}[k]] = values()
					}
					m.Constraints[fmt.Sprintf("arg%d", j)] = c
				}
			}
			e.CapabilityMetadata[c] = m
		}
		if got, want := toolBlock(a, e), toolBlockByFmt(a, e); got != want {
			t.Fatalf("toolBlock:\n got %q\nwant %q", got, want)
		}
	}
}

// policyBlockByFmt is policyBlock as it was written with concatenation
// and fmt: the text the model is given, which policyBlock must keep.
func (p *Prepared) policyBlockByFmt(d policy.Decision) string {
	var b strings.Builder
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

// TestPolicyBlockText: policyBlock writes what the concatenated and fmt
// form wrote, every optional part present or not, for rules with and
// without metadata, gates known and unknown, negative priorities and TTLs,
// unknown approval modes and text that is not valid UTF-8; and policyText,
// which keeps a rule's last block, gives the block and citation of each
// decision (the same decision again, or one that differs in any member).
func TestPolicyBlockText(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 37))
	str := func() string {
		return []string{"", "r1", "é漢", "\xff\xfe", "a b, c", "%d %s"}[r.IntN(6)]
	}
	p := &Prepared{
		ruleMeta: map[string]ruleMeta{"r1": {priority: 10, text: &atomic.Pointer[policyText]{}}, "é漢": {priority: -3, text: &atomic.Pointer[policyText]{}}, "a b, c": {priority: math.MaxInt64}},
		gates: map[string]pack.ApprovalGate{
			"g1":  {GateID: "g1", RequiredApproverRole: "supervisor", TTLSeconds: 3600},
			"%d":  {GateID: "%d", RequiredApproverRole: "\xff", TTLSeconds: -5},
			"g_0": {GateID: "", RequiredApproverRole: "", TTLSeconds: 0},
		},
	}
	modes := []runcontext.ApprovalMode{"", runcontext.ReadOnly, runcontext.Destructive, "bogus"}
	for range 5000 {
		d := policy.Decision{RuleID: str(), BundleID: str(), Outcome: policy.RuleOutcome(str()), Branch: str(), Rationale: str(), Reason: str(),
			ApprovalMode: modes[r.IntN(len(modes))], DecisionBinding: str(), RequiresApprovalGate: []string{"", "g1", "%d", "g_0", "missing"}[r.IntN(5)]}
		for range r.IntN(4) {
			d.Requires = append(d.Requires, str())
		}
		want := p.policyBlockByFmt(d)
		if got := p.policyBlock(d); got != want {
			t.Fatalf("policyBlock:\n got %q\nwant %q", got, want)
		}
		if got, cite := p.policyText(&d); got != want || cite != "policy:"+d.BundleID+"#"+d.RuleID {
			t.Fatalf("policyText:\n got %q %q\nwant %q", got, cite, want)
		}
	}
}

// TestPolicyTextEachMember: a decision that differs from the one before
// it for the same rule in only one member policyBlock reads gets its own
// block, not the one the rule's memo keeps.
func TestPolicyTextEachMember(t *testing.T) {
	p := &Prepared{
		ruleMeta: map[string]ruleMeta{"r1": {priority: 10, text: &atomic.Pointer[policyText]{}}},
		gates:    map[string]pack.ApprovalGate{"g1": {GateID: "g1", RequiredApproverRole: "supervisor", TTLSeconds: 3600}, "g2": {GateID: "g2", RequiredApproverRole: "lead", TTLSeconds: 60}},
	}
	base := policy.Decision{RuleID: "r1", BundleID: "b1", Outcome: "allow", Branch: "then", Rationale: "why", Reason: "because", Requires: []string{"e1"},
		ApprovalMode: runcontext.ReadOnly, DecisionBinding: "k1", RequiresApprovalGate: "g1", PolicyDecisionID: "pd_1"}
	edits := []func(*policy.Decision){
		func(d *policy.Decision) { d.BundleID = "b2" },
		func(d *policy.Decision) { d.Outcome = "deny" },
		func(d *policy.Decision) { d.Branch = "else" },
		func(d *policy.Decision) { d.Rationale = "other" },
		func(d *policy.Decision) { d.Reason = "other" },
		func(d *policy.Decision) { d.Requires = []string{"e2"} },
		func(d *policy.Decision) { d.Requires = append(d.Requires, "e2") },
		func(d *policy.Decision) { d.ApprovalMode = runcontext.Destructive },
		func(d *policy.Decision) { d.DecisionBinding = "k2" },
		func(d *policy.Decision) { d.RequiresApprovalGate = "g2" },
		func(d *policy.Decision) { d.PolicyDecisionID = "pd_2" }, // not in the block: the same text
	}
	for i, edit := range edits {
		for _, d := range []policy.Decision{base.Clone(), func() policy.Decision { d := base.Clone(); edit(&d); return d }(), base.Clone()} {
			if got, cite := p.policyText(&d); got != p.policyBlockByFmt(d) || cite != "policy:"+d.BundleID+"#"+d.RuleID {
				t.Fatalf("edit %d: policyText %q %q, want %q", i, got, cite, p.policyBlockByFmt(d))
			}
		}
	}
}
