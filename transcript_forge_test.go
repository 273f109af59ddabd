package contextos_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
)

// A resume goes on from the transcript the store holds, and the run's
// record seals that chain. The chain is a digest chain anyone who can
// write the transcript store can extend or rebuild, so a resume verifies
// it first: an entry appended while the run was paused (properly
// chained), an earlier entry changed, entries dropped, or a call entry
// whose kind was changed (a kind is outside an entry's hash, and a
// takeover counts calls by it) are refused with ErrNotResumable and
// gateway.ErrChain, and the run is not continued over them. Before the
// check, the appended result was adopted: the resumed run's DECIDED
// record sealed a chain holding a result its gateway never produced.
func TestResumeRefusesATranscriptItDidNotRecord(t *testing.T) {
	// chained recomputes the chain of run's entries from i on, as a
	// forger who can write the store does.
	chained := func(t *testing.T, run []gateway.TranscriptEntry, i int) {
		t.Helper()
		for ; i < len(run); i++ {
			e := &run[i]
			var h string
			var err error
			if e.Result != nil {
				h, err = canon.Digest(e.Result)
			} else {
				h, err = canon.Digest(e.Call)
			}
			if err != nil {
				t.Fatal(err)
			}
			e.PrevHash = gateway.GenesisHash
			if i > 0 {
				e.PrevHash = run[i-1].ChainHash
			}
			e.Seq, e.EntryHash, e.ChainHash = i, h, canon.DigestBytes([]byte(e.PrevHash+h))
		}
	}
	lastResult := func(run []gateway.TranscriptEntry) int {
		for i := len(run) - 1; i >= 0; i-- {
			if run[i].Kind == "result" {
				return i
			}
		}
		return -1
	}
	for _, tc := range []struct {
		name  string
		forge func(t *testing.T, run []gateway.TranscriptEntry) []gateway.TranscriptEntry
	}{
		{"a result appended, chained", func(t *testing.T, run []gateway.TranscriptEntry) []gateway.TranscriptEntry {
			f := run[lastResult(run)].Clone()
			f.Result.ToolCallID = "tool_forged"
			run = append(run, f)
			chained(t, run, len(run)-1)
			return run
		}},
		{"an earlier result changed, the chain rebuilt", func(t *testing.T, run []gateway.TranscriptEntry) []gateway.TranscriptEntry {
			i := lastResult(run)
			run[i] = run[i].Clone()
			run[i].Result.ToolCallID = "tool_forged"
			chained(t, run, i)
			return run
		}},
		{"an earlier result changed, not chained", func(t *testing.T, run []gateway.TranscriptEntry) []gateway.TranscriptEntry {
			i := lastResult(run)
			run[i] = run[i].Clone()
			run[i].Result.ToolCallID = "tool_forged"
			return run
		}},
		{"the last entry dropped", func(t *testing.T, run []gateway.TranscriptEntry) []gateway.TranscriptEntry {
			return run[:len(run)-1]
		}},
		{"a call's kind changed", func(t *testing.T, run []gateway.TranscriptEntry) []gateway.TranscriptEntry {
			for i := range run {
				if run[i].Kind == "call" {
					run[i].Kind = "note"
					return run
				}
			}
			t.Fatal("the paused run recorded no call")
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &rewritableTranscript{}
			h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), &contextostest.Options{Runtime: contextos.Options{Transcripts: store}})
			scriptDefaults(h, "")
			req, rc := refundRequest(t, 4200, true)
			paused := h.Invoke(req, rc)
			contextostest.AssertPending(t, paused, "GATE_FINANCE_APPROVAL")

			// The forger rewrites the run's entries in the store.
			run, err := store.RunEntries(context.Background(), paused.RunID)
			if err != nil {
				t.Fatal(err)
			}
			store.rewrite(tc.forge(t, run))

			a := contextostest.Approval(paused.Pending, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, contextostest.FixedTime())
			res, err := h.Runtime.Resume(context.Background(), paused.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
			if err == nil {
				t.Fatalf("the resume continued the run over a transcript it did not record: %s", res.Status)
			}
			if !errors.Is(err, contextos.ErrNotResumable) || !errors.Is(err, gateway.ErrChain) {
				t.Fatalf("error %v: want ErrNotResumable and gateway.ErrChain", err)
			}
		})
	}

	t.Run("the transcript as recorded", func(t *testing.T) {
		h := harness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), nil)
		scriptDefaults(h, "")
		req, rc := refundRequest(t, 4200, true)
		paused := h.Invoke(req, rc)
		done := h.Approve(paused, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"})
		if done.Status != decision.Decided {
			t.Fatalf("status %s", done.Status)
		}
	})
}

// rewritableTranscript is a transcript store a forger can rewrite.
type rewritableTranscript struct {
	mu sync.Mutex
	es []gateway.TranscriptEntry
}

func (s *rewritableTranscript) Append(_ context.Context, e gateway.TranscriptEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.es = append(s.es, e.Clone())
	return nil
}

func (s *rewritableTranscript) RunEntries(_ context.Context, run string) ([]gateway.TranscriptEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []gateway.TranscriptEntry
	for _, e := range s.es {
		if e.RunID == run {
			out = append(out, e.Clone())
		}
	}
	return out, nil
}

func (s *rewritableTranscript) rewrite(es []gateway.TranscriptEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.es = es
}
