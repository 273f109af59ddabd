package schemas_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/schemas"
)

// plan.v1 admits what a contextos.Plan's steps and decision encode to, and
// refuses an answer with neither, a step without a capability or args, an
// unknown member, a decision without a key, and a confidence above 1.
func TestPlanSchema(t *testing.T) {
	good := contextos.Plan{
		Steps: []contextos.Step{{CapabilityID: "adp_repo.read", Args: map[string]any{"path": "a.go"}, ApprovalMode: "read_only", EvidenceRefs: []string{"kg:a"}}},
		Decision: &contextos.DecisionProposal{DecisionKey: "code.change.apply", Outcome: "applied", Confidence: 0.5,
			Outputs: map[string]any{"n": 1}, SubjectIDs: []string{"repo:payments"}},
	}
	b, _ := json.Marshal(struct {
		Steps    []contextos.Step            `json:"steps"`
		Decision *contextos.DecisionProposal `json:"decision"`
	}{good.Steps, good.Decision})
	if err := schemas.Validate("plan", b); err != nil {
		t.Fatalf("a plan of a contextos.Plan: %v", err)
	}
	for _, ok := range []string{
		`{"steps":[{"capability_id":"adp_repo.read","args":{}}]}`,
		`{"decision":{"decision_key":"k","outcome":"o"}}`,
	} {
		if err := schemas.Validate("plan.v1", []byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, c := range []struct{ doc, code, at string }{
		{`{}`, "required", ""},
		{`{"steps":[]}`, "minItems", "/steps"},
		{`{"steps":[{"args":{}}]}`, "required", "/steps/0"},
		{`{"steps":[{"capability_id":"adp_repo.read"}]}`, "required", "/steps/0"},
		{`{"steps":[{"capability_id":"no dot","args":{}}]}`, "pattern", "/steps/0/capability_id"},
		{`{"steps":[{"capability_id":"a.b","args":[]}]}`, "type", "/steps/0/args"},
		{`{"steps":[{"capability_id":"a.b","args":{},"approval_mode":"root"}]}`, "enum", "/steps/0/approval_mode"},
		{`{"decision":{"outcome":"o"}}`, "required", "/decision"},
		{`{"decision":{"decision_key":"k","outcome":"o","confidence":2}}`, "maximum", "/decision/confidence"},
		{`{"decision":{"decision_key":"k","outcome":"o"},"usage":{"tokens":1}}`, "additionalProperties", ""},
	} {
		err := schemas.Validate("plan", []byte(c.doc))
		var ve *schemas.ValidationError
		if !errors.As(err, &ve) || !errors.Is(err, schemas.ErrInvalid) {
			t.Errorf("%s: err %v, want a validation error", c.doc, err)
			continue
		}
		if !ve.HasAt(schemas.Code(c.code), c.at) {
			t.Errorf("%s: %v, want %s at %q", c.doc, ve.Problems, c.code, c.at)
		}
	}
}
