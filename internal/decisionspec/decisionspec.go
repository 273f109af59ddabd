// Package decisionspec answers what the runtime asks of a pack's decision
// specs: the spec of a decision key, whether an outcome is one of the
// spec's refusal or escalation outcomes, and the id a record of a decision
// gets. decision's building and validation and the run engine's critic
// and loop share it.
package decisionspec

import (
	"slices"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/pack"
)

// For returns the decision spec of key in p.
func For(p *pack.Pack, key string) (pack.DecisionSpec, bool) {
	for _, s := range p.DecisionLayer.DecisionSpecs {
		if s.DecisionKey == key {
			return s, true
		}
	}
	return pack.DecisionSpec{}, false
}

// IsRefusal reports whether outcome is one of spec's refusal outcomes
// (default: denied, rejected, refused).
func IsRefusal(spec pack.DecisionSpec, outcome string) bool {
	if len(spec.RefusalOutcomes) > 0 {
		return slices.Contains(spec.RefusalOutcomes, outcome)
	}
	return outcome == "denied" || outcome == "rejected" || outcome == "refused"
}

// IsEscalation reports whether outcome is one of spec's escalation
// outcomes (default: escalated).
func IsEscalation(spec pack.DecisionSpec, outcome string) bool {
	if len(spec.EscalationOutcomes) > 0 {
		return slices.Contains(spec.EscalationOutcomes, outcome)
	}
	return outcome == "escalated"
}

// RecordID derives a record id ("dr_…") from the run, decision key, status
// and sequence number, so a replay of the same run produces the same id.
func RecordID(runID, decisionKey, status string, seq int) (string, error) {
	return canon.ID(canon.PrefixDecision, runID, decisionKey, status, seq)
}
