// Package contextostest is the harness hosts unit-test their agents with:
// a scripted planner, a test runtime with everything in memory around a
// given pack (signed with a throwaway key into an in-memory registry, one
// scripted adapter per adapter of the pack), and assertions on the outcome
// — status, outcome, calls made, approvals pending.
package contextostest

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"github.com/contextos/contextos/internal/sortedkeys"
	"slices"
	"sync"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/internal/engine"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// T is the part of testing.TB the harness uses; *testing.T and
// *testing.B satisfy it. The harness returns nil after Fatalf, so a T
// whose Fatalf does not stop the goroutine sees no panic from it.
type T interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Planner is a scripted planner: turn i returns the i-th plan (or what the
// i-th function returns). Asked for a turn it has no script for, it fails,
// which the runtime turns into an ESCALATED hard stop. Safe for concurrent
// use; it keeps every request it received.
type Planner struct {
	mu       sync.Mutex
	turns    []func(*contextos.PlanRequest) (*contextos.Plan, error)
	repeat   bool
	requests []*contextos.PlanRequest
}

// NewPlanner returns a planner that answers turn i with plans[i].
func NewPlanner(plans ...*contextos.Plan) *Planner {
	p := &Planner{}
	for _, pl := range plans {
		p.Then(pl)
	}
	return p
}

// Then adds a turn that returns plan as a model's decoded answer would
// be: plan is encoded and decoded once, when Then is called (its numbers
// become float64, as from a model's JSON), and each time the turn is
// asked it returns a fresh copy of that, so neither the runtime nor the
// caller shares the other's plan. A change to plan after Then is not seen.
func (p *Planner) Then(plan *contextos.Plan) *Planner {
	decoded, err := clonePlan(plan)
	return p.ThenFunc(func(*contextos.PlanRequest) (*contextos.Plan, error) {
		if err != nil {
			return nil, err
		}
		return engine.ClonePlan(decoded), nil
	})
}

// ThenFunc adds a turn decided by f (which sees the results so far).
func (p *Planner) ThenFunc(f func(req *contextos.PlanRequest) (*contextos.Plan, error)) *Planner {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.turns = append(p.turns, f)
	return p
}

// RepeatLast makes the last turn answer every later turn too.
func (p *Planner) RepeatLast() *Planner {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.repeat = true
	return p
}

// Plan implements contextos.Planner.
func (p *Planner) Plan(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.requests = append(p.requests, req)
	i := req.Turn
	if p.repeat && i >= len(p.turns) && len(p.turns) > 0 {
		i = len(p.turns) - 1
	}
	var f func(*contextos.PlanRequest) (*contextos.Plan, error)
	if i < len(p.turns) {
		f = p.turns[i]
	}
	p.mu.Unlock()
	if f == nil {
		return nil, fmt.Errorf("contextostest: the scripted planner has no turn %d", req.Turn+1)
	}
	return f(req)
}

// Requests returns the plan requests received, in order.
func (p *Planner) Requests() []*contextos.PlanRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

// clonePlan deep-copies a scripted plan so the runtime never shares it.
func clonePlan(p *contextos.Plan) (*contextos.Plan, error) {
	if p == nil {
		return nil, nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("contextostest: scripted plan: %w", err)
	}
	var c contextos.Plan
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("contextostest: scripted plan: %w", err)
	}
	return &c, nil
}

// Options tunes a Harness.
type Options struct {
	// Runtime are further runtime options. Adapters, Transcripts and
	// the stores the harness exposes are filled in when unset.
	Runtime contextos.Options
	// Scopes are the delegation scopes each capability requires, by
	// capability id ("adp_payments.issue_refund").
	Scopes map[string][]string
	// Now is the clock (setting Runtime.Now as well is refused). Default:
	// FixedTime, so runs are reproducible.
	Now func() time.Time
}

// Harness is a test runtime with everything in memory.
type Harness struct {
	Runtime     *contextos.Runtime
	Registry    *pack.MemoryRegistry
	Keys        *runcontext.StaticKeys
	Decisions   *decision.MemoryStore
	Checkpoints *contextos.InMemoryCheckpoints
	Replays     *contextos.InMemoryPackets
	packets     *packetLog
	Transcript  *gatewaytest.Recorder
	adapters    map[string]*gatewaytest.ScriptedAdapter
	t           T
}

// FixedTime is the default harness clock: 2026-05-04T09:31:00Z.
func FixedTime() time.Time { return time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC) }

// New builds a harness around the pack documents (JSON, unsigned): each is
// signed with a throwaway key and published in an in-memory registry, and each
// adapter in their tool registries gets a scripted adapter (script it with
// Adapter). The pack's ontology is declared to the runtime.
func New(t T, planner contextos.Planner, packs [][]byte, opts *Options) *Harness {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = 7
	key := ed25519.NewKeyFromSeed(seed)
	kid := pack.KeyID(key.Public().(ed25519.PublicKey))
	// The packs may name the host's redaction rules: validation (when they
	// are signed and stored) must know them.
	vopts := &pack.ValidateOptions{RedactionRules: sortedkeys.Of(o.Runtime.Gateway.Redactors)}
	h := &Harness{Registry: pack.NewMemoryRegistry(vopts), Keys: runcontext.NewStaticKeys(map[string]ed25519.PublicKey{kid: key.Public().(ed25519.PublicKey)}),
		adapters: map[string]*gatewaytest.ScriptedAdapter{}, t: t}
	ro := o.Runtime
	script := len(ro.Adapters) == 0
	for _, doc := range packs {
		p, err := pack.Decode(doc)
		if err != nil {
			t.Fatalf("contextostest: pack: %v", err)
			return nil
		}
		signed, err := pack.Sign(p, kid, key, vopts)
		if err != nil {
			t.Fatalf("contextostest: sign: %v", err)
			return nil
		}
		e, err := h.Registry.Put(context.Background(), signed)
		if err != nil {
			t.Fatalf("contextostest: registry: %v", err)
			return nil
		}
		var review []pack.Signoff // a reviewer of its own in each role
		for _, role := range pack.DefaultReviewRoles() {
			review = append(review, pack.Signoff{Reviewer: "contextostest." + string(role), Role: role})
		}
		if _, err := pack.Publish(context.Background(), h.Registry, e.Ref, "contextostest", review...); err != nil {
			t.Fatalf("contextostest: publish: %v", err)
			return nil
		}
		ont := p.IntelligenceRefs.Ontology
		if ont.Namespace != "" && !slices.Contains(ro.Ontologies, ont.Namespace+"@"+ont.Version) {
			ro.Ontologies = append(ro.Ontologies, ont.Namespace+"@"+ont.Version)
		}
		if script {
			for _, a := range p.ToolingLayer.AdapterRegistry {
				if h.adapters[a.AdapterID] != nil {
					continue
				}
				sa := gatewaytest.NewScriptedAdapter()
				h.adapters[a.AdapterID] = sa
				caps := map[string]gateway.Capability{}
				for _, c := range a.Capabilities {
					caps[c] = gateway.Capability{Scopes: o.Scopes[a.AdapterID+"."+c]}
				}
				ro.Adapters = append(ro.Adapters, gateway.Registration{AdapterID: a.AdapterID, Adapter: sa, Capabilities: caps})
			}
		}
	}
	if ro.Transcripts == nil {
		h.Transcript = &gatewaytest.Recorder{}
		ro.Transcripts = h.Transcript
	}
	if ro.Decisions == nil {
		h.Decisions = decision.NewMemoryStore()
		ro.Decisions = h.Decisions
	}
	if ro.Replays == nil {
		h.Replays = contextos.NewInMemoryPackets()
		ro.Replays = h.Replays
	}
	h.packets = &packetLog{PacketStore: ro.Replays}
	ro.Replays = h.packets
	switch {
	case ro.Now != nil && o.Now != nil:
		t.Fatalf("contextostest: both Options.Now and Options.Runtime.Now are set; set one")
		return nil
	case ro.Now == nil && o.Now != nil:
		ro.Now = o.Now
	case ro.Now == nil:
		ro.Now = FixedTime
	}
	if ro.Checkpoints == nil {
		// Claims' leases are counted on the harness's clock: a test
		// advances it to let a claim lapse.
		h.Checkpoints = contextos.NewInMemoryCheckpoints()
		h.Checkpoints.Now = ro.Now
		ro.Checkpoints = h.Checkpoints
	}
	if ro.Identity.Keys == nil {
		// Without claim keys the harness cannot verify identity claims, so
		// it waives them (records say claim_verification "waived"); a test
		// of identity sets Options.Runtime.Identity.
		ro.Identity.AllowUnclaimed = true
	}
	rt, err := contextos.New(planner, h.Registry, h.Keys, &ro)
	if err != nil {
		t.Fatalf("contextostest: runtime: %v", err)
		return nil
	}
	h.Runtime = rt
	return h
}

// Adapter returns the scripted adapter registered for adapterID.
func (h *Harness) Adapter(adapterID string) *gatewaytest.ScriptedAdapter {
	h.t.Helper()
	a := h.adapters[adapterID]
	if a == nil {
		h.t.Fatalf("contextostest: no scripted adapter %q (the harness scripts the packs' adapters unless Options.Runtime.Adapters is set)", adapterID)
		return nil
	}
	return a
}

// Invoke runs the request and fails the test if Invoke returns an error.
func (h *Harness) Invoke(req *runcontext.InvokeRequest, rc *runcontext.RunContext) *contextos.Result {
	h.t.Helper()
	res, err := h.Runtime.Invoke(context.Background(), req, rc)
	if err != nil {
		h.t.Fatalf("Invoke: %v", err)
		return nil
	}
	return res
}

// Approver is who approves a pending request in Approve and Approval.
type Approver struct {
	// UserID is the approver's user id.
	UserID string
	// Role is the role the approver holds ("finance_lead").
	Role string
}

// Approve resumes a paused run with an approval of what it awaits, by
// the approver, and fails the test on an error.
func (h *Harness) Approve(res *contextos.Result, by Approver) *contextos.Result {
	h.t.Helper()
	if res.Pending == nil {
		h.t.Fatalf("Approve: run %s is %s, not awaiting an approval", res.RunID, res.Status)
		return nil
	}
	a := Approval(res.Pending, by, FixedTime())
	out, err := h.Runtime.Resume(context.Background(), res.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
	if err != nil {
		h.t.Fatalf("Resume: %v", err)
		return nil
	}
	return out
}

// Approval is an approval of a pending request by the approver, decided
// at at.
func Approval(p *gateway.ApprovalRequest, by Approver, at time.Time) gateway.Approval {
	return gateway.Approval{ApprovalID: "apr_" + p.ToolCallID, GateID: p.GateID, ActionDigest: p.ActionDigest,
		Approver: by.UserID, ApproverRole: by.Role, DecidedAt: at}
}

// Replay replays the run's captured packet and fails the test when there
// is none or it cannot be replayed.
func (h *Harness) Replay(res *contextos.Result) *replay.Report {
	h.t.Helper()
	if res.ReplayPacketID == "" {
		h.t.Fatalf("Replay: run %s captured no replay packet (set Options.Runtime.ReplaySampleRate to 1)", res.RunID)
		return nil
	}
	p, err := h.packets.Get(context.Background(), res.ReplayPacketID)
	if err != nil {
		h.t.Fatalf("Replay: %v", err)
		return nil
	}
	out, err := h.Runtime.Replay(context.Background(), p)
	if err != nil {
		h.t.Fatalf("Replay: %v", err)
		return nil
	}
	return out
}

// ReplayAll replays every captured packet and fails the test for each
// one that is not replay_equal; it returns how many it replayed.
func (h *Harness) ReplayAll() int {
	h.t.Helper()
	ids := h.PacketIDs()
	for _, id := range ids {
		p, err := h.packets.Get(context.Background(), id)
		if err != nil {
			h.t.Errorf("ReplayAll: %v", err)
			continue
		}
		out, err := h.Runtime.Replay(context.Background(), p)
		if err != nil {
			h.t.Errorf("ReplayAll: %s: %v", id, err)
			continue
		}
		if out.Status != replay.ReplayEqual {
			h.t.Errorf("ReplayAll: %s = %s: %+v", id, out.Status, out.Diffs)
		}
	}
	return len(ids)
}

// PacketIDs returns the ids of the replay packets the runtime saved,
// sorted, each once.
func (h *Harness) PacketIDs() []string {
	h.packets.mu.Lock()
	defer h.packets.mu.Unlock()
	return sortedkeys.Of(h.packets.ids)
}

// packetLog is the runtime's packet store as the harness gives it: it
// notes the id of every packet saved.
type packetLog struct {
	contextos.PacketStore
	mu  sync.Mutex
	ids map[string]bool
}

func (l *packetLog) Save(ctx context.Context, p *replay.Packet) error {
	id := p.ReplayPacketID // before the host's store, which may edit p, has it
	if err := l.PacketStore.Save(ctx, p); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ids == nil {
		l.ids = map[string]bool{}
	}
	l.ids[id] = true
	return nil
}

// AssertStatus fails the test unless the run ended with status.
func AssertStatus(t T, res *contextos.Result, status decision.Status) {
	t.Helper()
	if res.Status != status {
		t.Errorf("run %s status = %s, want %s (%s)", res.RunID, res.Status, status, res.Record.Rationale.Summary)
	}
}

// AssertOutcome fails the test unless the run's record has outcome.
func AssertOutcome(t T, res *contextos.Result, outcome string) {
	t.Helper()
	if res.Record.Outcome != outcome {
		t.Errorf("run %s outcome = %q, want %q (%s: %s)", res.RunID, res.Record.Outcome, outcome, res.Status, res.Record.Rationale.Summary)
	}
}

// AssertCalls fails the test unless capability ("adapter.capability" or a
// bare capability name) reached adapter n times.
func AssertCalls(t T, adapter *gatewaytest.ScriptedAdapter, capability string, n int) {
	t.Helper()
	if got := adapter.CallCount(capability); got != n {
		t.Errorf("%s called %d times, want %d", capability, got, n)
	}
}

// AssertPending fails the test unless the run awaits an approval on gateID.
func AssertPending(t T, res *contextos.Result, gateID string) {
	t.Helper()
	switch {
	case res.Status != decision.Deferred || res.Pending == nil:
		t.Errorf("run %s is %s, want DEFERRED awaiting %s", res.RunID, res.Status, gateID)
	case res.Pending.GateID != gateID:
		t.Errorf("run %s awaits %s, want %s", res.RunID, res.Pending.GateID, gateID)
	}
}

// AssertReplayEqual fails the test unless the replay equals its packet.
func AssertReplayEqual(t T, r *replay.Report) {
	t.Helper()
	if r.Status != replay.ReplayEqual {
		t.Errorf("replay = %s: %+v", r.Status, r.Diffs)
	}
}
