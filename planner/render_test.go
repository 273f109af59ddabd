package planner_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/planner"
)

func TestRenderGolden(t *testing.T) {
	t.Parallel()
	reqs := canonicalRequests(t)
	for _, tc := range []struct {
		name string
		req  *contextos.PlanRequest
	}{
		{"refund_turn0.json", reqs[0]},
		{"refund_turn2_replan.json", reqs[2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := conversationJSON(t, render(t, tc.req, &planner.Options{Instructions: "Answer in English."}))
			golden(t, tc.name, got)
			again := conversationJSON(t, render(t, tc.req, &planner.Options{Instructions: "Answer in English."}))
			if !bytes.Equal(got, again) {
				t.Error("two renders of the same request differ")
			}
		})
	}
}

func TestRenderInvalidRequest(t *testing.T) {
	for name, req := range map[string]*contextos.PlanRequest{"nil": nil, "empty": {}, "no compiled context": {Turn: 3}} {
		if _, err := planner.Render(req, nil); !errors.Is(err, planner.ErrInvalidRequest) {
			t.Errorf("%s: err = %v, want ErrInvalidRequest", name, err)
		}
	}
}
