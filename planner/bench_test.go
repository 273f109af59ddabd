package planner_test

import (
	"testing"

	"github.com/contextos/contextos/planner"
)

// BenchmarkRender renders the canonical refund request at its turn 2
// (the first turn's calls and results, a replan reason).
func BenchmarkRender(b *testing.B) {
	req := canonicalRequests(b)[2]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := planner.Render(req, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse parses the canonical refund answer: the refund call and
// the decision.
func BenchmarkParse(b *testing.B) {
	c := render(b, canonicalRequests(b)[2], nil)
	resp := refundCalls(b, c)
	b.ReportAllocs()
	for b.Loop() {
		if p := c.Parse(resp); p.Decision == nil {
			b.Fatal(p.Replan)
		}
	}
}

// BenchmarkTurn is a whole turn's work in this package: render, then
// parse.
func BenchmarkTurn(b *testing.B) {
	req := canonicalRequests(b)[2]
	resp := refundCalls(b, render(b, req, nil))
	b.ReportAllocs()
	for b.Loop() {
		c, err := planner.Render(req, nil)
		if err != nil {
			b.Fatal(err)
		}
		if p := c.Parse(resp); p.Decision == nil {
			b.Fatal(p.Replan)
		}
	}
}
