package policy_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/contextos/contextos/policy"
)

// FuzzEvaluateDocument: any JSON data document evaluates or fails closed
// with an *Error; it never panics.
func FuzzEvaluateDocument(f *testing.F) {
	f.Add([]byte(`{"request":{"context":{"identity_verified":true,"refund_amount":4200}},"user":{"role":"support_agent"},"intent":"support.refund"}`))
	f.Add([]byte(`{"request":{"context":{"identity_verified":"yes","refund_amount":[1]}},"user":{"role":7},"intent":"support.refund"}`))
	f.Add([]byte(`{"request":{"context":{"signals":["fraud_signal_high",3]}},"intent":["support.refund"]}`))
	p, _, _ := load(f)
	e, err := policy.Prepare(p, nil)
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

// FuzzRuleExpression: any expression as a rule's condition is prepared or
// refused with an *Error, and evaluates or fails closed with an
// *Error (and no result); never a panic, never unbounded work.
func FuzzRuleExpression(f *testing.F) {
	f.Add([]byte(`{"and":[{"==":[{"var":"user.role"},"support_agent"]},{">":[{"var":"request.context.refund_amount"},3000]}]}`))
	f.Add([]byte(`{"reduce":[{"var":"request.context.items"},{"cat":[{"var":"accumulator"},{"var":"accumulator"}]},"ab"]}`))
	f.Add([]byte(`{"some":[{"merge":[[1,2],{"var":"request.context.items"}]},{"/":[0,{"var":""}]}]}`))
	f.Add([]byte(`{"<":[{"%":[{"var":"request.context.refund_amount"},0]},1]}`))
	p, req, rc := load(f)
	items := make([]any, 100)
	for i := range items {
		items[i] = float64(i)
	}
	req.Input.Context["items"] = items
	doc := policy.NewDocument(req.Input, rc)
	f.Fuzz(func(t *testing.T, expr []byte) {
		q := *p
		q.PolicyLayer.PolicyBundles = slices.Clone(p.PolicyLayer.PolicyBundles)
		b := &q.PolicyLayer.PolicyBundles[0]
		b.PolicyDSL.Rules = slices.Clone(b.PolicyDSL.Rules)
		b.PolicyDSL.Rules[1].If = expr
		e, err := policy.Prepare(&q, &policy.Options{MaxOperations: 5000, MaxBytes: 1 << 16})
		if err != nil {
			if !errors.Is(err, policy.ErrPrepare) {
				t.Fatalf("error is not ErrPrepare: %v", err)
			}
			return
		}
		res, err := e.Evaluate(policy.Input{RunID: "run_fuzz", Data: doc})
		if err != nil {
			if !errors.Is(err, policy.ErrEvaluation) || res != nil {
				t.Fatalf("Evaluate = %v, %v", res, err)
			}
			return
		}
		if res.Verdict == "" {
			t.Fatal("no verdict")
		}
	})
}
