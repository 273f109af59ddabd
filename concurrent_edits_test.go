package contextos_test

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/internal/deepcheck"
)

// hostile appends into (deepcheck.Overrun) and edits (Vandalize)
// everything v reaches.
func hostile(v any) {
	rv := reflect.ValueOf(v)
	deepcheck.Overrun(rv)
	deepcheck.Vandalize(rv)
}

// hostileDecisions is a decision store (not the module's: the runtime
// hands it a copy) that keeps the records it is given without copying,
// and appends into and edits each, at once and again at every later
// append of any run. (What it returns is not edited later: the run that
// asked reads it once the store returns, and an edit then would be a
// race no copy can undo.)
type hostileDecisions struct {
	*decision.MemoryStore
	mu   sync.Mutex
	kept []*decision.Record
}

func (s *hostileDecisions) Append(ctx context.Context, r *decision.Record) (*decision.Record, error) {
	out, err := s.MemoryStore.Append(ctx, r)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kept = append(s.kept, r)
	hostile(s.kept)
	return out, err
}

// TestConcurrentRunsWithHostilePluginsGiveWhatTheyGiveAlone: the runs
// of a runtime share its prepared packs (their compiled contexts' lists
// are cut from shared arrays per compile), and each run's decision
// lists, policy refs and records are cut from arrays of their own. Runs
// going through one runtime at once, whose planner appends into and
// edits every request it is given and whose decision store appends into
// and edits the records it is given (and those of other runs, later),
// each give the compiled context, status, tool results and record they
// give alone, with plug-ins that edit nothing. Run it with -race.
func TestConcurrentRunsWithHostilePluginsGiveWhatTheyGiveAlone(t *testing.T) {
	cases := []mixedCase{{500, true, ""}, {150000, true, ""}, {1200, false, ""}, {1200, true, ""}}
	const rounds = 2
	// The planner plans as mixedPlanner does, from the request as it was
	// at the run's first turn: the copy a run hands its planner is the
	// planner's own for the run, so what it edits it reads next turn.
	planner := func(edit bool) contextos.Planner {
		var mu sync.Mutex
		first := map[string]*contextos.PlanRequest{}
		return contextos.PlannerFunc(func(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
			id, _, _ := strings.Cut(req.Run.RunID, "~")
			mu.Lock()
			if first[id] == nil {
				first[id] = &contextos.PlanRequest{Request: req.Request.Clone()}
			}
			in := first[id]
			mu.Unlock()
			p, err := mixedPlanner(ctx, in)
			if edit {
				hostile(req)
			}
			return p, err
		})
	}
	// The record, but for its chain (the runs of one store chain their
	// records in the order they end).
	outcome := func(t *testing.T, res *contextos.Result) string {
		rec := *res.Record
		rec.PrevRecordHash, rec.RecordHash = "", ""
		if rec.Replay != nil {
			rp := *rec.Replay
			rp.RecordHash = ""
			rec.Replay = &rp
		}
		return summary(res) + " " + asJSON(t, &rec) + " " + asJSON(t, res.Compiled)
	}
	want := map[string]string{}
	for i := range rounds * len(cases) {
		c := cases[i%len(cases)]
		h := harness(t, planner(false), nil)
		req, rc := c.request(t, i)
		res, err := h.Runtime.Invoke(context.Background(), req, rc)
		if err != nil {
			t.Fatalf("case %+v alone: %v", c, err)
		}
		want[rc.RunID] = outcome(t, res)
	}
	store := &hostileDecisions{MemoryStore: decision.NewMemoryStore()}
	h := harness(t, planner(true), &contextostest.Options{Runtime: contextos.Options{Decisions: store}})
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]string{}
	for i := range rounds * len(cases) {
		c := cases[i%len(cases)]
		req, rc := c.request(t, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := h.Runtime.Invoke(context.Background(), req, rc)
			if err != nil {
				t.Errorf("case %+v: %v", c, err)
				return
			}
			o := outcome(t, res)
			mu.Lock()
			got[rc.RunID] = o
			mu.Unlock()
		}()
	}
	wg.Wait()
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s:\n got %s\nwant %s (run alone, nothing edited)", id, got[id], w)
		}
	}
	if err := store.Verify(context.Background()); err != nil {
		t.Fatalf("the store's chain: %v", err)
	}
}
