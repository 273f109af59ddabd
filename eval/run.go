package eval

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/packview"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// Run kinds.
const (
	KindScripted = "scripted"
	KindPacket   = "packet"
)

// Run is what one golden case gave: pure data the evaluators and gates
// read. Err is set when the case could not run at all (the other members
// are then partial).
type Run struct {
	Case   string `json:"case"`
	Intent string `json:"intent"`
	Kind   string `json:"kind"`
	Expect Expect `json:"expect"`
	// Secrets are the values the case marks as secrets.
	Secrets []string `json:"-"`
	Err     string   `json:"error,omitempty"`

	// Status and Outcome are the final record's.
	Status  decision.Status `json:"status"`
	Outcome string          `json:"outcome,omitempty"`
	// Record is the final record; Records every record of the run in
	// store order (a DEFERRED record, its CLOSED record, the final one).
	Record  *decision.Record   `json:"-"`
	Records []*decision.Record `json:"-"`
	// Compiled is the run's compiled context; Ledger its ledger.
	Compiled *compiler.CompiledContext `json:"-"`
	Ledger   *compiler.ContextLedger   `json:"-"`
	// Stable reports that a second, independent run of the case compiled
	// to the same compiled_context_hash, tool manifest and budget report
	// (a packet case's recorded inputs are run twice too).
	Stable bool `json:"stable"`
	// Calls are the tool calls the run made, in transcript order.
	Calls []Call `json:"calls"`
	// Pauses are the gates the run paused on, in order.
	Pauses []string `json:"pauses,omitempty"`
	// DurationMS is the simulated time from the start of the run to its
	// end (planner turns and tool calls advance the clock by their
	// scripted latencies); a packet case's, from the recorded clock
	// readings its run read.
	DurationMS int64 `json:"duration_ms"`
	// CostCents is the cost charged to the final record.
	CostCents float64 `json:"cost_cents"`
	// Packet is the run's replay packet, captured after the run (for a
	// packet case, its run on the pack under test).
	Packet *replay.Packet `json:"-"`
	// ReplayEqual is whether the packet replayed equal (for a packet
	// case, also the recorded packet on the version it pins, when the
	// registry holds it); ReplayDiffs are the differences otherwise.
	ReplayEqual bool          `json:"replay_equal"`
	ReplayDiffs []replay.Diff `json:"replay_diffs,omitempty"`
}

// Call is one tool call of a run.
type Call struct {
	CapabilityID string                  `json:"capability_id"`
	ToolCallID   string                  `json:"tool_call_id"`
	Status       gateway.Status          `json:"status"`
	ApprovalMode runcontext.ApprovalMode `json:"approval_mode"`
	// Gate is the approval gate guarding the capability when it was
	// active for the run, else "".
	Gate string `json:"gate,omitempty"`
	// Approved reports that the call used an approval.
	Approved bool `json:"approved"`
}

// Write reports a write-class call (approval mode above read_only).
func (c Call) Write() bool { return c.ApprovalMode != "" && c.ApprovalMode != runcontext.ReadOnly }

// Succeeded reports a call that ran (ok or completed).
func (c Call) Succeeded() bool { return c.Status.Succeeded() }

// RunnerOptions configure a Runner.
type RunnerOptions struct {
	// Pack is the pack under test: golden requests naming its pack_id are
	// re-pinned to its version.
	Pack *pack.Pack
	// Extra are further packs the registry holds (the baseline, so that
	// packets pinning it resolve).
	Extra []*pack.Pack
	// Ontologies are the ontologies the host declares (NS@VERSION); nil
	// declares each pack's own.
	Ontologies []string
	// Validation tunes the validation of the packs as they are stored
	// (redaction rule names); its Gates are not run.
	Validation *pack.ValidateOptions
}

// Runner runs golden cases against a pack, each on a fresh Runtime.
type Runner struct {
	ref        pack.Ref
	reg        *pack.MemoryRegistry
	keys       *runcontext.StaticKeys
	adapters   []adapterSpec
	gates      map[string]string // capability id → gate of its permission
	modes      map[string]runcontext.ApprovalMode
	ontologies []string
}

type adapterSpec struct {
	id   string
	caps []string
}

// NewRunner signs the packs with a throwaway key into an in-memory
// registry and returns a Runner over them.
func NewRunner(opts RunnerOptions) (*Runner, error) {
	if opts.Pack == nil {
		return nil, errors.New("eval: RunnerOptions.Pack is required")
	}
	ref, err := opts.Pack.Ref()
	if err != nil {
		return nil, err
	}
	// The sandbox's own review is one reviewer in every role, which this
	// registry (and no other) allows.
	vo := &pack.ValidateOptions{AllowMultiRoleReviewer: true}
	if opts.Validation != nil {
		vo.RedactionRules = opts.Validation.RedactionRules
	}
	seed := sha256.Sum256([]byte("contextos eval: golden runs"))
	key := ed25519.NewKeyFromSeed(seed[:])
	kid := pack.KeyID(key.Public().(ed25519.PublicKey))
	r := &Runner{ref: ref, reg: pack.NewMemoryRegistry(vo), keys: runcontext.NewStaticKeys(map[string]ed25519.PublicKey{kid: key.Public().(ed25519.PublicKey)}),
		gates: map[string]string{}, modes: map[string]runcontext.ApprovalMode{}, ontologies: opts.Ontologies}
	seen := map[string]bool{}
	for i, p := range slices.Concat([]*pack.Pack{opts.Pack}, opts.Extra) {
		if p == nil {
			continue
		}
		pr, err := p.Ref()
		if err != nil {
			return nil, err
		}
		if i > 0 && pr == ref {
			continue // the pack under test wins
		}
		signed, err := pack.Sign(p, kid, key, vo)
		if err != nil {
			return nil, err
		}
		e, err := r.reg.Put(context.Background(), signed)
		if err != nil {
			return nil, err
		}
		// The registry is this runner's own sandbox: the packs under test
		// are published in it, through the review every registry requires,
		// only so the runtime resolves them; nothing leaves it.
		var signoffs []pack.Signoff
		for _, role := range pack.DefaultReviewRoles() {
			signoffs = append(signoffs, pack.Signoff{Reviewer: "contextos-eval-sandbox", Role: role})
		}
		if _, err := pack.Publish(context.Background(), r.reg, e.Ref, "eval sandbox", signoffs...); err != nil {
			return nil, err
		}
		ont := p.IntelligenceRefs.Ontology
		if opts.Ontologies == nil && ont.Namespace != "" && !slices.Contains(r.ontologies, ont.Namespace+"@"+ont.Version) {
			r.ontologies = append(r.ontologies, ont.Namespace+"@"+ont.Version)
		}
		perms := packview.EffectivePermissions(p)
		for _, a := range p.ToolingLayer.AdapterRegistry {
			for _, c := range a.Capabilities {
				if _, ok := r.modes[a.AdapterID+"."+c]; !ok || i == 0 {
					r.modes[a.AdapterID+"."+c] = perms[a.AdapterID+"."+c].Mode(a)
				}
			}
			if seen[a.AdapterID] {
				continue
			}
			seen[a.AdapterID] = true
			r.adapters = append(r.adapters, adapterSpec{id: a.AdapterID, caps: slices.Clone(a.Capabilities)})
		}
		if i == 0 {
			for _, q := range p.ToolingLayer.Permissions {
				if q.RequiresApprovalGate != "" {
					r.gates[q.CapabilityID()] = q.RequiresApprovalGate
				}
			}
		}
	}
	return r, nil
}

// Ref is the pack under test.
func (r *Runner) Ref() pack.Ref { return r.ref }

// RunAll runs the cases in order.
func (r *Runner) RunAll(ctx context.Context, cases []*Case) []*Run {
	out := make([]*Run, 0, len(cases))
	for _, c := range cases {
		out = append(out, r.Run(ctx, c))
	}
	return out
}

// Run runs one case: a scripted case twice on fresh runtimes (the second
// run checks the compile is stable), then its captured packet through
// Runtime.Replay; a packet case the same way with the packet's recorded
// inputs as its script, and its packet through Runtime.Replay on the
// version it pins when the registry holds it.
func (r *Runner) Run(ctx context.Context, c *Case) *Run {
	run := &Run{Case: c.Name, Intent: c.Intent, Expect: c.Expect, Secrets: slices.Clone(c.Secrets), Kind: KindScripted, Calls: []Call{}}
	var err error
	if c.Packet != "" {
		run.Kind = KindPacket
		err = r.runPacket(ctx, c, run)
	} else {
		err = r.runScripted(ctx, c, run)
	}
	if err != nil {
		run.Err = err.Error()
	}
	return run
}

// live is one scripted execution of a case.
type live struct {
	rt      *contextos.Runtime
	res     *contextos.Result
	pauses  []string
	records *decision.MemoryStore
}

// script is what one execution runs: the request and run context, the
// compiler's inputs, the planner, the tools, the clock and how pauses are
// answered. A fresh one is built for each execution.
type script struct {
	req      *runcontext.InvokeRequest
	rc       *runcontext.RunContext
	evidence compiler.EvidenceSource
	memory   contextos.MemoryStore
	planner  contextos.Planner
	adapter  func(adapterID string, caps []string) gateway.Adapter
	now      func() time.Time
	// answer returns the resume that answers a pause, or false to leave
	// the run paused.
	answer func(p *gateway.ApprovalRequest, now time.Time) (contextos.ResumeInput, bool)
}

// script is a scripted case's script (and the clock it runs on).
func (c *Case) script() (*script, runClock, error) {
	req, err := runcontext.DecodeInvokeRequest(c.Request)
	if err != nil {
		return nil, nil, err
	}
	rc, err := runcontext.DecodeRunContext(c.RunContext)
	if err != nil {
		return nil, nil, err
	}
	clock := &simClock{t: c.start, start: c.start}
	tools := &scriptedTools{clock: clock, results: c.Tools, next: map[string]int{}}
	s := &script{req: req, rc: rc, adapter: tools.adapter, now: clock.Now,
		planner: &scriptedPlanner{turns: c.Turns, clock: clock, latency: c.PlannerLatencyMS}}
	if c.Evidence != nil {
		s.evidence = c.Evidence
	}
	if c.Memory != nil {
		s.memory = recalled{c.Memory}
	}
	approvals := slices.Clone(c.Approve)
	s.answer = func(p *gateway.ApprovalRequest, now time.Time) (contextos.ResumeInput, bool) {
		i := slices.IndexFunc(approvals, func(a Approval) bool { return a.GateID == p.GateID })
		if i < 0 {
			return contextos.ResumeInput{}, false
		}
		a := approvals[i]
		approvals = slices.Delete(approvals, i, i+1)
		return contextos.ResumeInput{Approvals: []gateway.Approval{{ApprovalID: "apr_" + p.ToolCallID, GateID: p.GateID, ActionDigest: p.ActionDigest,
			Approver: a.Approver, ApproverRole: a.Role, DecidedAt: now}}}, true
	}
	return s, clock, nil
}

// execute runs a script once on a fresh runtime, answering pauses; the
// request's refs to the pack under test are pinned to its version.
func (r *Runner) execute(ctx context.Context, s *script) (*live, error) {
	req := s.req
	for i, ref := range req.ContextPackRefs {
		if id, _, ok := strings.Cut(ref, "@"); ok && id == r.ref.ID {
			req.ContextPackRefs[i] = r.ref.String()
		}
	}
	l := &live{records: decision.NewMemoryStore()}
	o := &contextos.Options{
		Adapters:         r.registrations(s.adapter),
		Decisions:        l.records,
		Ontologies:       slices.Clone(r.ontologies),
		ReplaySampleRate: 0,
		Now:              s.now,
		Identity:         contextos.IdentityOptions{AllowUnclaimed: true},
		Evidence:         s.evidence,
		Memory:           s.memory,
	}
	var err error
	if l.rt, err = contextos.New(s.planner, r.reg, r.keys, o); err != nil {
		return nil, err
	}
	if l.res, err = l.rt.Invoke(ctx, req, s.rc); err != nil {
		return nil, err
	}
	for l.res.Pending != nil {
		p := l.res.Pending
		l.pauses = append(l.pauses, p.GateID)
		in, ok := s.answer(p, s.now())
		if !ok {
			break
		}
		if l.res, err = l.rt.Resume(ctx, l.res.RunID, in); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (r *Runner) registrations(adapter func(adapterID string, caps []string) gateway.Adapter) []gateway.Registration {
	regs := make([]gateway.Registration, 0, len(r.adapters))
	for _, a := range r.adapters {
		caps := map[string]gateway.Capability{}
		for _, c := range a.caps {
			caps[c] = gateway.Capability{}
		}
		regs = append(regs, gateway.Registration{AdapterID: a.id, Adapter: adapter(a.id, a.caps), Capabilities: caps})
	}
	return regs
}

func (r *Runner) runScripted(ctx context.Context, c *Case, run *Run) error {
	return r.runScript(ctx, run, c.script)
}

// runScript executes a script twice on fresh runtimes (the second
// execution checks the compile is stable), fills run from the first, and
// replays the first's captured packet.
func (r *Runner) runScript(ctx context.Context, run *Run, build func() (*script, runClock, error)) error {
	s, clock, err := build()
	if err != nil {
		return err
	}
	first, err := r.execute(ctx, s)
	if err != nil {
		return err
	}
	res := first.res
	run.Status, run.Record, run.Compiled, run.Pauses = res.Status, res.Record, res.Compiled, first.pauses
	if res.Record != nil {
		run.Outcome, run.CostCents = res.Record.Outcome, res.Record.BudgetUsage.CostUSDCents
	}
	if res.Compiled != nil {
		run.Ledger = &res.Compiled.ContextLedger
	}
	run.DurationMS = clock.elapsed()
	if run.Records, err = first.records.List(ctx, decision.Filter{RunID: res.RunID}); err != nil {
		return err
	}
	s2, _, err := build()
	if err != nil {
		return err
	}
	second, err := r.execute(ctx, s2)
	if err != nil {
		return fmt.Errorf("second run: %w", err)
	}
	run.Stable = sameCompile(res.Compiled, second.res.Compiled)
	p, err := first.rt.Capture(ctx, res.RunID, replay.SourceGoldenCase)
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	run.Packet = p
	run.Calls = r.calls(p.Transcript, run.Ledger)
	return r.replay(ctx, first.rt, p, run)
}

// sameCompile compares the hash, tool manifest and budget report of two
// compiles.
func sameCompile(a, b *compiler.CompiledContext) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Hash() != b.Hash() {
		return false
	}
	for _, pair := range [][2]any{{a.Manifests.ToolManifest, b.Manifests.ToolManifest}, {a.BudgetReport, b.BudgetReport}} {
		if !canonEqual(pair[0], pair[1]) {
			return false
		}
	}
	return true
}

func canonEqual(a, b any) bool {
	x, err1 := canon.JSON(a)
	y, err2 := canon.JSON(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

func (r *Runner) replay(ctx context.Context, rt *contextos.Runtime, p *replay.Packet, run *Run) error {
	rep, err := rt.Replay(ctx, p)
	if rep != nil {
		run.ReplayEqual = rep.Status == replay.ReplayEqual
		run.ReplayDiffs = rep.Diffs
	}
	if err != nil && rep == nil {
		return fmt.Errorf("replay: %w", err)
	}
	return nil
}

// calls lists the transcript's calls with their approval mode, the gate
// guarding them when active, and whether they used an approval.
func (r *Runner) calls(entries []gateway.TranscriptEntry, ledger *compiler.ContextLedger) []Call {
	active := map[string]bool{}
	if ledger != nil {
		for _, g := range ledger.ApprovalGates {
			active[g.GateID] = g.Active
		}
	}
	calls := []Call{}
	byID := map[string]int{}
	for _, e := range entries {
		switch {
		case e.Kind == "call" && e.Call != nil:
			c := Call{CapabilityID: e.Call.CapabilityID, ToolCallID: e.Call.ToolCallID, ApprovalMode: e.Call.ApprovalModeEffective}
			if c.ApprovalMode == "" {
				c.ApprovalMode = r.modes[c.CapabilityID]
			}
			if g := r.gates[c.CapabilityID]; g != "" && active[g] {
				c.Gate = g
			}
			byID[c.ToolCallID] = len(calls)
			calls = append(calls, c)
		case e.Kind == "result" && e.Result != nil:
			i, ok := byID[e.Result.ToolCallID]
			if !ok {
				continue
			}
			// A paused call's later result replaces its paused one.
			calls[i].Status = e.Result.Status
			calls[i].Approved = calls[i].Approved || e.Result.Metadata.ApprovalID != ""
		}
	}
	return calls
}

// simClock is a run's simulated clock: it moves only when a planner turn
// or a tool call advances it by its scripted latency.
type simClock struct {
	mu    sync.Mutex
	t     time.Time
	start time.Time
}

// runClock is an execution's clock: Now serves the runtime, elapsed is
// the simulated time since the execution started.
type runClock interface {
	Now() time.Time
	elapsed() int64
}

func (c *simClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *simClock) advance(ms int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Duration(ms) * time.Millisecond)
}

func (c *simClock) elapsed() int64 { return c.Now().Sub(c.start).Milliseconds() }

// scriptedPlanner answers turn i with the i-th scripted plan; asked for a
// turn it has no script for, it fails (the runtime escalates).
type scriptedPlanner struct {
	turns   []contextos.Plan
	clock   *simClock
	latency int64
}

func (p *scriptedPlanner) Plan(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if req.Turn >= len(p.turns) {
		return nil, fmt.Errorf("eval: the case has %d planner turns; turn %d was asked for", len(p.turns), req.Turn+1)
	}
	p.clock.advance(p.latency)
	return jsonCopy(&p.turns[req.Turn])
}

// scriptedTools serves a case's scripted results through one
// gatewaytest.ScriptedAdapter per adapter, advancing the clock by each
// result's latency.
type scriptedTools struct {
	clock   *simClock
	results map[string][]ToolResult
	mu      sync.Mutex
	next    map[string]int
}

func (s *scriptedTools) adapter(adapterID string, caps []string) gateway.Adapter {
	sa := gatewaytest.NewScriptedAdapter()
	for _, c := range caps {
		rs := s.results[adapterID+"."+c]
		if len(rs) == 0 {
			continue
		}
		sc := sa.On(c)
		for _, r := range rs {
			if r.Error != nil || !scriptedSuccess(r.Status) {
				sc.FailWith(scriptedError(r)).Spending(r.CostCents, r.Tokens)
				continue
			}
			sc.Return(&gateway.Outcome{Output: r.Output, Mutations: r.Mutations, CostCents: r.CostCents, Tokens: r.Tokens})
		}
	}
	return gateway.AdapterFunc(func(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
		id := adapterID + "." + call.Capability
		s.mu.Lock()
		i := s.next[id]
		s.next[id]++
		s.mu.Unlock()
		if rs := s.results[id]; len(rs) > 0 {
			s.clock.advance(rs[min(i, len(rs)-1)].LatencyMS)
		}
		return sa.Call(ctx, call)
	})
}

func scriptedSuccess(status string) bool {
	return status == "" || status == "ok" || status == "completed"
}

func scriptedError(r ToolResult) error {
	if r.Error != nil {
		e := *r.Error
		return &e
	}
	code := gateway.CodeExecutionFailed
	if r.Status != "failed" {
		code = gateway.CodePermissionDenied
	}
	return gateway.NewToolError(code, false, "scripted "+r.Status, nil)
}

// recalled is a case's memory as the run's memory store: it recalls the
// items (the compiler keeps the promoted ones) and drops proposals.
type recalled struct{ compiler.StaticMemory }

func (recalled) Propose(ctx context.Context, _ []contextos.MemoryProposal) error { return ctx.Err() }
