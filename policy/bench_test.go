package policy_test

import (
	"testing"

	"github.com/contextos/contextos/policy"
)

func BenchmarkPolicyEvaluateCanonical(b *testing.B) {
	p, req, rc := load(b)
	e, err := policy.Prepare(p, nil)
	if err != nil {
		b.Fatal(err)
	}
	in := policy.Input{RunID: rc.RunID, Data: policy.NewDocument(req.Input, rc)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Evaluate(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPolicyPrepareCanonical(b *testing.B) {
	p, _, _ := load(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := policy.Prepare(p, nil); err != nil {
			b.Fatal(err)
		}
	}
}
