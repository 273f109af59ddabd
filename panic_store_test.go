package contextos_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

// panickingDecisions is a decision store that panics: while armed, an
// append of a DECIDED record panics (after storing it, with keeps, as a
// driver that commits and then crashes does), and so does a lookup,
// with getPanics.
type panickingDecisions struct {
	*decision.MemoryStore
	keeps, getPanics bool
	armed            atomic.Bool
}

func (s *panickingDecisions) Append(ctx context.Context, r *decision.Record) (*decision.Record, error) {
	if !s.armed.Load() || r.Status != decision.Decided {
		return s.MemoryStore.Append(ctx, r)
	}
	if s.keeps {
		if _, err := s.MemoryStore.Append(ctx, r); err != nil {
			return nil, err
		}
	}
	panic("decision store: nil pointer dereference holding sk_live_51HyQ2mPanicValue0001")
}

func (s *panickingDecisions) Get(ctx context.Context, id string) (*decision.Record, error) {
	if s.armed.Load() && s.getPanics {
		panic("decision store: lookup crashed")
	}
	return s.MemoryStore.Get(ctx, id)
}

// A decision store whose Append panics is a store whose append failed:
// the run that refunded returns an error matching ErrPanic (the runtime
// does not crash, the panic value reaches no error), keeps its record in
// its checkpoint as unconfirmed, and a resume, a takeover or the same
// Invoke again settles it with that very record. The refund ran once and
// the run has one terminal record, whether the store kept the record
// before it panicked or not and whether its lookup panicked too.
func TestPanickingDecisionStoreIsAnAppendFailure(t *testing.T) {
	for _, keeps := range []bool{false, true} {
		for _, getPanics := range []bool{false, true} {
			for _, via := range []string{"Resume", "Takeover", "Invoke"} {
				t.Run(fmt.Sprintf("keeps=%t/get_panics=%t/%s", keeps, getPanics, via), func(t *testing.T) {
					ctx := context.Background()
					store := &panickingDecisions{MemoryStore: decision.NewMemoryStore(), keeps: keeps, getPanics: getPanics}
					// Asked again, the planner would refuse: a run that plans
					// again records a second decision.
					planner := contextostest.NewPlanner(lookupPlan(), refundPlan(1200)).Then(deniedPlan()).RepeatLast()
					h := harness(t, planner, &contextostest.Options{Runtime: contextos.Options{Decisions: store}})
					req, rc := refundRequest(t, 1200, true)
					store.armed.Store(true)
					res, err := h.Runtime.Invoke(ctx, req, rc)
					if keeps && !getPanics {
						// The store kept the record and finds it: the run
						// adopts it, as it does after an append error.
						if err != nil {
							t.Fatalf("Invoke = %v; want the stored record adopted", err)
						}
						contextostest.AssertStatus(t, res, decision.Decided)
						assertOneRecord(t, store, rc.RunID)
						contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
						return
					}
					if err == nil || !errors.Is(err, contextos.ErrPanic) || res != nil {
						t.Fatalf("Invoke = %+v, %v; want the store's panic as an error", res, err)
					}
					var pe *contextos.PanicError
					if !errors.As(err, &pe) || pe.Plugin != "decision store" {
						t.Errorf("error %v names %q, want the decision store", err, pe)
					}
					if strings.Contains(err.Error(), "sk_live") {
						t.Errorf("the error quotes the panic value: %v", err)
					}
					contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
					cp, err := loadState(ctx, h.Checkpoints, rc.RunID)
					if err != nil || cp.Unconfirmed == nil || cp.Unconfirmed.Record.Status != decision.Decided || cp.Active {
						t.Fatalf("checkpoint %+v, %v; want the record kept as unconfirmed", cp, err)
					}
					asked := len(planner.Requests())

					store.armed.Store(false)
					var done *contextos.Result
					switch via {
					case "Resume":
						done, err = h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{})
					case "Takeover":
						done, err = h.Runtime.Resume(ctx, rc.RunID, contextos.ResumeInput{Takeover: true})
					case "Invoke":
						done, err = h.Runtime.Invoke(ctx, req, rc)
					}
					if err != nil {
						t.Fatalf("%s after the panic: %v", via, err)
					}
					contextostest.AssertStatus(t, done, decision.Decided)
					if done.Record.RecordID != cp.Unconfirmed.Record.RecordID {
						t.Errorf("settled with %s, want the run's own record %s", done.Record.RecordID, cp.Unconfirmed.Record.RecordID)
					}
					if n := len(planner.Requests()); n != asked {
						t.Errorf("the planner was asked %d more times", n-asked)
					}
					contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
					assertOneRecord(t, store, rc.RunID)
				})
			}
		}
	}
}

// assertOneRecord checks that the run has exactly one record, a terminal
// one, in a store whose chain verifies.
func assertOneRecord(t *testing.T, store decision.Store, runID string) {
	t.Helper()
	ctx := context.Background()
	recs, err := store.List(ctx, decision.Filter{RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Status != decision.Decided {
		t.Errorf("%d records %v; want one DECIDED", len(recs), recs)
	}
	if err := store.Verify(ctx); err != nil {
		t.Errorf("Verify = %v", err)
	}
}
