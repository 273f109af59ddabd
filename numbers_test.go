package contextos_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/pgtest"
	"github.com/contextos/contextos/store/postgres"
	"github.com/contextos/contextos/store/sqlite"
)

// recordStores are the decision stores a run's records go to: in memory,
// SQLite and PostgreSQL (skipped without CONTEXTOS_POSTGRES_URL).
var recordStores = []struct {
	name string
	open func(t *testing.T) decision.Store
}{
	{"memory", func(*testing.T) decision.Store { return decision.NewMemoryStore() }},
	{"sqlite", func(t *testing.T) decision.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "contextos.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s.Records()
	}},
	{"postgres", func(t *testing.T) decision.Store {
		s, err := postgres.Open(context.Background(), pgtest.URL(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s.Records()
	}},
}

// A number that cannot round-trip (a count or cost beyond 2^53−1) is
// refused where it enters — a planner's usage, an adapter's outcome —
// and never reaches a record: the run ends with its record, and every
// record of the log still reads (List, Get and Verify) in memory, SQLite
// and PostgreSQL. A planner reporting 2^63−1 tokens used to make every
// record of the log unreadable.
func TestUnsafeNumbersNeverEnterARecord(t *testing.T) {
	type hostile struct {
		name string
		// turns are the planner's answers in order (the last repeats).
		turns []func() (*contextos.Plan, error)
		// lookup, when set, is the order lookup's outcome.
		lookup *gateway.Outcome
		reason string // in the record's rationale
		field  string // the outcome field the gateway refuses
	}
	withUsage := func(u contextos.PlanUsage) func() (*contextos.Plan, error) {
		return func() (*contextos.Plan, error) { p := deniedPlan(); p.Usage = u; return p, nil }
	}
	lookupThenDeny := []func() (*contextos.Plan, error){
		func() (*contextos.Plan, error) { return lookupPlan(), nil },
		func() (*contextos.Plan, error) { return deniedPlan(), nil },
	}
	delivered := map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200}
	tests := []hostile{
		{name: "planner tokens 2^63−1", turns: []func() (*contextos.Plan, error){withUsage(contextos.PlanUsage{Tokens: math.MaxInt})}, reason: "invalid_usage"},
		{name: "planner tokens 2^53", turns: []func() (*contextos.Plan, error){withUsage(contextos.PlanUsage{Tokens: 1 << 53})}, reason: "invalid_usage"},
		{name: "planner input tokens 2^63−1", turns: []func() (*contextos.Plan, error){withUsage(contextos.PlanUsage{InputTokens: math.MaxInt, OutputTokens: 5})}, reason: "invalid_usage"},
		{name: "planner cached tokens 2^53", turns: []func() (*contextos.Plan, error){withUsage(contextos.PlanUsage{InputTokens: 1 << 53, CachedInputTokens: 1 << 53})}, reason: "invalid_usage"},
		{name: "planner cost 1e300 cents", turns: []func() (*contextos.Plan, error){withUsage(contextos.PlanUsage{Tokens: 10, CostCents: 1e300})}, reason: "invalid_usage"},
		{name: "failed turn with tokens 2^63−1", turns: []func() (*contextos.Plan, error){func() (*contextos.Plan, error) {
			return nil, &contextos.PlanUsageError{Usage: contextos.PlanUsage{Tokens: math.MaxInt}, Err: errors.New("cut off")}
		}}, reason: "invalid_usage"},
		// Each count is valid; their sum is not, and saturates.
		{name: "failed turn with 2^53−1 input and output tokens", turns: []func() (*contextos.Plan, error){func() (*contextos.Plan, error) {
			return nil, &contextos.PlanUsageError{Usage: contextos.PlanUsage{InputTokens: 1<<53 - 1, OutputTokens: 1<<53 - 1}, Err: errors.New("cut off")}
		}}, reason: "budget_exceeded"},
		{name: "adapter tokens 2^63−1", turns: lookupThenDeny, lookup: &gateway.Outcome{Output: delivered, Tokens: math.MaxInt}, field: "tokens"},
		{name: "adapter cost 1e300 cents", turns: lookupThenDeny, lookup: &gateway.Outcome{Output: delivered, CostCents: 1e300}, field: "cost_cents"},
		{name: "adapter output int 2^62", turns: lookupThenDeny, lookup: &gateway.Outcome{Output: map[string]any{"order_id": "ord_881", "ref": int64(1 << 62)}}, field: "output"},
	}
	for _, st := range recordStores {
		t.Run(st.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					ctx := context.Background()
					store := st.open(t)
					hostileRun := false
					p := contextos.PlannerFunc(func(_ context.Context, pr *contextos.PlanRequest) (*contextos.Plan, error) {
						if !hostileRun {
							return []func() (*contextos.Plan, error){lookupThenDeny[0], lookupThenDeny[1]}[min(pr.Turn, 1)]()
						}
						return tc.turns[min(pr.Turn, len(tc.turns)-1)]()
					})
					h := bareHarness(t, p, &contextostest.Options{Runtime: contextos.Options{Decisions: store}})
					if tc.lookup != nil {
						scriptDefaults(h, "adp_orders")
						// The first run's lookup answers as usual, the hostile run's with tc.lookup.
						h.Adapter("adp_orders").On("lookup").ReturnOutput(delivered).Return(tc.lookup)
					} else {
						scriptDefaults(h, "")
					}
					t.Cleanup(func() { h.ReplayAll() }) // every run replays equal
					// A run before the hostile one: its record must stay readable.
					req, rc := refundRequest(t, 1200, true)
					req.RequestID, rc.RunID = "req_before", ""
					first, err := h.Runtime.Invoke(ctx, req, rc)
					if err != nil || first.Record == nil {
						t.Fatalf("first run = %v", err)
					}
					hostileRun = true
					req, rc = refundRequest(t, 1200, true)
					req.RequestID, rc.RunID = "req_hostile", ""
					res, err := h.Runtime.Invoke(ctx, req, rc)
					if err != nil || res.Record == nil {
						t.Fatalf("hostile run = %+v, %v; want a run that ends with its record", res, err)
					}
					if b := res.Record.BudgetUsage; b.Tokens > 1<<53-1 || b.Tokens < 0 || b.CostUSDCents > 1<<53-1 {
						t.Errorf("record budget_usage %+v holds a number beyond 2^53−1", b)
					}
					if !strings.Contains(res.Record.Rationale.Summary, tc.reason) {
						t.Errorf("rationale %q, want %q", res.Record.Rationale.Summary, tc.reason)
					}
					if tc.lookup != nil {
						// The outcome was refused at the gateway, naming the field.
						var refused *gateway.ToolResultEnvelope
						for _, r := range h.Transcript.Results() {
							if r.RunID == res.Record.RunID && r.CapabilityID == "adp_orders.lookup" {
								refused = &r
							}
						}
						if refused == nil || refused.Status != gateway.StatusError || refused.Error == nil || refused.Error.Details["field"] != tc.field {
							t.Errorf("the hostile lookup's result = %+v, want an error naming %s", refused, tc.field)
						}
					}
					all, err := store.List(ctx, decision.Filter{})
					if err != nil || len(all) != 2 {
						t.Fatalf("List = %d records, %v; want both runs' records", len(all), err)
					}
					for _, r := range all {
						if _, err := store.Get(ctx, r.RecordID); err != nil {
							t.Errorf("Get(%s) = %v", r.RecordID, err)
						}
					}
					if err := store.Verify(ctx); err != nil {
						t.Errorf("Verify = %v", err)
					}
				})
			}
		})
	}
}
