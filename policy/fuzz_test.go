package policy_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/contextos/contextos/policy"
)

// FuzzEvaluateDocument: any JSON data document evaluates or fails closed
// with an *EvalError; it never panics.
func FuzzEvaluateDocument(f *testing.F) {
	f.Add([]byte(`{"request":{"context":{"identity_verified":true,"refund_amount":4200}},"user":{"role":"support_agent"},"intent":"support.refund"}`))
	f.Add([]byte(`{"request":{"context":{"identity_verified":"yes","refund_amount":[1]}},"user":{"role":7},"intent":"support.refund"}`))
	f.Add([]byte(`{"request":{"context":{"signals":["fraud_signal_high",3]}},"intent":["support.refund"]}`))
	p, _, _ := load(f)
	e, err := policy.Prepare(p)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var doc map[string]any
		if json.Unmarshal(data, &doc) != nil {
			return
		}
		res, err := e.Evaluate(policy.Input{RunID: "run_fuzz", Data: policy.Document(doc)})
		if err != nil {
			if !errors.Is(err, policy.ErrEvaluation) {
				t.Fatalf("error is not ErrEvaluation: %v", err)
			}
			return
		}
		if res.Verdict == "" {
			t.Fatal("no verdict")
		}
	})
}
