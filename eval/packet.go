package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/playback"
	"github.com/contextos/contextos/internal/wire"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// maxPacketBytes bounds a packet file.
const maxPacketBytes = 64 << 20

// runPacket runs a packet case. The packet is read (strictly, inside the
// case's directory) and must pass its integrity check. Then:
//
//   - when the registry holds the pack versions the packet pins, the packet
//     is replayed on them: the audit's determinism check;
//   - its recorded inputs (request, run context, evidence, memory, planner
//     outputs and failures, adapter outcomes per capability in order,
//     clock, approvals) are run as a script against the pack under test,
//     the request's refs to it re-pinned to its version, as a scripted case
//     is: the run the case's expect is held to.
//
// replay_equal is whether both the pinned replay (when it ran) and the
// replay of the candidate run's own packet are equal.
func (r *Runner) runPacket(ctx context.Context, c *Case, run *Run) error {
	p, err := readPacket(c)
	if err != nil {
		return err
	}
	if err := p.CheckIntegrity(); err != nil {
		return fmt.Errorf("packet %s: %w", c.Packet, err)
	}
	if run.Intent == "" {
		if req, err := runcontext.DecodeInvokeRequest(p.Invoke); err == nil {
			run.Intent = req.Input.Intent
		}
	}
	pinned, err := r.replayPinned(ctx, p)
	if err != nil {
		return fmt.Errorf("packet %s: %w", c.Packet, err)
	}
	if err := r.runScript(ctx, run, func() (*script, runClock, error) { return packetScript(p) }); err != nil {
		return fmt.Errorf("packet %s: re-run on %s: %w", c.Packet, r.ref, err)
	}
	if pinned != nil {
		run.ReplayEqual = run.ReplayEqual && pinned.Status == replay.ReplayEqual
		run.ReplayDiffs = slices.Concat(pinned.Diffs, run.ReplayDiffs)
	}
	return nil
}

// replayPinned replays p on the pack versions it pins, or returns nil when
// the registry does not hold them.
func (r *Runner) replayPinned(ctx context.Context, p *replay.Packet) (*replay.Report, error) {
	clock := &simClock{t: defaultStart, start: defaultStart}
	tools := &scriptedTools{clock: clock, next: map[string]int{}}
	rt, err := contextos.New(&scriptedPlanner{clock: clock}, r.reg, r.keys, &contextos.Options{
		Adapters: r.registrations(tools.adapter), Ontologies: slices.Clone(r.ontologies), Now: clock.Now,
		Identity: contextos.IdentityOptions{AllowUnclaimed: true}})
	if err != nil {
		return nil, err
	}
	rep, err := rt.Replay(ctx, p)
	switch {
	case rep != nil:
		return rep, nil
	case errors.Is(err, pack.ErrNotFound):
		return nil, nil
	}
	return nil, fmt.Errorf("replay on the pinned version: %w", err)
}

// readPacket reads and strictly decodes a case's packet: a path inside
// the case file's directory, a regular file of at most maxPacketBytes,
// without unknown or duplicate members. Errors name the packet and the
// JSON path, never the file's content.
func readPacket(c *Case) (*replay.Packet, error) {
	data, err := readInDir(filepath.Dir(c.File), c.Packet, maxPacketBytes)
	if err != nil {
		return nil, fmt.Errorf("packet %s %w", c.Packet, err)
	}
	return decodePacket(c.Packet, data)
}

// decodePacket decodes a packet file strictly (wire.Decode): a duplicate
// member, an unknown one, a wrong type or malformed JSON is refused, the
// error naming the packet and the JSON path.
func decodePacket(name string, data []byte) (*replay.Packet, error) {
	var p replay.Packet
	if probs, _ := wire.Decode(data, &p); len(probs) > 0 {
		q := probs[0]
		field := q.Path
		if field == "" {
			field = "(document)"
		}
		return nil, fmt.Errorf("packet %s: %s: %s", name, field, safeMessage(q.Message))
	}
	return &p, nil
}

// packetScript is the script of a packet's recorded inputs.
func packetScript(p *replay.Packet) (*script, runClock, error) {
	req, err := runcontext.DecodeInvokeRequest(p.Invoke)
	if err != nil {
		return nil, nil, fmt.Errorf("invoke: %w", err)
	}
	rc, err := runcontext.DecodeRunContext(p.RunContext)
	if err != nil {
		return nil, nil, fmt.Errorf("run_context: %w", err)
	}
	plans := make([]contextos.Plan, len(p.PlannerOutput))
	for i, raw := range p.PlannerOutput {
		if err := json.Unmarshal(raw, &plans[i]); err != nil {
			return nil, nil, fmt.Errorf("planner_outputs[%d] does not decode as a plan", i)
		}
	}
	planner := &packetPlanner{plans: plans, errs: map[int]replay.PlannerError{}}
	for _, e := range p.PlannerErrors {
		planner.errs[e.Call] = e
	}
	clock := &packetClock{readings: slices.Clone(p.Clock)}
	s := &script{req: req, rc: rc, planner: planner, now: clock.Now, adapter: newPacketTools(p.Outcomes).adapter}
	if p.Evidence != nil {
		s.evidence = compiler.StaticEvidence(slices.Clone(p.Evidence))
	}
	if p.Memory != nil {
		s.memory = recalled{compiler.StaticMemory(slices.Clone(p.Memory))}
	}
	// An approval binds to the compiled context, which the pack under test
	// changes: the approver's recorded answer on a gate is given to the
	// run's pause on that gate, bound to its action. Resumes are used in
	// their recorded order.
	used := make([]bool, len(p.Resumes))
	s.answer = func(pend *gateway.ApprovalRequest, _ time.Time) (contextos.ResumeInput, bool) {
		for i, res := range p.Resumes {
			if used[i] {
				continue
			}
			var aps []gateway.Approval
			for _, a := range res.Approvals {
				if a.GateID == pend.GateID {
					a.ActionDigest = pend.ActionDigest
					aps = append(aps, a)
				}
			}
			if len(aps) == 0 {
				continue
			}
			used[i] = true
			in := contextos.ResumeInput{Approvals: aps}
			if res.Budget != nil {
				b := *res.Budget
				in.Budget = &b
			}
			return in, true
		}
		return contextos.ResumeInput{}, false
	}
	return s, clock, nil
}

// packetPlanner serves a packet's planner outcomes by call: the recorded
// failures at their calls (with the usage they were charged), the
// recorded plans in between; past them it fails (the run escalates).
type packetPlanner struct {
	plans []contextos.Plan
	errs  map[int]replay.PlannerError
	call  int
	next  int
}

func (p *packetPlanner) Plan(ctx context.Context, _ *contextos.PlanRequest) (*contextos.Plan, error) {
	call := p.call
	p.call++
	if e, ok := p.errs[call]; ok {
		// A failed turn the model answered was charged its usage: the run
		// on the pack under test is charged the same.
		if e.Tokens != 0 || e.CostCents != 0 {
			return nil, &contextos.PlanUsageError{Usage: contextos.PlanUsage{Tokens: e.Tokens, CostCents: e.CostCents}, Err: errors.New(e.Reason)}
		}
		return nil, errors.New(e.Reason)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.next >= len(p.plans) {
		return nil, fmt.Errorf("eval: the packet recorded %d plans; another was asked for", len(p.plans))
	}
	out, err := jsonCopy(&p.plans[p.next])
	if err != nil {
		return nil, err
	}
	p.next++
	return out, nil
}

// packetClock serves a packet's clock readings in order, repeating the
// last; elapsed is the last reading served less the first.
type packetClock struct {
	mu       sync.Mutex
	readings []time.Time
	next     int
}

func (c *packetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.readings) == 0 {
		return defaultStart
	}
	t := c.readings[min(c.next, len(c.readings)-1)]
	c.next++
	return t
}

func (c *packetClock) elapsed() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next == 0 || len(c.readings) == 0 {
		return 0
	}
	return c.readings[min(c.next, len(c.readings))-1].Sub(c.readings[0]).Milliseconds()
}

// packetTools serves a packet's adapter outcomes to a run on another pack
// version: the n-th tool call of a capability gets the outcomes the n-th
// recorded call of that capability got, attempt by attempt. A call the
// packet has no outcome for fails (never a live call).
type packetTools struct {
	mu sync.Mutex
	// recorded: capability id → recorded tool call ids in order;
	// outcomes: recorded tool call id#attempt → outcome.
	recorded map[string][]string
	outcomes map[string]replay.AdapterOutcome
	// mapped: the run's tool call id → the recorded one.
	mapped map[string]string
	taken  map[string]int
}

func newPacketTools(outcomes []replay.AdapterOutcome) *packetTools {
	t := &packetTools{recorded: map[string][]string{}, outcomes: map[string]replay.AdapterOutcome{}, mapped: map[string]string{}, taken: map[string]int{}}
	for _, o := range outcomes {
		if !slices.Contains(t.recorded[o.CapabilityID], o.ToolCallID) {
			t.recorded[o.CapabilityID] = append(t.recorded[o.CapabilityID], o.ToolCallID)
		}
		t.outcomes[fmt.Sprintf("%s#%d", o.ToolCallID, o.Attempt)] = o
	}
	return t
}

// lookup maps the call to its recorded outcome.
func (t *packetTools) lookup(capID string, call *gateway.Call) (replay.AdapterOutcome, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id, ok := t.mapped[call.Envelope.ToolCallID]
	if !ok {
		n := t.taken[capID]
		if n >= len(t.recorded[capID]) {
			return replay.AdapterOutcome{}, false
		}
		t.taken[capID] = n + 1
		id = t.recorded[capID][n]
		t.mapped[call.Envelope.ToolCallID] = id
	}
	o, ok := t.outcomes[fmt.Sprintf("%s#%d", id, call.Attempt)]
	return o, ok
}

func (t *packetTools) adapter(adapterID string, _ []string) gateway.Adapter {
	return &packetAdapter{tools: t, adapterID: adapterID}
}

// packetAdapter is one adapter's view of packetTools, with the gateway's
// optional retry-stop and redaction reports of the recorded attempts (as
// the replay's playback adapter has).
type packetAdapter struct {
	tools     *packetTools
	adapterID string
}

func (a *packetAdapter) capID(call *gateway.Call) string { return a.adapterID + "." + call.Capability }

func (a *packetAdapter) Call(_ context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	id := a.capID(call)
	o, ok := a.tools.lookup(id, call)
	if !ok {
		return nil, gateway.NewToolError(gateway.CodeExecutionFailed, false, "eval: the packet recorded no outcome for this call of "+id+"; live calls are not allowed", nil)
	}
	if o.Outcome != nil {
		// The case is run again and again: each run gets its own copy.
		out, err := jsonCopy(o.Outcome)
		if err != nil {
			return nil, err
		}
		o.Outcome = out
	}
	return playback.Serve(o)
}

// StopRetrying reports a recorded attempt after which the run's caller
// had gone.
func (a *packetAdapter) StopRetrying(call *gateway.Call) bool {
	o, ok := a.tools.lookup(a.capID(call), call)
	return ok && o.Canceled
}

// RedactedAttempt reports a recorded attempt the gateway's redaction
// changed.
func (a *packetAdapter) RedactedAttempt(call *gateway.Call) bool {
	o, ok := a.tools.lookup(a.capID(call), call)
	return ok && o.Redacted
}

// jsonCopy deep-copies v by a JSON round trip: what a planner or an
// adapter hands the runtime is the runtime's to change, while the case or
// packet it came from is run again (its copy is shared by the runs).
func jsonCopy[T any](v *T) (*T, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// safeMessage is a decoding message without the content the JSON parser
// quotes ("invalid character 'r' looking for …"): the position only.
func safeMessage(msg string) string {
	if !strings.HasPrefix(msg, "invalid JSON: ") {
		return msg
	}
	if i := strings.LastIndex(msg, " (at byte "); i >= 0 {
		return "invalid JSON" + msg[i:]
	}
	if strings.Contains(msg, "'") || strings.Contains(msg, `"`) {
		return "invalid JSON"
	}
	return msg
}
