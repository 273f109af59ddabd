package engine

import (
	"testing"
	"time"

	"github.com/contextos/contextos/runcontext"
)

// A resume budget that raises max_tool_calls and leaves bucket_tokens
// unset (omitempty, as the other optional limits) drops every per-bucket
// token cap the run had unless they are kept (a hostile review found the
// meter then enforced none).
func TestResumeBudgetKeepsBucketCaps(t *testing.T) {
	prev := runcontext.DefaultRunBudget()
	prev.BucketTokens = map[runcontext.Bucket]int{runcontext.BucketEvidence: 100}
	in := prev
	in.BucketTokens = nil
	in.MaxToolCalls = prev.MaxToolCalls + 5
	got := resumeBudget(prev, in)
	m := runcontext.NewMeter(got, time.Unix(0, 0))
	if err := m.ChargeTokens(runcontext.BucketEvidence, 500); err == nil {
		t.Errorf("after a resume raising max_tool_calls only, 500 evidence tokens are charged against a run capped at 100 (buckets %v)", got.BucketTokens)
	}
}

// Naming bucket_tokens in a resume budget changes the caps; the run's own
// map is never shared with the resumed budget.
func TestResumeBudgetBucketCapsAreExplicit(t *testing.T) {
	prev := runcontext.DefaultRunBudget()
	prev.BucketTokens = map[runcontext.Bucket]int{runcontext.BucketEvidence: 100}
	in := prev
	in.BucketTokens = map[runcontext.Bucket]int{runcontext.BucketEvidence: 1000}
	if got := resumeBudget(prev, in); got.BucketTokens[runcontext.BucketEvidence] != 1000 {
		t.Errorf("explicit caps %v", got.BucketTokens)
	}
	in.BucketTokens = nil
	got := resumeBudget(prev, in)
	got.BucketTokens[runcontext.BucketEvidence] = 7
	if prev.BucketTokens[runcontext.BucketEvidence] != 100 {
		t.Error("the resumed budget shares the run's bucket map")
	}
}
