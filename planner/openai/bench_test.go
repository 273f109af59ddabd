package openai_test

import (
	"context"
	"testing"

	"github.com/contextos/contextos/planner/openai"
)

// BenchmarkPlan is one planner turn (render, request, answer, parse)
// against the loopback fake: the canonical second turn (the lookup and
// eval results in, the refund and the decision out), batch and streamed.
func BenchmarkPlan(b *testing.B) {
	req := planRequests(b)[1]
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			f := newFake(b, canonicalReplies()[1])
			f.repeat = true
			p := newPlanner(b, f, func(o *openai.Options) { o.Stream = m.stream })
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				plan, err := p.Plan(ctx, req)
				if err != nil || len(plan.Steps) != 1 || plan.Decision == nil {
					b.Fatalf("plan %+v, %v", plan, err)
				}
			}
		})
	}
}
