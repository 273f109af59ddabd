package decision

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/contextos/contextos/runcontext"
)

// TestCloneRecordReadsBackAsJSON holds the typed copy to the JSON round
// trip it stands for: on every record, cloneRecord gives what
// cloneRecordJSON gives (the same value, nil and empty alike, or an error
// where it errs), and shares no memory with the record.
func TestCloneRecordReadsBackAsJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 1))
	typed := 0
	for i := range 3000 {
		r := randomRecord(rng)
		want, werr := cloneRecordJSON(r)
		got, gerr := cloneRecord(r)
		if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
			t.Fatalf("record %d: error %v, the round trip's %v", i, gerr, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("record %d: copy\n%#v\nround trip\n%#v", i, got, want)
		}
		if _, ok := copyRecord(r); ok {
			typed++
			assertNoSharing(t, r, got)
		}
	}
	// The generator must exercise both paths.
	t.Logf("%d of 3000 records took the typed copy", typed)
	if typed < 500 || typed > 2900 {
		t.Fatalf("%d of 3000 records took the typed copy: the generator no longer covers both paths", typed)
	}
}

// assertNoSharing fails when a and b share a slice, map or pointer.
func assertNoSharing(t *testing.T, a, b *Record) {
	t.Helper()
	b.Actor.ID = "changed"
	if len(b.SubjectIDs) > 0 {
		b.SubjectIDs[0] = "changed"
		if a.SubjectIDs[0] == "changed" {
			t.Fatal("subject_ids shared")
		}
	}
	if len(b.PolicyDecisions) > 0 && len(b.PolicyDecisions[0].RuleIDs) > 0 {
		b.PolicyDecisions[0].RuleIDs[0] = "changed"
		if a.PolicyDecisions[0].RuleIDs[0] == "changed" {
			t.Fatal("rule_ids shared")
		}
	}
	if len(b.AgentIdentity.PrincipalChain) > 0 {
		b.AgentIdentity.PrincipalChain[0].ID = "changed"
		if a.AgentIdentity.PrincipalChain[0].ID == "changed" {
			t.Fatal("principal_chain shared")
		}
	}
	if b.Outputs != nil {
		b.Outputs["changed"] = true
		if _, ok := a.Outputs["changed"]; ok {
			t.Fatal("outputs shared")
		}
		if l, ok := b.Outputs["list"].([]any); ok && len(l) > 0 {
			l[0] = "changed"
			if a.Outputs["list"].([]any)[0] == "changed" {
				t.Fatal("an output list shared")
			}
		}
	}
	if b.Replay != nil && b.Replay == a.Replay || b.Awaiting != nil && b.Awaiting == a.Awaiting {
		t.Fatal("replay or awaiting shared")
	}
	if len(b.Problems) > 0 {
		b.Problems[0].Message = "changed"
		if a.Problems[0].Message == "changed" {
			t.Fatal("problems shared")
		}
	}
}

// randomRecord is a record with every member drawn, now and then from
// what JSON does not read back as itself: invalid UTF-8, a NaN, an
// unknown enum, an int or a struct among the outputs.
func randomRecord(rng *rand.Rand) *Record {
	odd := func() bool { return rng.IntN(60) == 0 }
	str := func() string {
		switch {
		case odd():
			return "bad\xff\xfeutf8"
		case rng.IntN(4) == 0:
			return ""
		case rng.IntN(8) == 0:
			return "<a & b> \u2028 é"
		}
		return "s" + string(rune('a'+rng.IntN(26)))
	}
	strs := func() []string {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		out := make([]string, 1+rng.IntN(3))
		for i := range out {
			out[i] = str()
		}
		return out
	}
	num := func() float64 {
		switch {
		case odd():
			return math.NaN()
		case odd():
			return math.Inf(-1)
		case rng.IntN(5) == 0:
			return math.Copysign(0, -1)
		}
		return rng.NormFloat64() * 1e3
	}
	var value func(depth int) any
	value = func(depth int) any {
		switch n := rng.IntN(12); {
		case n == 0:
			return nil
		case n == 1:
			return rng.IntN(2) == 0
		case n == 2 && odd():
			return 7 // an int reads back as a float64
		case n == 3 && odd():
			return struct{ A int }{1}
		case n == 4 && odd():
			return map[string]any(nil)
		case n == 5 && odd():
			return []any(nil)
		case n < 7:
			return num()
		case n < 9 || depth > 2:
			return str()
		case n == 9:
			l := make([]any, rng.IntN(3))
			for i := range l {
				l[i] = value(depth + 1)
			}
			return l
		}
		m := map[string]any{}
		for range rng.IntN(3) {
			m[str()] = value(depth + 1)
		}
		return m
	}
	status := []Status{Decided, Deferred, Rejected, Escalated, InFlight, Closed}[rng.IntN(6)]
	if odd() {
		status = "MAYBE"
	}
	kind := []runcontext.PrincipalKind{runcontext.PrincipalUser, runcontext.PrincipalAgent}[rng.IntN(2)]
	if odd() {
		kind = ""
	}
	mode := runcontext.ReadOnly
	if odd() {
		mode = "sometimes"
	}
	r := &Record{
		RecordID: str(), DecisionKey: str(), DecisionVersion: str(), Timestamp: str(), Status: status,
		Actor:         Actor{Type: str(), ID: str()},
		AgentIdentity: AgentIdentity{Subject: str(), ClaimHash: str(), ClaimVerification: ClaimVerification(str())},
		IntentRef:     str(), SubjectIDs: strs(), InputsRefs: InputsRefs{Request: str(), Session: str()}, Outcome: str(),
		EvidenceRefs: strs(), ControlsActive: Controls{MustRefuse: strs(), MustEscalate: strs(), ApprovalGatesActive: strs(), RedactionRulesActive: strs()},
		Confidence: num(), Rationale: Rationale{Strategy: str(), Summary: str(), AlternativesConsidered: strs()},
		BudgetUsage: BudgetUsage{Tokens: rng.IntN(1 << 40), ToolCalls: rng.IntN(9), CostUSDCents: num(), WallClockMS: rng.Int64()},
		Lineage:     Lineage{PackVersion: str(), PackContentHash: str(), CompiledContextHash: str(), ReplayPacketID: str(), DataClassification: str()},
		TraceID:     str(), RunID: str(), TenantID: str(), Closes: str(), PrevRecordHash: str(), RecordHash: str(),
	}
	if rng.IntN(3) > 0 {
		r.AgentIdentity.PrincipalChain = []runcontext.Principal{{Kind: kind, ID: str(), TenantID: str(), Display: str()}}
	} else if rng.IntN(2) == 0 {
		r.AgentIdentity.PrincipalChain = []runcontext.Principal{}
	}
	switch rng.IntN(3) {
	case 0:
		r.Outputs = map[string]any{"list": []any{str(), num()}, "x": value(0), "y": value(0)}
	case 1:
		r.Outputs = map[string]any{}
	}
	for range rng.IntN(3) {
		r.PolicyDecisions = append(r.PolicyDecisions, PolicyDecisionRef{PolicyDecisionID: str(), RuleIDs: strs()})
	}
	for range rng.IntN(3) {
		r.Approvals = append(r.Approvals, Approval{GateID: str(), Approver: str(), ApprovalModeEffective: mode, EvidenceSnapshotHash: str(),
			DecidedAt: str(), ToolCallID: str(), ApprovalID: str(), Decision: ApprovalDecision(str()), Reason: str()})
	}
	if rng.IntN(2) == 0 {
		r.Replay = &Replay{ReplayPacketID: str(), CompiledContextHash: str(), RecordHash: str()}
	}
	if rng.IntN(3) == 0 {
		r.Awaiting = &Awaiting{Kind: str(), GateID: str(), TTLSeconds: rng.IntN(100), Description: str()}
	}
	switch rng.IntN(3) {
	case 0:
		r.Problems = []Problem{}
	case 1:
		r.Problems = []Problem{{Gate: str(), Code: CodeApprovalMissing, Path: str(), Message: str()}}
	}
	return r
}

func BenchmarkCloneRecord(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	r := randomRecord(rng)
	for _, ok := copyRecord(r); !ok || r.Outputs == nil || len(r.Approvals) == 0; _, ok = copyRecord(r) {
		r = randomRecord(rng)
	}
	b.Run("typed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cloneRecord(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cloneRecordJSON(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
