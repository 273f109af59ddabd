package main

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/wire"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/transport"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// packSet is the --pack, --pub and --allow-unsigned flags: the packs go
// into an in-memory registry the runtime trusts.
type packSet struct {
	packs, pubs   multiFlag
	allowUnsigned bool
	redactors     redactorsFlag // redactors.go
	overlays      overlayFlag   // overlay.go
}

func (s *packSet) register(fs *flag.FlagSet) {
	fs.Var(&s.packs, "pack", "pack `FILE`, plain or signed (repeatable)")
	fs.Var(&s.pubs, "pub", "trusted public key `FILE`; signed packs must verify with one (repeatable)")
	fs.BoolVar(&s.allowUnsigned, "allow-unsigned", false, "accept plain (unsigned) packs, signed here with a throwaway key")
	s.redactors.register(fs)
	s.overlays.register(fs)
}

// registry loads the packs: signed files verified against --pub, plain
// files only with --allow-unsigned. Every pack is published.
func (s *packSet) registry(ctx context.Context, stdin io.Reader) (*pack.MemoryRegistry, *runcontext.StaticKeys, []*pack.Pack, error) {
	if len(s.packs) == 0 {
		return nil, nil, nil, errors.New("at least one --pack is required")
	}
	if err := s.redactors.load(stdin); err != nil {
		return nil, nil, nil, err
	}
	if len(s.pubs) == 0 && !s.allowUnsigned {
		return nil, nil, nil, errors.New("give --pub PUBFILE to verify signed packs, or --allow-unsigned")
	}
	keys, err := readKeys(s.pubs)
	if err != nil {
		return nil, nil, nil, err
	}
	seed := sha256.Sum256([]byte("contextos run: unsigned packs"))
	dev := ed25519.NewKeyFromSeed(seed[:])
	devKid := pack.KeyID(dev.Public().(ed25519.PublicKey))
	// The operator's naming the packs is their whole review, in every role:
	// this throwaway registry allows one reviewer in several roles.
	vopts := *s.redactors.validation()
	vopts.AllowMultiRoleReviewer = true
	reg := pack.NewMemoryRegistry(&vopts)
	var packs []*pack.Pack
	for _, name := range s.packs {
		data, err := readInput(name, stdin)
		if err != nil {
			return nil, nil, nil, err
		}
		if isSigned(data) {
			v, err := pack.Verify(ctx, data, keys, s.redactors.validation())
			if err != nil {
				return nil, nil, nil, fmt.Errorf("%s: %w", name, err)
			}
			packs = append(packs, v.Pack)
		} else {
			if !s.allowUnsigned {
				return nil, nil, nil, fmt.Errorf("%s: the pack is not signed (sign it, or pass --allow-unsigned)", name)
			}
			p, err := pack.DecodeAndValidate(data, s.redactors.validation())
			if err != nil {
				return nil, nil, nil, fmt.Errorf("%s: %w", name, err)
			}
			if data, err = pack.Sign(p, devKid, dev, s.redactors.validation()); err != nil {
				return nil, nil, nil, err
			}
			keys.Add(devKid, dev.Public().(ed25519.PublicKey))
			packs = append(packs, p)
		}
		e, err := reg.Put(ctx, data)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		// The operator named the pack on the command line: that is its
		// review, recorded in every role this throwaway registry requires.
		var review []pack.Signoff
		for _, role := range pack.DefaultReviewRoles() {
			review = append(review, pack.Signoff{Reviewer: "contextos-run-operator", Role: role})
		}
		if _, err := pack.Publish(ctx, reg, e.Ref, "contextos run", review...); err != nil {
			return nil, nil, nil, err
		}
	}
	return reg, keys, packs, nil
}

// scriptedResult is one entry of the tools file.
type scriptedResult struct {
	Status    string             `json:"status,omitempty"`
	Output    map[string]any     `json:"output,omitempty"`
	Error     *gateway.ToolError `json:"error,omitempty"`
	Mutations []string           `json:"mutations,omitempty"`
	LatencyMS int                `json:"latency_ms,omitempty"`
	CostCents float64            `json:"cost_cents,omitempty"`
	Tokens    int                `json:"tokens,omitempty"`
}

// scriptedStatuses are the statuses a tools-file result may give: ok and
// completed (or none) succeed, the others fail the call (an adapter cannot
// itself block or reject a call, so blocked, rejected and denied come back
// as a permission_denied error).
var scriptedStatuses = []string{"", "ok", "completed", "failed", "error", "blocked", "rejected", "denied"}

func scriptedSuccess(status string) bool {
	return status == "" || status == "ok" || status == "completed"
}

// scriptedTools serves the tools file: each capability's results in order
// (the last one repeats); a capability without results fails.
type scriptedTools struct {
	mu      sync.Mutex
	results map[string][]scriptedResult
	next    map[string]int
}

func (s *scriptedTools) adapter(adapterID string) gateway.Adapter {
	return gateway.AdapterFunc(func(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		id := adapterID + "." + c.Capability
		s.mu.Lock()
		rs := s.results[id]
		i := s.next[id]
		s.next[id]++
		s.mu.Unlock()
		if len(rs) == 0 {
			return nil, gateway.NewToolError(gateway.CodeUnsupportedTool, false, "the tools file has no result for "+id, nil)
		}
		r := rs[min(i, len(rs)-1)]
		if r.Error != nil || !scriptedSuccess(r.Status) {
			// A failed attempt is charged what it spent.
			spent := &gateway.Outcome{CostCents: r.CostCents, Tokens: r.Tokens}
			if r.Error == nil {
				code := gateway.CodeExecutionFailed
				if r.Status != "failed" {
					code = gateway.CodePermissionDenied
				}
				return spent, gateway.NewToolError(code, false, "scripted "+r.Status, nil)
			}
			e := *r.Error
			return spent, &e
		}
		return &gateway.Outcome{Output: r.Output, Mutations: r.Mutations, CostCents: r.CostCents, Tokens: r.Tokens}, nil
	})
}

// registrations registers every adapter of the packs with all its
// capabilities, served by adapter(id).
func registrations(packs []*pack.Pack, adapter func(id string) gateway.Adapter) []gateway.Registration {
	return registrationsWith(packs, adapter, nil)
}

// registrationsWith is registrations with the adapters of live endpoints
// in place of adapter(id).
func registrationsWith(packs []*pack.Pack, adapter func(id string) gateway.Adapter, live *liveAdapters) []gateway.Registration {
	var regs []gateway.Registration
	seen := map[string]bool{}
	for _, p := range packs {
		for _, a := range p.ToolingLayer.AdapterRegistry {
			if seen[a.AdapterID] {
				continue
			}
			seen[a.AdapterID] = true
			caps := map[string]gateway.Capability{}
			for _, c := range a.Capabilities {
				caps[c], _ = live.capability(a.AdapterID, c)
			}
			ad := adapter(a.AdapterID)
			if live != nil && live.adapters[a.AdapterID] != nil {
				ad = live.adapters[a.AdapterID]
			}
			regs = append(regs, gateway.Registration{AdapterID: a.AdapterID, Adapter: ad, Capabilities: caps})
		}
	}
	return regs
}

type runOutput struct {
	RunID            string                        `json:"run_id"`
	Status           decision.Status               `json:"status"`
	Record           *decision.Record              `json:"decision_record"`
	ToolResults      []*gateway.ToolResultEnvelope `json:"tool_results"`
	Events           []contextos.Event             `json:"events"`
	PendingApprovals []*gateway.ApprovalRequest    `json:"pending_approvals"`
	// Notices are the run's notices (contextos.Notice), also printed on
	// stderr: the tools its safety mode withheld, say.
	Notices []contextos.Notice `json:"notices,omitempty"`
}

// runFlags are cmdRun's flags.
type runFlags struct {
	packs                                              packSet
	ontologies, approves                               multiFlag
	claims                                             claimFlags
	request, runContext, plan, tools, evidence, memory string
	recordOut, packetOut, now, endpoints, secrets      string
	// planner is --planner PROVIDER:MODEL, the model planner run uses
	// instead of the --plan turns (planner.go).
	planner string
	// price is --price MODEL=IN/OUT[/CACHED[/CACHE_WRITE]], the
	// --planner model's price (planner.ParsePrice).
	price string
	store storeFlag // store.go
}

// register registers run's flags: the shared ones and --request and
// --run-context.
func (f *runFlags) register(fs *flag.FlagSet) {
	f.registerShared(fs)
	fs.StringVar(&f.request, "request", "", "invokeAgent request `FILE`")
	fs.StringVar(&f.runContext, "run-context", "", "RunContext `FILE`")
}

// registerShared registers the flags run and resume share: the packs,
// plan, tools, evidence, memory, ontologies, overlays, approvals, clock,
// endpoints, outputs and store.
func (f *runFlags) registerShared(fs *flag.FlagSet) {
	f.packs.register(fs)
	f.store.register(fs)
	f.claims.register(fs)
	fs.Var(&f.ontologies, "ontology", "ontology the host declares, `NS@VERSION` (repeatable)")
	fs.Var(&f.approves, "approve", "answer a pause on a gate: `GATE=APPROVER:ROLE` (repeatable)")
	fs.StringVar(&f.plan, "plan", "", "plan `FILE`: a JSON array of planner turns")
	fs.StringVar(&f.planner, "planner", "", "plan with a model instead of --plan: `openai:MODEL` or anthropic:MODEL (key and base URL from OPENAI_API_KEY/OPENAI_BASE_URL or ANTHROPIC_API_KEY/ANTHROPIC_BASE_URL)")
	fs.StringVar(&f.price, "price", "", "the --planner model's price, USD per million tokens: `MODEL=IN/OUT[/CACHED[/CACHE_WRITE]]` (without it the model's tokens cost 0 against max_cost_cents)")
	fs.StringVar(&f.tools, "tools", "", "tools `FILE`: capability id → the results of its successive calls")
	fs.StringVar(&f.evidence, "evidence", "", "evidence `FILE`: a JSON array of items")
	fs.StringVar(&f.memory, "memory", "", "memory `FILE`: a JSON array of items")
	fs.StringVar(&f.recordOut, "record", "", "write the decision record to `OUT`")
	fs.StringVar(&f.packetOut, "replay-packet", "", "write the replay packet to `OUT`")
	fs.StringVar(&f.now, "now", "", "fixed clock, RFC 3339 (default: the wall clock)")
	fs.StringVar(&f.endpoints, "endpoints", "", "endpoints `FILE`: endpoint_ref → {transport, url|command, auth, timeout_ms, max_attempts, backoff_ms, jitter}; those adapters are called for real")
	fs.StringVar(&f.secrets, "secrets", "", "secrets `FILE`: secret name → value (or {key: value}) for the endpoints' auth")
}

// exitError is a stage's failure: the exit code and the message printed
// after "contextos run: ".
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func exitf(code int, format string, a ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, a...)}
}

// runInputs are what cmdRun loads before it builds the runtime.
type runInputs struct {
	reg      *pack.MemoryRegistry
	keys     *runcontext.StaticKeys
	packs    []*pack.Pack
	overlays []*pack.Overlay
	req      *runcontext.InvokeRequest
	rc       *runcontext.RunContext
	turns    []*contextos.Plan
	tools    *scriptedTools
	// approvals are the --approve answers by gate.
	approvals map[string]approverFlag
	now       func() time.Time
	// onPause is the runtime's pause hook (serve's webhook).
	onPause func(context.Context, contextos.PendingApproval)
	// tracer and meter receive the runtime's spans and metrics (serve's
	// OTLP export); nil: none.
	tracer trace.TracerProvider
	meter  metric.MeterProvider
}

// approverFlag is who an --approve flag names.
type approverFlag struct{ approver, role string }

func cmdRun(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var f runFlags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos run --pack FILE… [--pub PUBFILE | --allow-unsigned] --request FILE --run-context FILE\n       (--plan FILE | --planner openai:MODEL|anthropic:MODEL [--price MODEL=IN/OUT[/CACHED[/CACHE_WRITE]]]) --tools FILE [--approve GATE=APPROVER:ROLE] [--evidence FILE] [--memory FILE]\n       [--ontology NS@VERSION…] [--overlay FILE…] [--record OUT] [--replay-packet OUT] [--now RFC3339]\n       [--endpoints FILE [--secrets FILE]] [--redactors FILE] [--store sqlite:PATH|postgres://…]\n\nRuns one invocation with a scripted planner (or a model's) and scripted tools (or, for\nadapters whose endpoint_ref is in --endpoints, the real tools) and prints\n{run_id, status, decision_record, tool_results, events, pending_approvals, notices}\n(each notice, such as the tools the safety mode withholds, also on stderr). With\n--store the run, its records and its pause are kept in that store (contextos\nresume continues it). Exit 0 when the run completed (whatever its status), 1 on\ninvalid input, 2 on an internal error.")
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if f.request == "" || f.runContext == "" || f.plan == "" && f.planner == "" || f.tools == "" || fs.NArg() != 0 {
		return failRun(stderr, exitf(exitUsage, "--pack, --request, --run-context, --plan (or --planner) and --tools are required"))
	}
	if f.plan != "" && f.planner != "" {
		return failRun(stderr, exitf(exitUsage, "--plan and --planner are alternatives: give one"))
	}
	ctx := context.Background()
	st, err := f.store.open(ctx)
	if err != nil {
		return failRun(stderr, err)
	}
	if st != nil {
		defer st.Close()
	}
	in, err := loadRunInputs(ctx, &f, stdin)
	if err != nil {
		return failRun(stderr, err)
	}
	rt, closeLive, err := buildRunRuntime(ctx, &f, in, st, stdin, stderr)
	if err != nil {
		return failRun(stderr, err)
	}
	defer closeLive()
	out, res, err := executeRun(ctx, rt, in)
	if err != nil {
		return failRun(stderr, err)
	}
	printNotices(stderr, "run", out.Notices)
	return failRun(stderr, renderRun(ctx, &f, rt, out, res, stdout))
}

// printNotices prints a run's notices on stderr, one line each.
func printNotices(stderr io.Writer, cmd string, notices []contextos.Notice) {
	for _, n := range notices {
		fmt.Fprintf(stderr, "contextos %s: notice: %s\n", cmd, n.Message)
	}
}

// failRun prints a stage's error and returns its exit code (exitOK for
// none).
func failRun(stderr io.Writer, err error) int { return failCmd(stderr, "run", err) }

// failCmd prints command cmd's error and returns its exit code (exitOK
// for none).
func failCmd(stderr io.Writer, cmd string, err error) int {
	if err == nil {
		return exitOK
	}
	var e *exitError
	if !errors.As(err, &e) {
		e = &exitError{code: exitUsage, msg: err.Error()}
	}
	if e.msg != "" {
		fmt.Fprintf(stderr, "contextos %s: %s\n", cmd, e.msg)
	}
	return e.code
}

// loadRunInputs loads the packs, overlays, request, run context, plan,
// tools file, --approve answers and clock.
func loadRunInputs(ctx context.Context, f *runFlags, stdin io.Reader) (*runInputs, error) {
	in := &runInputs{tools: &scriptedTools{results: map[string][]scriptedResult{}, next: map[string]int{}}, approvals: map[string]approverFlag{}}
	var err error
	if in.reg, in.keys, in.packs, err = f.packs.registry(ctx, stdin); err != nil {
		return nil, exitf(exitInvalid, "%v", err)
	}
	overlays, usage, err := f.packs.overlays.load(stdin, in.packs)
	if err != nil {
		if usage {
			return nil, exitf(exitUsage, "%v", err)
		}
		return nil, exitf(exitInvalid, "%v", err)
	}
	in.overlays = overlays
	for _, file := range []struct {
		path   string
		decode func([]byte) error
	}{
		{f.request, func(b []byte) (err error) { in.req, err = runcontext.DecodeInvokeRequest(b); return }},
		{f.runContext, func(b []byte) (err error) { in.rc, err = runcontext.DecodeRunContext(b); return }},
		{f.plan, func(b []byte) error { return strictJSON(b, &in.turns) }},
		{f.tools, in.tools.decode},
	} {
		if file.path == "" {
			continue // resume: the run's request and run context are stored
		}
		data, err := readInput(file.path, stdin)
		if err != nil {
			return nil, exitf(exitUsage, "%v", err)
		}
		if err := file.decode(data); err != nil {
			return nil, exitf(exitInvalid, "%s: %v", file.path, err)
		}
	}
	for _, a := range f.approves {
		gate, who, ok1 := strings.Cut(a, "=")
		approver, role, ok2 := strings.Cut(who, ":")
		if !ok1 || !ok2 || gate == "" || approver == "" || role == "" {
			return nil, exitf(exitUsage, "--approve %q: want GATE=APPROVER:ROLE", a)
		}
		in.approvals[gate] = approverFlag{approver: approver, role: role}
	}
	in.now = time.Now
	if f.now != "" {
		t, err := time.Parse(time.RFC3339, f.now)
		if err != nil {
			return nil, exitf(exitUsage, "--now: %v", err)
		}
		in.now = func() time.Time { return t }
	}
	return in, nil
}

// decode reads the tools file.
func (s *scriptedTools) decode(b []byte) error {
	if err := strictJSON(b, &s.results); err != nil {
		return err
	}
	for id, rs := range s.results {
		for i, r := range rs {
			if !slices.Contains(scriptedStatuses, r.Status) {
				return fmt.Errorf("%s[%d].status: %.40q is not one of %s", id, i, r.Status, strings.Join(scriptedStatuses[1:], ", "))
			}
			if r.LatencyMS < 0 || r.CostCents < 0 || r.Tokens < 0 {
				return fmt.Errorf("%s[%d]: latency_ms, cost_cents and tokens must be ≥ 0", id, i)
			}
		}
	}
	return nil
}

// buildRunRuntime builds the runtime: the scripted planner, the scripted
// tools (or the live adapters of --endpoints), evidence and memory. The
// returned func closes the live adapters.
func buildRunRuntime(ctx context.Context, f *runFlags, in *runInputs, st durableStore, stdin io.Reader, stderr io.Writer) (*contextos.Runtime, func(), error) {
	live, err := loadLiveAdapters(ctx, f, in.packs, stdin)
	if err != nil {
		return nil, nil, err
	}
	closeLive := func() {
		if live != nil {
			live.close()
		}
	}
	rt, err := newRunRuntime(f, in, live, st, stdin, stderr)
	if err != nil {
		closeLive()
		return nil, nil, err
	}
	return rt, closeLive, nil
}

// loadLiveAdapters reads --endpoints and --secrets: nil without
// --endpoints.
func loadLiveAdapters(ctx context.Context, f *runFlags, packs []*pack.Pack, stdin io.Reader) (*liveAdapters, error) {
	if f.endpoints == "" {
		if f.secrets != "" {
			return nil, exitf(exitUsage, "--secrets needs --endpoints")
		}
		return nil, nil
	}
	var entries map[string]endpointEntry
	data, err := readInput(f.endpoints, stdin)
	if err != nil {
		return nil, exitf(exitUsage, "%v", err)
	}
	if err := strictJSON(data, &entries); err != nil {
		return nil, exitf(exitInvalid, "%s: %v", f.endpoints, err)
	}
	secrets := transport.MapSecrets{}
	if f.secrets != "" {
		data, err := readInput(f.secrets, stdin)
		if err != nil {
			return nil, exitf(exitUsage, "%v", err)
		}
		if secrets, err = readSecrets(data); err != nil {
			return nil, exitf(exitInvalid, "%s: %v", f.secrets, err)
		}
	}
	live, err := newLiveAdapters(ctx, packs, entries, secrets)
	if err != nil {
		return nil, exitf(exitInvalid, "%s: %v", f.endpoints, err)
	}
	return live, nil
}

func newRunRuntime(f *runFlags, in *runInputs, live *liveAdapters, st durableStore, stdin io.Reader, stderr io.Writer) (*contextos.Runtime, error) {
	opts := &contextos.Options{}
	if st != nil {
		st.Configure(opts) // the runs, records, packets, claims and approvals are the store's
	}
	opts.Adapters, opts.Ontologies, opts.Overlays, opts.ReplaySampleRate, opts.Now = registrationsWith(in.packs, in.tools.adapter, live), f.ontologies, in.overlays, 1, in.now
	opts.Gateway.Redactors = f.packs.redactors.rules
	opts.OnPause = in.onPause
	if in.tracer != nil {
		opts.TracerProvider = in.tracer
	}
	if in.meter != nil {
		opts.MeterProvider = in.meter
	}
	var err error
	if opts.Identity, err = f.claims.options(); err != nil {
		return nil, exitf(exitUsage, "--claim-pub: %v", err)
	}
	ev, mem, code, ok := readEvidenceMemory("run", f.evidence, f.memory, stdin, stderr)
	if !ok {
		return nil, &exitError{code: code} // readEvidenceMemory printed why
	}
	if ev != nil {
		opts.Evidence = ev
	}
	if mem != nil {
		opts.Memory = fileMemory{mem}
	}
	var planner contextos.Planner
	if f.price != "" && f.planner == "" {
		return nil, exitf(exitUsage, "--price prices the --planner model: give --planner")
	}
	if f.planner != "" {
		if planner, err = modelPlanner(f.planner, f.price, os.Getenv, stderr); err != nil {
			return nil, exitf(exitUsage, "%v", err)
		}
	} else {
		turns := in.turns
		planner = contextos.PlannerFunc(func(ctx context.Context, r *contextos.PlanRequest) (*contextos.Plan, error) {
			if r.Turn >= len(turns) {
				return nil, fmt.Errorf("the plan file has %d turns; turn %d was asked for", len(turns), r.Turn+1)
			}
			return turns[r.Turn], nil
		})
	}
	rt, err := contextos.New(planner, in.reg, in.keys, opts)
	if err != nil {
		return nil, exitf(exitUsage, "%v", err)
	}
	return rt, nil
}

// fileMemory is the --memory file as the run's memory store: it recalls
// the file's items as given (the compiler omits those not promoted, with a
// ledger omission, as compile does) and drops proposals.
type fileMemory struct{ compiler.StaticMemory }

func (fileMemory) Propose(ctx context.Context, _ []contextos.MemoryProposal) error { return ctx.Err() }

// executeRun streams the run and resumes each pause an --approve answers.
func executeRun(ctx context.Context, rt *contextos.Runtime, in *runInputs) (*runOutput, *contextos.Result, error) {
	c := newRunCollector()
	if err := c.collect(rt.Stream(ctx, in.req, in.rc)); err != nil {
		return nil, nil, exitf(exitInvalid, "%v", err)
	}
	return c.answerPauses(ctx, rt, in, maps.Clone(in.approvals))
}

// runCollector gathers a run's events and its result across resumes.
type runCollector struct {
	out *runOutput
	res *contextos.Result
}

func newRunCollector() *runCollector {
	return &runCollector{out: &runOutput{Events: []contextos.Event{}, PendingApprovals: []*gateway.ApprovalRequest{}}}
}

// collect keeps a stream's events and its result.
func (c *runCollector) collect(events func(func(contextos.Event, error) bool)) error {
	for e, err := range events {
		if err != nil {
			return err
		}
		if e.Kind == contextos.EventResult {
			c.res = e.Final
			continue
		}
		c.out.Events = append(c.out.Events, e)
	}
	return nil
}

// answerPauses resumes the run while it pauses on a gate approvals
// answers (each answer is used once), then fills the output.
func (c *runCollector) answerPauses(ctx context.Context, rt *contextos.Runtime, in *runInputs, approvals map[string]approverFlag) (*runOutput, *contextos.Result, error) {
	for c.res.Pending != nil {
		a, ok := approvals[c.res.Pending.GateID]
		if !ok {
			break
		}
		delete(approvals, c.res.Pending.GateID)
		ap := cliApproval(c.res.Pending.ToolCallID, c.res.Pending.GateID, c.res.Pending.ActionDigest, a, in.now())
		if err := c.collect(rt.ResumeStream(ctx, c.res.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{ap}, Pause: pauseOf(c.res)})); err != nil {
			return nil, nil, exitf(exitUsage, "resume: %v", err)
		}
	}
	res, out := c.res, c.out
	out.RunID, out.Status, out.Record, out.ToolResults, out.Notices = res.RunID, res.Status, res.Record, res.ToolResults, res.Notices
	if res.Pending != nil {
		out.PendingApprovals = append(out.PendingApprovals, res.Pending)
	}
	return out, res, nil
}

// pauseOf is the pause a paused result awaits: its DEFERRED record's id.
func pauseOf(res *contextos.Result) string {
	if res.Record == nil {
		return ""
	}
	return res.Record.RecordID
}

// cliApproval is the approval an --approve answer gives the paused call
// toolCallID on gate, bound to its action digest, decided at now.
func cliApproval(toolCallID, gate, digest string, a approverFlag, now time.Time) gateway.Approval {
	return gateway.Approval{ApprovalID: "apr_cli_" + toolCallID, GateID: gate, ActionDigest: digest, Approver: a.approver, ApproverRole: a.role, DecidedAt: now}
}

// renderRun prints the run's output and writes --record and
// --replay-packet.
func renderRun(ctx context.Context, f *runFlags, rt *contextos.Runtime, out *runOutput, res *contextos.Result, stdout io.Writer) error {
	// The run's result goes to stdout whatever happens to the files.
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return exitf(exitUsage, "%v", err)
	}
	if f.recordOut != "" {
		if err := writeJSON(f.recordOut, res.Record); err != nil {
			return exitf(exitUsage, "%v", err)
		}
	}
	if f.packetOut == "" {
		return nil
	}
	var p *replay.Packet
	var err error
	if res.ReplayPacketID != "" {
		p, err = rt.Packets().Get(ctx, res.ReplayPacketID)
	} else {
		// A paused run is captured from its checkpoint: the packet
		// replays to the same pause.
		p, err = rt.Capture(ctx, res.RunID, replay.SourceDecisionRecord)
	}
	if err != nil {
		return exitf(exitUsage, "no replay packet is captured for run %s: %v", res.RunID, err)
	}
	if err := writeJSON(f.packetOut, p); err != nil {
		return exitf(exitUsage, "%v", err)
	}
	return nil
}

func cmdReplay(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	var ps packSet
	ps.register(fs)
	var ontologies multiFlag
	var claims claimFlags
	claims.register(fs)
	var st storeFlag
	st.register(fs)
	fs.Var(&ontologies, "ontology", "ontology the host declares, `NS@VERSION` (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos replay --pack FILE… [--pub PUBFILE | --allow-unsigned] [--ontology NS@VERSION…] [--overlay FILE…] [--redactors FILE]\n       [--store sqlite:PATH|postgres://…] PACKET\n\nReplays a replay packet offline (recorded planner outputs and tool outcomes, no\nlive call) against the given packs, which must have the pinned content hashes,\nwith the overlays the run had (a different one is a compiled-context mismatch),\nand prints the result as JSON. PACKET is a file; with --store it is the id of a\npacket in the store (rp_…) or of a record that names one. Exit 0 on\nreplay_equal, 1 on a mismatch or tampering, 2 on a usage error.")
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "contextos replay: one PACKET file is required")
		return exitUsage
	}
	ctx := context.Background()
	reg, keys, packs, err := ps.registry(ctx, stdin)
	if err != nil {
		fmt.Fprintln(stderr, "contextos replay:", err)
		return exitUsage
	}
	overlays, _, err := ps.overlays.load(stdin, packs)
	if err != nil {
		fmt.Fprintln(stderr, "contextos replay:", err)
		return exitUsage
	}
	data, err := readPacket(ctx, &st, fs.Arg(0), stdin)
	if err != nil {
		return failCmd(stderr, "replay", err)
	}
	if err := wire.Strict(data); err != nil { // duplicate members, invalid UTF-8
		fmt.Fprintf(stderr, "contextos replay: %s: %v\n", fs.Arg(0), err)
		return exitInvalid
	}
	// A member respelled ("Status" after "status") or unknown: bytes that
	// would show a reader of the file other values than the ones sealed.
	pp, err := replay.DecodePacket(data)
	if err != nil {
		fmt.Fprintf(stderr, "contextos replay: %s: %v\n", fs.Arg(0), err)
		return exitInvalid
	}
	p := *pp
	noLive := func(string) gateway.Adapter {
		return gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
			return nil, gateway.NewToolError(gateway.CodeExecutionFailed, false, "live calls are disabled in replay", nil)
		})
	}
	noPlanner := contextos.PlannerFunc(func(context.Context, *contextos.PlanRequest) (*contextos.Plan, error) {
		return nil, errors.New("replay uses the recorded planner outputs")
	})
	if len(ontologies) == 0 {
		for _, pk := range packs {
			o := pk.IntelligenceRefs.Ontology
			ontologies = append(ontologies, o.Namespace+"@"+o.Version)
		}
	}
	identity, err := claims.options()
	if err != nil {
		fmt.Fprintln(stderr, "contextos replay: --claim-pub:", err)
		return exitUsage
	}
	rt, err := contextos.New(noPlanner, reg, keys, &contextos.Options{Adapters: registrations(packs, noLive), Ontologies: ontologies, Overlays: overlays, Identity: identity,
		Gateway: gateway.Options{Redactors: ps.redactors.rules}})
	if err != nil {
		fmt.Fprintln(stderr, "contextos replay:", err)
		return exitUsage
	}
	res, err := rt.Replay(ctx, &p)
	if res == nil {
		fmt.Fprintln(stderr, "contextos replay:", err)
		return exitInvalid
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return exitUsage
	}
	if res.Status != replay.ReplayEqual {
		return exitInvalid
	}
	return exitOK
}

// readPacket reads the replay packet name names: a file, or with --store
// a packet id or the id of a record that names its packet.
func readPacket(ctx context.Context, sf *storeFlag, name string, stdin io.Reader) ([]byte, error) {
	if sf.spec == "" {
		data, err := readInput(name, stdin)
		if err != nil {
			return nil, exitf(exitUsage, "%v", err)
		}
		return data, nil
	}
	st, err := sf.open(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	id := name
	var rec *decision.Record
	if r, err := st.Records().Get(ctx, name); err == nil {
		if r.RecordID != name {
			return nil, exitf(exitInvalid, "the store's record %.80q is another record (%.80q)", name, r.RecordID)
		}
		if r.Replay == nil || r.Replay.ReplayPacketID == "" {
			return nil, exitf(exitInvalid, "record %.80q names no replay packet", name)
		}
		id, rec = r.Replay.ReplayPacketID, r
	}
	p, err := st.Packets().Get(ctx, id)
	if errors.Is(err, contextos.ErrNotFound) {
		return nil, exitf(exitInvalid, "the store has no replay packet or record %.80q", name)
	}
	if err != nil {
		return nil, exitf(exitUsage, "%v", err)
	}
	// The packet must be the one asked for: the store's row for id holds
	// packet id, and a record's packet pins that record as stored (its
	// expected.decision_record_hash is the record's record_hash), so a
	// replay of a record is a replay of its decision and not of a packet
	// put in its packet's place.
	if p.ReplayPacketID != id {
		return nil, exitf(exitInvalid, "the store's replay packet %.80q is another packet (%.80q)", id, p.ReplayPacketID)
	}
	if rec != nil {
		if err := p.CheckRecord(rec); err != nil {
			return nil, exitf(exitInvalid, "%v", err)
		}
	}
	data, err := json.Marshal(p)
	if err != nil {
		return nil, exitf(exitUsage, "%v", err)
	}
	return data, nil
}

// strictJSON decodes with the strict wire rules (unknown fields refused).
func strictJSON(data []byte, dst any) error {
	if probs, _ := wire.Decode(data, dst); len(probs) > 0 {
		var lines []string
		for _, p := range probs {
			lines = append(lines, strings.TrimPrefix(p.Path+": "+p.Message, ": "))
		}
		return errors.New(strings.Join(lines, "; "))
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
