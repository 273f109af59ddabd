package contextos_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

// benchRuntime is the 1200 refund, all in memory, with the default
// replay sampling (no packet for a DECIDED run).
func benchRuntime(b *testing.B) *contextostest.Harness {
	h := contextostest.New(b, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), [][]byte{readTestdata(b, "ctxpack.support-1.0.0.json")},
		&contextostest.Options{Runtime: contextos.Options{Evidence: evidence(b)}, Scopes: map[string][]string{"adp_payments.issue_refund": {"payments.refund"}}})
	scriptDefaults(h, "")
	return h
}

func BenchmarkInvokeRefund(b *testing.B) {
	h := benchRuntime(b)
	req, rc := refundRequest(b, 1200, true)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		rc.RunID = "run_bench_" + strconv.Itoa(i)
		res, err := h.Runtime.Invoke(ctx, req, rc)
		if err != nil || res.Status != decision.Decided {
			b.Fatalf("%v %v", res.Status, err)
		}
	}
}

func BenchmarkInvokeRefundParallel(b *testing.B) {
	h := benchRuntime(b)
	ctx := context.Background()
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req, rc := refundRequest(b, 1200, true)
		for pb.Next() {
			rc := rc.Clone()
			rc.RunID = "run_bench_" + strconv.FormatInt(n.Add(1), 10)
			res, err := h.Runtime.Invoke(ctx, req, rc)
			if err != nil || res.Status != decision.Decided {
				b.Errorf("%v %v", res, err)
				return
			}
		}
	})
}
