package contextos_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
)

// cancelAt cancels the run's context from inside one stage and fails it
// with the context's error, as a plug-in honouring ctx does.
type cancelAt struct {
	cancel context.CancelFunc
}

func (c *cancelAt) fail(context.Context) error {
	c.cancel()
	// A store may be handed a context detached from the caller's (the
	// runtime saves a stopped run's record after a cancel): the error is
	// the caller's cancellation either way.
	return fmt.Errorf("plug-in: %w", context.Canceled)
}

type cancelEvidence struct{ *cancelAt }

func (c cancelEvidence) Evidence(ctx context.Context, _ compiler.EvidenceQuery) ([]compiler.EvidenceItem, error) {
	return nil, c.fail(ctx)
}

type cancelCheckpoints struct {
	*cancelAt
	contextos.CheckpointStore
	n, at int
}

func (c *cancelCheckpoints) Save(ctx context.Context, cp *contextos.Checkpoint) error {
	c.n++
	if c.n == c.at {
		return c.fail(ctx)
	}
	return c.CheckpointStore.Save(ctx, cp)
}

type cancelDecisions struct {
	*cancelAt
	decision.Store
}

func (c cancelDecisions) Append(ctx context.Context, r *decision.Record) (*decision.Record, error) {
	return nil, c.fail(ctx)
}

// A context cancelled while the run is in any stage ends the call the
// way Invoke documents, with the cancellation kept through every layer:
// where Invoke returns an error (the compile, an evidence source's
// error; a checkpoint or decision store failing with the caller's
// cancellation) it is errors.Is(err, context.Canceled) with the
// runtime's words around it; where the run had started and the
// cancellation reached it through the planner or an adapter call, the
// run stops as a governed outcome: an ESCALATED record whose reason
// starts "canceled: ", resumable from its checkpoint.
func TestCancelledContextIsKeptThroughEveryLayer(t *testing.T) {
	cases := []struct {
		name string
		opts func(c *cancelAt) (*contextostest.Options, contextos.Planner)
		// governed: the run stops with a resumable ESCALATED record
		// rather than an error.
		governed bool
	}{
		{"compile", func(c *cancelAt) (*contextostest.Options, contextos.Planner) {
			return &contextostest.Options{Runtime: contextos.Options{Evidence: cancelEvidence{c}}}, contextostest.NewPlanner(lookupPlan())
		}, false},
		{"planner", func(c *cancelAt) (*contextostest.Options, contextos.Planner) {
			return nil, contextos.PlannerFunc(func(ctx context.Context, _ *contextos.PlanRequest) (*contextos.Plan, error) { return nil, c.fail(ctx) })
		}, true},
		{"adapter call", func(c *cancelAt) (*contextostest.Options, contextos.Planner) {
			orders := gateway.AdapterFunc(func(ctx context.Context, _ *gateway.Call) (*gateway.Outcome, error) { return nil, c.fail(ctx) })
			regs := []gateway.Registration{{AdapterID: "adp_orders", Adapter: orders, Capabilities: map[string]gateway.Capability{"lookup": {}}}}
			return &contextostest.Options{Runtime: contextos.Options{Adapters: regs}}, contextostest.NewPlanner(lookupPlan())
		}, true},
		{"checkpoint save", func(c *cancelAt) (*contextostest.Options, contextos.Planner) {
			return &contextostest.Options{Runtime: contextos.Options{Checkpoints: &cancelCheckpoints{cancelAt: c, CheckpointStore: contextos.NewInMemoryCheckpoints(), at: 1}}}, contextostest.NewPlanner(lookupPlan())
		}, false},
		// Saves: the claim, the planner's spend after each turn, the
		// pause's. A failed save of the spend does not stop the run: the
		// cancellation reaches it next, as a governed stop.
		{"checkpoint save of the planner's spend", func(c *cancelAt) (*contextostest.Options, contextos.Planner) {
			return &contextostest.Options{Runtime: contextos.Options{Checkpoints: &cancelCheckpoints{cancelAt: c, CheckpointStore: contextos.NewInMemoryCheckpoints(), at: 2}}}, contextostest.NewPlanner(lookupPlan())
		}, true},
		{"checkpoint save at pause", func(c *cancelAt) (*contextostest.Options, contextos.Planner) {
			return &contextostest.Options{Runtime: contextos.Options{Checkpoints: &cancelCheckpoints{cancelAt: c, CheckpointStore: contextos.NewInMemoryCheckpoints(), at: 4}}}, contextostest.NewPlanner(lookupPlan(), refundPlan(4200))
		}, false},
		{"decision append", func(c *cancelAt) (*contextostest.Options, contextos.Planner) {
			return &contextostest.Options{Runtime: contextos.Options{Decisions: cancelDecisions{cancelAt: c, Store: decision.NewMemoryStore()}}}, contextostest.NewPlanner(lookupPlan(), refundPlan(1200))
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := &cancelAt{cancel: cancel}
			opts, planner := tc.opts(c)
			h := bareHarness(t, planner, opts)
			if opts == nil || opts.Runtime.Adapters == nil {
				scriptDefaults(h, "")
			}
			req, rc := refundRequest(t, 4200, true)
			res, err := h.Runtime.Invoke(ctx, req, rc)
			if !tc.governed {
				if !errors.Is(err, context.Canceled) || res != nil {
					t.Fatalf("Invoke = %v, %v; want an error that is context.Canceled", res, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Invoke: %v", err)
			}
			if res.Status != decision.Escalated || !strings.HasPrefix(res.Record.Rationale.Summary, "canceled: ") {
				t.Fatalf("Invoke = %s %q, want ESCALATED canceled", res.Status, res.Record.Rationale.Summary)
			}
			var store contextos.CheckpointStore = h.Checkpoints
			if opts != nil && opts.Runtime.Checkpoints != nil {
				store = opts.Runtime.Checkpoints
			}
			cp, err := loadState(context.Background(), store, res.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if cp.Stopped == "" || cp.Terminal {
				t.Errorf("checkpoint stopped %q terminal %v, want a resumable hard stop", cp.Stopped, cp.Terminal)
			}
		})
	}
}
