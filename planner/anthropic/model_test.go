package anthropic_test

import (
	"testing"

	"github.com/contextos/contextos/planner/anthropic"
)

// The planner names its provider and model for the GenAI spans and
// metrics.
func TestPlannerModel(t *testing.T) {
	p, err := anthropic.New(anthropic.Options{Model: "model-x", APIKey: "test-key"})
	if err != nil {
		t.Fatal(err)
	}
	if provider, model := p.PlannerModel(); provider != "anthropic" || model != "model-x" {
		t.Errorf("PlannerModel() = %q, %q", provider, model)
	}
}
