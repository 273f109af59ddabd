package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/internal/w3ctrace"
	"github.com/contextos/contextos/runcontext"
)

// AdapterCapability is the one capability an Adapter registers: the
// delegated run of its backend ("adp_coder.run").
const AdapterCapability = "run"

// AdapterArgsSchema is the JSON Schema of the run capability's arguments:
// prompt (required, non-empty), working_dir and extensions (the
// RunRequest's namespaced options), and idempotency_key, which the gateway
// sets on a write-class call (a pack requires it of every delegated
// permission). The gateway checks every call against it before the
// adapter runs.
const AdapterArgsSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",` +
	`"required":["prompt"],"additionalProperties":false,"properties":{` +
	`"prompt":{"type":"string","minLength":1,"description":"the task the agent carries out"},` +
	`"working_dir":{"type":"string","minLength":1,"description":"the agent's working directory: one the host allows (default: the host's)"},` +
	`"extensions":{"type":"object","description":"namespaced run options (agent_api.… or backend.<kind>.…): only keys and values the host allows",` +
	`"propertyNames":{"pattern":"^[a-z][a-z0-9_.-]*$"}},` +
	`"idempotency_key":{"type":"string","description":"set by the gateway: the key the run executes once under"}}}`

// Defaults of AdapterOptions.
const (
	// DefaultAdapterTimeout bounds one delegated run when
	// AdapterOptions.Timeout is 0: coding agents take minutes, not the
	// gateway's 30 seconds.
	DefaultAdapterTimeout = 10 * time.Minute
	// DefaultAdapterGrace is how long a cancelled or timed-out run is
	// waited for (its process to exit) before the call returns anyway.
	DefaultAdapterGrace = 5 * time.Second
	// DefaultSummaryMessages is how many error and status messages the
	// call's output keeps (the last ones).
	DefaultSummaryMessages = 8
	// MaxSummaryMessageBytes bounds each kept message.
	MaxSummaryMessageBytes = 512
	// DefaultOutputFinalTextBytes bounds the final text in the output.
	DefaultOutputFinalTextBytes = 16384
)

// AdapterOptions configure an Adapter. The zero value is ready to use.
type AdapterOptions struct {
	// AdapterID is the gateway adapter id. Default: "adp_" + the
	// backend's kind.
	AdapterID string
	// WorkingDir is the working directory of every run. A call that names
	// another one is refused (a *LimitError): where an agent works is the
	// host's decision, not the planner's. "" is the backend's default (its
	// configured directory, else this process's working directory), and a
	// call may name only a directory Allow.WorkingDirs lists.
	WorkingDir string
	// Env is laid under every run's env (the trace headers win).
	Env map[string]string
	// Extensions are fixed options of every run, such as
	// agent_api.exec.non_interactive or a backend's sandbox mode. A call
	// that sets one of these keys to another value is refused (a
	// *LimitError): a proposed step never loosens what the host set.
	Extensions map[string]json.RawMessage
	// Allow is what a call may choose beyond what the host fixed. The zero
	// value allows nothing: every run gets the host's working directory,
	// no extra directories and the backend's own defaults (a codex run is
	// sandboxed workspace-write, never danger-full-access), whatever the
	// planner proposed.
	Allow CallLimits
	// Scopes are the delegation scopes a call needs (the pack's
	// approval mode makes the call delegated; the user's delegation must
	// grant them).
	Scopes []string
	// Timeout bounds one run (the capability's attempt timeout). Default:
	// DefaultAdapterTimeout.
	Timeout time.Duration
	// Grace bounds the wait for a cancelled run's process. Default:
	// DefaultAdapterGrace.
	Grace time.Duration
	// CostCents is a fixed cost charged per run on top of the backend's
	// reported cost (the capability's cost model).
	CostCents float64
	// Messages is how many error and status messages the output keeps.
	// Default: DefaultSummaryMessages; negative keeps none.
	Messages int
	// FinalTextBytes bounds the final text in the output. Default:
	// DefaultOutputFinalTextBytes.
	FinalTextBytes int
}

// CallLimits are the run options a call may choose: the arguments of a
// governed call are a planner's (a model's) choice, so every option that
// widens what the agent may touch — where it works, which directories it
// may write, its sandbox, any dangerous extension — is the host's to
// allow. A call that chooses anything not allowed here is refused before
// the backend is asked to run (nothing is spawned), with a *LimitError
// naming the argument (matched by ErrNotAllowed; the gateway records it
// as invalid_input).
type CallLimits struct {
	// WorkingDirs are the directories a call may name as working_dir
	// (compared absolute and cleaned; a relative one is relative to this
	// process's working directory). Unused when AdapterOptions.WorkingDir
	// is set: then a call may name only that one.
	WorkingDirs []string
	// AddDirs are the directories a call may make writable with
	// agent_api.exec.add_dirs.v1: every entry, resolved as the backend
	// resolves it (against the run's working directory, cleaned), must be
	// one of them (compared absolute and cleaned).
	AddDirs []string
	// Extensions lists, by key, the values a call may give any other
	// extension (compared as JSON values): a backend's sandbox mode, the
	// model, agent_api.exec.external_sandbox.v1. A key that is not listed,
	// or a value not in its list, is refused. A call may always repeat the
	// value of a key AdapterOptions.Extensions fixes.
	Extensions map[string][]json.RawMessage
}

// ErrNotAllowed is matched by a *LimitError: a governed call chose a run
// option the host's options do not allow.
var ErrNotAllowed = errors.New("agent: run option not allowed by the host")

// LimitError refuses a governed call that chose a run option the host did
// not allow (CallLimits) or changed one it fixed (AdapterOptions
// WorkingDir, Extensions). It names the argument, never its value; it
// matches ErrNotAllowed and unwraps to the *gateway.ToolError the gateway
// records (invalid_input, not retryable, details naming the field and
// key).
type LimitError struct {
	// Field is the call's argument: "working_dir" or "extensions".
	Field string
	// Key is the extension key ("" for working_dir).
	Key string
	// Fixed says the host fixed the option to another value.
	Fixed bool
	tool  *gateway.ToolError
}

func (e *LimitError) Error() string {
	return "agent: " + e.what() + " " + e.rule()
}

func (e *LimitError) what() string {
	if e.Key != "" {
		return e.Field + "[" + safeID(e.Key) + "]"
	}
	return e.Field
}

func (e *LimitError) rule() string {
	if e.Fixed {
		return "is fixed by the host to another value"
	}
	return "is not one the host allows"
}

// Is matches ErrNotAllowed.
func (e *LimitError) Is(target error) bool { return target == ErrNotAllowed }

// Unwrap returns the tool error the gateway records.
func (e *LimitError) Unwrap() error { return e.tool }

func limitError(field, key string, fixed bool) *LimitError {
	e := &LimitError{Field: field, Key: key, Fixed: fixed}
	details := map[string]any{"field": field}
	if key != "" {
		details["key"] = safeID(key)
	}
	e.tool = gateway.NewToolError(gateway.CodeInvalidInput, false, e.what()+" "+e.rule(), details)
	return e
}

// Adapter runs an agent backend as a governed, delegated tool: a
// gateway.Adapter with one capability, run (Registration). The pack must
// permit "<adapter id>.run" and may gate it; its approval mode (delegated,
// as a rule) is the pack's. Every call is a fresh agent run: the gateway
// schema-checks the arguments, the adapter maps them to a RunRequest,
// passes the run's W3C trace context to the agent process as TRACEPARENT
// and TRACESTATE, reads the events into a bounded summary and waits for
// the completion. The call's timeout and the run's cancellation cancel
// the agent.
//
// The call's output (redacted by the gateway before it is recorded or
// shown to a planner) is:
//
//	{
//	  "agent_kind": "codex",
//	  "final_text": "…",                       // at most FinalTextBytes
//	  "exit": {"code": 0, "signal": "", "success": true},
//	  "tool_calls": 3,                         // ToolCall events that start a call
//	  "tool_names": ["command_execution"],     // sorted, unique
//	  "usage": {"input_tokens": 1, "output_tokens": 2, "cached_input_tokens": 0},
//	  "cost_usd": 0.01,
//	  "events": {"total": 12, "by_kind": {"text_output": 5, …},
//	             "channels": ["assistant", "tool"],
//	             "messages": [{"kind": "error", "channel": "error", "message": "…"}],
//	             "messages_dropped": 0}
//	}
//
// usage and cost_usd are present when the completion data reports them
// (see UsageOf). The cost and the input and output tokens are charged to
// the run's budget (Outcome.CostCents, Outcome.Tokens), also when the run
// fails (a non-success exit, a timeout): what an agent spent before it
// failed was spent.
// The agent's text output is not kept: only the final text, counts, names
// and the last few error and status messages, each clipped. The mutation
// is "agent_run:<kind>:<tool_call_id>".
//
// An agent run has side effects, so the adapter runs only a write-class
// call (one the gateway gave an idempotency key after its delegation,
// scope and approval checks); a pack that marks the capability read_only
// gets permission_denied, never an ungoverned run. A call chooses only
// the run options the host allows (AdapterOptions.Allow) and never
// changes one it fixed (AdapterOptions.WorkingDir, AdapterOptions.Extensions):
// another working directory, an extra writable directory, another sandbox
// mode, a dangerous extension the host did not allow is a *LimitError
// naming the argument (invalid_input), and the agent does not run. With
// no options at all a run gets the host's working directory, no extra
// directories and the backend's own defaults.
//
// A run that exits non-zero fails the call (execution_failed, with the
// exit status and the event summary in the details); a run past its
// timeout is a timeout; a request the backend refuses (ErrInvalidRequest,
// ErrUnsupportedCapability) is invalid_input; a run cancelled with the
// run's context returns the context's error. None of them is retryable:
// an agent run has side effects, and the gateway never repeats one.
type Adapter struct {
	backend Backend
	opts    AdapterOptions
}

// NewAdapter returns the adapter of b; opts may be nil.
func NewAdapter(b Backend, opts *AdapterOptions) *Adapter {
	a := &Adapter{backend: b}
	if opts != nil {
		a.opts = *opts
		// The adapter's own copy of what it enforces: a host editing the
		// lists and maps it handed over widens no limit.
		o := &a.opts
		o.Scopes, o.Env = slices.Clone(o.Scopes), maps.Clone(o.Env)
		o.Extensions = jsonv.CloneRaw(o.Extensions)
		o.Allow.WorkingDirs, o.Allow.AddDirs = slices.Clone(o.Allow.WorkingDirs), slices.Clone(o.Allow.AddDirs)
		if o.Allow.Extensions != nil {
			ext := make(map[string][]json.RawMessage, len(o.Allow.Extensions))
			for k, vs := range o.Allow.Extensions {
				c := make([]json.RawMessage, len(vs))
				for i, v := range vs {
					c[i] = bytes.Clone(v)
				}
				ext[k] = c
			}
			o.Allow.Extensions = ext
		}
	}
	if a.opts.AdapterID == "" && b != nil {
		a.opts.AdapterID = "adp_" + string(b.Kind())
	}
	if a.opts.Timeout <= 0 {
		a.opts.Timeout = DefaultAdapterTimeout
	}
	if a.opts.Grace <= 0 {
		a.opts.Grace = DefaultAdapterGrace
	}
	if a.opts.Messages == 0 {
		a.opts.Messages = DefaultSummaryMessages
	}
	if a.opts.FinalTextBytes <= 0 {
		a.opts.FinalTextBytes = DefaultOutputFinalTextBytes
	}
	return a
}

// CapabilityID is the governed capability id, "<adapter id>.run".
func (a *Adapter) CapabilityID() string { return a.opts.AdapterID + "." + AdapterCapability }

// Registration returns the gateway registration: the adapter id, the run
// capability with AdapterArgsSchema, the scopes, the timeout, the cost,
// one attempt (never retried) and HonorsContext.
func (a *Adapter) Registration() gateway.Registration {
	return gateway.Registration{
		AdapterID: a.opts.AdapterID,
		Adapter:   a,
		Capabilities: map[string]gateway.Capability{AdapterCapability: {
			ArgsSchema:    json.RawMessage(AdapterArgsSchema),
			ArgSchemaRef:  "schema://contextos.agent.run.v1",
			Scopes:        slices.Clone(a.opts.Scopes),
			Timeout:       a.opts.Timeout,
			CostCents:     a.opts.CostCents,
			MaxAttempts:   1,
			HonorsContext: true,
		}},
		Protocol: "agent",
		Version:  "agent_api.v1",
	}
}

// runArgs are the capability's arguments, as the schema admits them.
type runArgs struct {
	prompt, workingDir string
	extensions         map[string]json.RawMessage
}

func parseArgs(args map[string]any) (runArgs, error) {
	var r runArgs
	bad := func(field string) error {
		return gateway.NewToolError(gateway.CodeInvalidInput, false, "invalid "+field, map[string]any{"field": field})
	}
	p, ok := args["prompt"].(string)
	if !ok {
		return r, bad("prompt")
	}
	r.prompt = p
	if v, has := args["working_dir"]; has {
		if r.workingDir, ok = v.(string); !ok {
			return r, bad("working_dir")
		}
	}
	if v, has := args["extensions"]; has {
		m, ok := v.(map[string]any)
		if !ok {
			return r, bad("extensions")
		}
		r.extensions = make(map[string]json.RawMessage, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			b, err := marshalNoEscape(m[k])
			if err != nil {
				return r, bad("extensions")
			}
			r.extensions[k] = b
		}
	}
	return r, nil
}

// request builds the run's request from the call. The call chooses only
// what the host allows: a working directory other than the host's, an
// extension the host fixed to another value, or any option the host's
// CallLimits do not list is refused (a *LimitError), before the backend
// is asked to run.
func (a *Adapter) request(ctx context.Context, call *gateway.Call, args runArgs) (RunRequest, error) {
	req := RunRequest{Prompt: args.prompt, Env: maps.Clone(a.opts.Env)}
	switch {
	case a.opts.WorkingDir != "":
		if args.workingDir != "" && !sameDir(args.workingDir, a.opts.WorkingDir) {
			return req, limitError("working_dir", "", true)
		}
		req.WorkingDir = a.opts.WorkingDir
	case args.workingDir != "":
		if !slices.ContainsFunc(a.opts.Allow.WorkingDirs, func(d string) bool { return sameDir(args.workingDir, d) }) {
			return req, limitError("working_dir", "", false)
		}
		req.WorkingDir = args.workingDir
	}
	for _, k := range slices.Sorted(maps.Keys(args.extensions)) {
		v := args.extensions[k]
		if fixed, ok := a.opts.Extensions[k]; ok {
			if !sameJSON(fixed, v) {
				return req, limitError("extensions", k, true)
			}
			continue
		}
		if k == CapAddDirs {
			if !a.addDirsAllowed(v, req.WorkingDir) {
				return req, limitError("extensions", k, false)
			}
			continue
		}
		if !slices.ContainsFunc(a.opts.Allow.Extensions[k], func(ok json.RawMessage) bool { return sameJSON(ok, v) }) {
			return req, limitError("extensions", k, false)
		}
	}
	if len(a.opts.Extensions) > 0 || len(args.extensions) > 0 {
		req.Extensions = maps.Clone(args.extensions)
		if req.Extensions == nil {
			req.Extensions = map[string]json.RawMessage{}
		}
		maps.Copy(req.Extensions, a.opts.Extensions)
	}
	req.Env = withTrace(ctx, call.Trace, req.Env)
	return req, nil
}

// addDirsAllowed reports whether every directory of an
// agent_api.exec.add_dirs.v1 value, resolved as Prepare resolves it
// against the run's working directory wd, is one Allow.AddDirs lists. A
// value Prepare would refuse is not allowed either (fail closed); a
// relative entry with no working directory named is not allowed (the
// backend's default directory is not known here).
func (a *Adapter) addDirsAllowed(raw json.RawMessage, wd string) bool {
	if wd != "" {
		abs, err := filepath.Abs(wd)
		if err != nil {
			return false
		}
		wd = abs
	}
	dirs, err := addDirsValue(bytes.TrimSpace(raw), wd)
	if err != nil {
		return false
	}
	for _, d := range dirs {
		if !slices.ContainsFunc(a.opts.Allow.AddDirs, func(ok string) bool { return sameDir(d, ok) }) {
			return false
		}
	}
	return true
}

// sameDir reports whether two paths name the same directory once made
// absolute (against this process's working directory) and cleaned.
func sameDir(a, b string) bool {
	x, errA := filepath.Abs(a)
	y, errB := filepath.Abs(b)
	return errA == nil && errB == nil && x == y
}

// sameJSON reports whether two JSON values are equal as values.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// withTrace returns env with TRACEPARENT and TRACESTATE set to the W3C
// trace context a call made under ctx carries (w3ctrace.Outbound: the
// current span, else the run's trace context t), replacing any the env
// had; env is unchanged when no trace context is valid.
func withTrace(ctx context.Context, t runcontext.Trace, env map[string]string) map[string]string {
	out := w3ctrace.Outbound(ctx, t)
	w3ctrace.Inject(out, func(k, v string) {
		if k != w3ctrace.HeaderTraceparent && k != w3ctrace.HeaderTracestate {
			return
		}
		if env == nil {
			env = map[string]string{}
		}
		if k == w3ctrace.HeaderTraceparent {
			delete(env, "TRACESTATE")
		}
		env[strings.ToUpper(k)] = v
	})
	return env
}

// Call implements gateway.Adapter: one agent run.
func (a *Adapter) Call(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	if a.backend == nil {
		return nil, gateway.NewToolError(gateway.CodeExecutionFailed, false, "no agent backend", nil)
	}
	// An agent run has side effects: only a write-class call (one the
	// gateway gave an idempotency key, so it runs at most once, after its
	// delegation, scope and approval checks) may start one. A pack that
	// marks the capability read_only gets a refusal, not an ungoverned run.
	if call.IdempotencyKey == "" {
		return nil, gateway.NewToolError(gateway.CodePermissionDenied, false, "an agent run must be a governed write: the pack marks "+a.CapabilityID()+" read_only", nil)
	}
	args, err := parseArgs(call.Envelope.Args)
	if err != nil {
		return nil, err
	}
	req, err := a.request(ctx, call, args)
	if err != nil {
		return nil, err
	}
	run, err := a.backend.Run(ctx, req)
	if err != nil {
		return nil, a.startError(ctx, err)
	}
	if run == nil {
		return nil, gateway.NewToolError(gateway.CodeExecutionFailed, false, "the agent backend returned no run", nil)
	}
	sum := newSummary(a.opts.Messages)
	for ev := range run.Events() {
		sum.add(ev)
	}
	comp, err := a.wait(ctx, run)
	spent := spentOn(comp)
	if err != nil {
		// A failed run is charged what it reported spending.
		return spent, a.runError(ctx, err, sum)
	}
	kind := string(a.backend.Kind())
	out := map[string]any{
		"agent_kind": kind,
		"exit":       exitOutput(comp.Status),
		"tool_calls": sum.toolCalls,
		"tool_names": sum.names(),
		"events":     sum.output(),
	}
	if comp.FinalText != "" {
		out["final_text"] = truncate(comp.FinalText, a.opts.FinalTextBytes)
	}
	if u, ok := UsageOf(comp); ok {
		if u.InputTokens > 0 || u.OutputTokens > 0 || u.CachedInputTokens > 0 {
			out["usage"] = map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens, "cached_input_tokens": u.CachedInputTokens}
		}
		if u.CostUSD != nil {
			out["cost_usd"] = *u.CostUSD
		}
	}
	if !comp.Status.Success() {
		details := map[string]any{"exit": exitOutput(comp.Status), "events": sum.output(), "tool_calls": sum.toolCalls}
		return spent, gateway.NewToolError(gateway.CodeExecutionFailed, false, "the agent run ended with "+comp.Status.String(), details)
	}
	res := &gateway.Outcome{Output: out, Mutations: []string{"agent_run:" + kind + ":" + call.Envelope.ToolCallID}}
	if spent != nil {
		res.CostCents, res.Tokens = spent.CostCents, spent.Tokens
	}
	return res, nil
}

// spentOn returns what a run's completion reports it spent (its cost and
// its input and output tokens) as the outcome the gateway charges to the
// run's budget, whether the run succeeded or not; nil when it reports
// neither.
func spentOn(comp Completion) *gateway.Outcome {
	u, ok := UsageOf(comp)
	if !ok {
		return nil
	}
	o := &gateway.Outcome{Tokens: int(min(u.Tokens(), math.MaxInt))}
	if u.CostUSD != nil {
		o.CostCents = centsOf(*u.CostUSD)
	}
	if o.CostCents == 0 && o.Tokens == 0 {
		return nil
	}
	return o
}

// wait waits for the completion. When ctx ends first (the call's timeout,
// the run's cancellation: the run was cancelled by Start), it still waits
// up to the grace for the process to exit, so the call does not return
// with the agent running.
func (a *Adapter) wait(ctx context.Context, run *Run) (Completion, error) {
	return waitGrace(ctx, run, a.opts.Grace)
}

// waitGrace waits for run's completion; when ctx ends first it still waits
// up to grace for the process to exit.
func waitGrace(ctx context.Context, run *Run, grace time.Duration) (Completion, error) {
	comp, err := run.Wait(ctx)
	if ctx.Err() == nil {
		return comp, err
	}
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if c, e := run.Wait(gctx); gctx.Err() == nil {
		return c, e // the run's own completion: a success that came first stands
	}
	return Completion{}, ctx.Err()
}

// startError maps a refused start to a tool error.
func (a *Adapter) startError(ctx context.Context, err error) error {
	var ae *Error
	switch {
	case errors.Is(err, ErrInvalidRequest), errors.Is(err, ErrUnsupportedCapability), errors.Is(err, ErrInvalidAgentKind):
		msg := "the agent refused the request"
		if errors.As(err, &ae) {
			msg = ae.Error()
		}
		return gateway.NewToolError(gateway.CodeInvalidInput, false, msg, nil)
	}
	return a.runError(ctx, err, nil)
}

// runError maps a failed run to a tool error, or to the context's error
// when the run's context was cancelled.
func (a *Adapter) runError(ctx context.Context, err error, sum *summary) error {
	details := map[string]any{}
	if sum != nil {
		details["events"] = sum.output()
		details["tool_calls"] = sum.toolCalls
	}
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return ctx.Err()
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		details["timeout_ms"] = a.opts.Timeout.Milliseconds()
		return gateway.NewToolError(gateway.CodeTimeout, false, "the agent run exceeded its timeout", details)
	}
	msg := "the agent run failed"
	var ae *Error
	if errors.As(err, &ae) {
		msg = ae.Error() // safe by construction: no backend output
	}
	return gateway.NewToolError(gateway.CodeExecutionFailed, false, msg, details)
}

func exitOutput(s ExitStatus) map[string]any {
	m := map[string]any{"code": s.Code, "success": s.Success()}
	if s.Signal != "" {
		m["signal"] = s.Signal
	}
	return m
}

// Usage is what a backend reports of a run's model usage and cost, in its
// completion's Data, in this one shape:
//
//	{"usage": {"input_tokens": 2400, "output_tokens": 84, "cached_input_tokens": 2000}, "cost_usd": 0.0123}
//
// input_tokens counts every input token the run used, those read from or
// written to a prompt cache included (a backend whose CLI reports cache
// tokens apart adds them in); cached_input_tokens is the part read from a
// cache. Tokens, what a run charges, is input plus output.
// Both members are optional; other members of Data are the backend's own.
// A token count that is not a whole number ≥ 0 counts as absent, and so
// does a cost that is not a finite number ≥ 0.
type Usage struct {
	InputTokens       int64
	OutputTokens      int64
	CachedInputTokens int64
	// CostUSD is the reported cost, nil when none was reported.
	CostUSD *float64
}

// Tokens is the input and output tokens together, saturating at the
// largest int64 (hostile counts never wrap to a negative number).
func (u Usage) Tokens() int64 { return addTokens(u.InputTokens, u.OutputTokens) }

// addTokens adds two counts ≥ 0, saturating.
func addTokens(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// centsOf converts a cost in dollars (finite, ≥ 0) to cents, capping a
// huge one at the largest finite amount instead of losing it.
func centsOf(usd float64) float64 {
	if c := usd * 100; !math.IsInf(c, 0) {
		return c
	}
	return math.MaxFloat64
}

// UsageOf reads the usage and cost from c.Data (see Usage); ok is false
// when the data reports neither.
func UsageOf(c Completion) (u Usage, ok bool) {
	if len(c.Data) == 0 {
		return Usage{}, false
	}
	var doc struct {
		Usage map[string]json.RawMessage `json:"usage"`
		Cost  json.RawMessage            `json:"cost_usd"`
	}
	if json.Unmarshal(c.Data, &doc) != nil {
		return Usage{}, false
	}
	count := func(k string) int64 {
		raw := string(doc.Usage[k])
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			// A whole number written as a float (2400.0, 1e2) counts.
			f, ferr := strconv.ParseFloat(raw, 64)
			if ferr != nil || f != math.Trunc(f) || f < 0 {
				return 0
			}
			n = math.MaxInt64
			if f < math.MaxInt64 {
				n = int64(f)
			}
		}
		if n < 0 {
			return 0
		}
		ok = true
		return n
	}
	u.InputTokens, u.OutputTokens, u.CachedInputTokens = count("input_tokens"), count("output_tokens"), count("cached_input_tokens")
	var cost float64
	if len(doc.Cost) > 0 && json.Unmarshal(doc.Cost, &cost) == nil && cost >= 0 && !math.IsInf(cost, 0) {
		u.CostUSD, ok = &cost, true
	}
	return u, ok
}

// summary is the bounded account of a run's events.
type summary struct {
	total, toolCalls int
	byKind           map[EventKind]int
	channels         map[string]bool
	tools            map[string]bool
	keep             int
	messages         []map[string]any
	dropped          int
}

func newSummary(keep int) *summary {
	if keep < 0 {
		keep = 0
	}
	return &summary{byKind: map[EventKind]int{}, channels: map[string]bool{}, tools: map[string]bool{}, keep: keep}
}

// toolsFacet is the part of the tools facet the summary reads.
type toolsFacet struct {
	Schema string `json:"schema"`
	Tool   struct {
		Kind     *string `json:"kind"`
		Phase    *string `json:"phase"`
		ToolName *string `json:"tool_name"`
	} `json:"tool"`
}

func (s *summary) add(ev Event) {
	s.total++
	s.byKind[ev.Kind]++
	if ev.Channel != "" && len(s.channels) < maxChannels {
		s.channels[ev.Channel] = true
	}
	switch ev.Kind {
	case EventToolCall:
		var f toolsFacet
		if len(ev.Data) > 0 && json.Unmarshal(ev.Data, &f) == nil && f.Schema == CapToolsStructured {
			if f.Tool.Phase == nil || *f.Tool.Phase == "start" {
				s.toolCalls++
			}
			name := ""
			if f.Tool.ToolName != nil {
				name = *f.Tool.ToolName
			} else if f.Tool.Kind != nil {
				name = *f.Tool.Kind
			}
			if name != "" && len(s.tools) < maxToolNames {
				s.tools[cutRunes(toValidUTF8(name), maxToolNameBytes)] = true
			}
		} else {
			s.toolCalls++
		}
	case EventError, EventStatus:
		if ev.Message == "" || s.keep == 0 {
			return
		}
		m := map[string]any{"kind": string(ev.Kind), "message": truncate(ev.Message, MaxSummaryMessageBytes)}
		if ev.Channel != "" {
			m["channel"] = ev.Channel
		}
		if len(s.messages) == s.keep {
			s.messages = s.messages[1:]
			s.dropped++
		}
		s.messages = append(s.messages, m)
	}
}

// Bounds of the tool names a summary keeps.
const (
	maxToolNames     = 64
	maxToolNameBytes = 128
	maxChannels      = 32
)

func (s *summary) names() []any {
	out := []any{}
	for _, n := range slices.Sorted(maps.Keys(s.tools)) {
		out = append(out, n)
	}
	return out
}

func (s *summary) output() map[string]any {
	byKind := map[string]any{}
	for k, n := range s.byKind {
		byKind[string(k)] = n
	}
	channels := []any{}
	for _, c := range slices.Sorted(maps.Keys(s.channels)) {
		channels = append(channels, c)
	}
	msgs := make([]any, len(s.messages))
	for i, m := range s.messages {
		msgs[i] = m
	}
	return map[string]any{"total": s.total, "by_kind": byKind, "channels": channels, "messages": msgs, "messages_dropped": s.dropped}
}
