package decisionspec_test

import (
	"strings"
	"testing"

	"github.com/contextos/contextos/internal/decisionspec"
	"github.com/contextos/contextos/pack"
)

func TestOutcomeClasses(t *testing.T) {
	t.Parallel()
	custom := pack.DecisionSpec{RefusalOutcomes: []string{"declined"}, EscalationOutcomes: []string{"handoff"}}
	tests := []struct {
		name               string
		spec               pack.DecisionSpec
		outcome            string
		refusal, escalates bool
	}{
		{"default denied", pack.DecisionSpec{}, "denied", true, false},
		{"default rejected", pack.DecisionSpec{}, "rejected", true, false},
		{"default refused", pack.DecisionSpec{}, "refused", true, false},
		{"default escalated", pack.DecisionSpec{}, "escalated", false, true},
		{"default approved", pack.DecisionSpec{}, "approved", false, false},
		{"custom refusal", custom, "declined", true, false},
		{"custom replaces the default refusals", custom, "denied", false, false},
		{"custom escalation", custom, "handoff", false, true},
		{"custom replaces the default escalation", custom, "escalated", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := decisionspec.IsRefusal(tt.spec, tt.outcome); got != tt.refusal {
				t.Errorf("IsRefusal = %v, want %v", got, tt.refusal)
			}
			if got := decisionspec.IsEscalation(tt.spec, tt.outcome); got != tt.escalates {
				t.Errorf("IsEscalation = %v, want %v", got, tt.escalates)
			}
		})
	}
}

func TestForAndRecordID(t *testing.T) {
	t.Parallel()
	p := &pack.Pack{}
	p.DecisionLayer.DecisionSpecs = []pack.DecisionSpec{{DecisionKey: "a", Version: "1.0.0"}, {DecisionKey: "b", Version: "2.0.0"}}
	if s, ok := decisionspec.For(p, "b"); !ok || s.Version != "2.0.0" {
		t.Errorf("For(b) = %+v, %v", s, ok)
	}
	if _, ok := decisionspec.For(p, "c"); ok {
		t.Error("For(c) found a spec")
	}
	id1, err := decisionspec.RecordID("run_1", "a", "DECIDED", 0)
	if err != nil {
		t.Fatal(err)
	}
	id2, _ := decisionspec.RecordID("run_1", "a", "DECIDED", 0)
	id3, _ := decisionspec.RecordID("run_1", "a", "CLOSED", 0)
	if !strings.HasPrefix(id1, "dr_") || id1 != id2 || id1 == id3 {
		t.Errorf("RecordID: %s, %s, %s; want a stable dr_ id that depends on the status", id1, id2, id3)
	}
}
