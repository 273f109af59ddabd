package gateway_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// Runs of two packs bound through one gateway at once (the bindings and
// call metadata it builds once and shares) each enforce their own pack's
// constraints and carry their own pack's call metadata, whatever the
// other runs' adapters do to the metadata they are handed. Run it with
// -race.
func TestRunsOfTwoPacksThroughOneGatewayConcurrently(t *testing.T) {
	f, pa, pbp, gw, rec, _, wantMeta := twoPacks(t)
	// Both packs, and copies of each that share its memos (At, WithForm).
	packs := []*compiler.Prepared{pa, pbp, pa.At(f.now), pbp.WithForm(compiler.Form2)}
	const runs = 16
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := i % len(packs)
			which := k % 2 // 0: pack a, 1: pack b
			rc := f.rc.Clone()
			rc.RunID = fmt.Sprintf("run_binding_conc_%02d", i)
			cc, err := packs[k].Compile(ctx, f.req, rc)
			if err != nil {
				errs <- err
				return
			}
			run, err := gw.NewRun(gateway.RunConfig{Prepared: packs[k], Compiled: cc, Request: f.req, RunContext: rc, Meter: runcontext.NewMeter(rc.RunBudget, f.now)}, nil)
			if err != nil {
				errs <- err
				return
			}
			small := refundCall(500)
			small.Step.Index = 2
			if res, err := run.Call(ctx, small); err != nil || res.Status != gateway.StatusCompleted {
				errs <- fmt.Errorf("run %d: a refund of 500: %v %+v, want completed", i, err, res)
				return
			}
			res, err := run.Call(ctx, refundCall(2000))
			if err != nil {
				errs <- err
				return
			}
			switch which {
			case 0:
				if res.Status != gateway.StatusCompleted {
					errs <- fmt.Errorf("run %d (pack a): %s %+v, want completed", i, res.Status, res.Error)
				}
			case 1:
				if res.Status != gateway.StatusRejected || res.Error == nil || !strings.Contains(res.Error.Message, "above the maximum 1000") {
					errs <- fmt.Errorf("run %d (pack b): %s %+v, want rejected above the maximum 1000", i, res.Status, res.Error)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n := 0
	for _, c := range rec.Calls() {
		var i int
		if _, err := fmt.Sscanf(c.RunID, "run_binding_conc_%02d", &i); err != nil {
			continue
		}
		n++
		if diff := cmp.Diff(wantMeta[(i%len(packs))%2], c.Metadata); diff != "" {
			t.Errorf("run %s: call metadata (-want +got):\n%s", c.RunID, diff)
		}
	}
	if n == 0 {
		t.Fatal("no call recorded")
	}
}
