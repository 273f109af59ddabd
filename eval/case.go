package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/problem"
	"github.com/contextos/contextos/internal/wire"
	"github.com/contextos/contextos/runcontext"
)

// ErrCase reports a golden case file that cannot be used: malformed JSON,
// an unknown or misspelt field, a missing or contradictory member. The
// error is a *CaseError naming the file and the field.
var ErrCase = errors.New("eval: invalid golden case")

// CaseError is a golden case refused: the file, the JSON path of the field
// at fault ("" for the document) and why. It matches ErrCase.
type CaseError struct {
	File    string
	Field   string
	Message string
}

func (e *CaseError) Error() string {
	field := e.Field
	if field == "" {
		field = "(document)"
	}
	return fmt.Sprintf("eval: golden case %s: %s: %s", e.File, field, e.Message)
}

// Is matches ErrCase.
func (e *CaseError) Is(target error) bool { return target == ErrCase }

// MaxCaseBytes bounds a golden case file.
const MaxCaseBytes = 4 << 20

// Case is one golden case: a scripted invocation (request, run context,
// evidence, memory, planner turns, tool results, approvals) or a recorded
// replay packet, and what the run must give (Expect). The package
// documentation shows a complete file.
type Case struct {
	// Name is the file name without ".json"; File the path it was read
	// from (packet paths resolve against its directory).
	Name string `json:"-"`
	File string `json:"-"`

	// Intent is the intent the case scores under; default: the request's
	// input.intent (or, for a packet, the recorded request's).
	Intent      string `json:"intent,omitempty"`
	Description string `json:"description,omitempty"`

	// Request and RunContext are the invokeAgent request and the host's
	// RunContext, decoded strictly by package runcontext.
	Request    json.RawMessage `json:"request,omitempty"`
	RunContext json.RawMessage `json:"run_context,omitempty"`
	// Evidence and Memory are what the compiler is offered.
	Evidence compiler.StaticEvidence `json:"evidence,omitempty"`
	Memory   compiler.StaticMemory   `json:"memory,omitempty"`
	// Turns are the scripted planner's answers, in order (the root Plan
	// type; the CLI's plan file). When they run out the run escalates.
	Turns []contextos.Plan `json:"turns,omitempty"`
	// PlannerLatencyMS is the simulated time each planner turn takes.
	PlannerLatencyMS int64 `json:"planner_latency_ms,omitempty"`
	// Tools are the scripted results per capability id
	// ("adp_orders.lookup"), one per successive call, the last repeating.
	Tools map[string][]ToolResult `json:"tools,omitempty"`
	// Approve answers pauses: a pause on GateID is approved by Approver
	// holding Role; a pause nobody answers leaves the run DEFERRED.
	Approve []Approval `json:"approve,omitempty"`
	// Packet is the path of a recorded replay packet (relative to the case
	// file, inside its directory): the case runs the packet's recorded
	// inputs against the pack under test, and replays it on the version
	// it pins when the registry holds that version.
	Packet string `json:"packet,omitempty"`
	// Secrets are values that must never appear in the run's records or
	// replay packet (the safety evaluator's redaction check).
	Secrets []string `json:"secrets,omitempty"`
	// Now is the start of the simulated clock (RFC 3339); default
	// 2026-05-04T09:31:00Z.
	Now string `json:"now,omitempty"`

	Expect Expect `json:"expect"`

	req   *runcontext.InvokeRequest
	rc    *runcontext.RunContext
	start time.Time
}

// ToolResult is one scripted result of a capability, the shape of the
// CLI's tools file: a status (ok, completed or empty succeed; failed,
// error, blocked, rejected, denied fail), the output, a tool error, the
// mutations of a write, the simulated latency, and what the attempt spent
// (cost and model tokens), charged whether it succeeded or failed.
type ToolResult struct {
	Status    string             `json:"status,omitempty"`
	Output    map[string]any     `json:"output,omitempty"`
	Error     *gateway.ToolError `json:"error,omitempty"`
	Mutations []string           `json:"mutations,omitempty"`
	LatencyMS int64              `json:"latency_ms,omitempty"`
	CostCents float64            `json:"cost_cents,omitempty"`
	Tokens    int                `json:"tokens,omitempty"`
}

// Approval answers a pause on a gate.
type Approval struct {
	GateID   string `json:"gate_id" jsonschema:"required"`
	Approver string `json:"approver" jsonschema:"required"`
	Role     string `json:"role" jsonschema:"required"`
}

// Expect is what a case's run must give. Only Status is required; every
// other member is checked when present.
type Expect struct {
	// Status is the final record's status (DECIDED, REJECTED, …).
	Status decision.Status `json:"status" jsonschema:"required"`
	// Outcome is the final record's outcome.
	Outcome string `json:"outcome,omitempty"`
	// Tools is the expected minimal surface: the surfaced capability ids,
	// in any order.
	Tools []string `json:"tools,omitempty"`
	// ToolManifest, BudgetReport and RuntimeControls are compared exactly
	// (canonical JSON) with the compiled context's.
	ToolManifest    []compiler.ToolManifestEntry `json:"tool_manifest,omitempty"`
	BudgetReport    *compiler.BudgetReport       `json:"budget_report,omitempty"`
	RuntimeControls *compiler.RuntimeControls    `json:"runtime_controls,omitempty"`
	// PolicyResults are rule outcomes the compile's policy evaluation
	// must contain; PolicyVerdict its overall verdict.
	PolicyResults []PolicyResult `json:"policy_results,omitempty"`
	PolicyVerdict string         `json:"policy_verdict,omitempty"`
	// Pauses are the gates the run pauses on, in order.
	Pauses []string `json:"pauses,omitempty"`
	// Calls must each be called at least once; NoCalls never (capability
	// ids). A call is a tool result of any status.
	Calls   []string `json:"calls,omitempty"`
	NoCalls []string `json:"no_calls,omitempty"`
	// ReplayEqual is whether the run's packet must replay equal; default
	// true.
	ReplayEqual *bool `json:"replay_equal,omitempty"`
}

// PolicyResult is one rule's expected outcome (allow, deny,
// not_applicable).
type PolicyResult struct {
	RuleID  string `json:"rule_id" jsonschema:"required"`
	Outcome string `json:"outcome" jsonschema:"required"`
}

// defaultStart is the simulated clock's default start.
var defaultStart = time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC)

// Load reads every *.json file directly in dir (not subdirectories, where
// packet files live), in name order, as golden cases. Files are read
// through an os.Root on dir: a symbolic link leading out of dir, a file
// that is not a regular file (a named pipe, a device) or one larger than
// MaxCaseBytes fails the load. A file whose extension is ".json" in
// another case (".JSON", ".Json") is refused rather than skipped: it was
// meant as a case, and would not run. Any file that is not a valid case
// fails the load (fail closed): the error is a *CaseError, which names the
// file and never quotes its content.
func Load(dir string) ([]*Case, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("eval: golden directory: %w", err)
	}
	defer root.Close()
	d, err := root.Open(".")
	if err != nil {
		return nil, fmt.Errorf("eval: golden directory: %w", err)
	}
	ents, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("eval: golden directory: %w", err)
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		ext := filepath.Ext(n)
		switch {
		case e.IsDir() || !strings.EqualFold(ext, ".json"):
			continue
		case ext != ".json":
			return nil, &CaseError{File: filepath.Join(dir, n), Message: "a golden case file's extension must be .json in lower case"}
		}
		names = append(names, n)
	}
	slices.Sort(names)
	cases := make([]*Case, 0, len(names))
	for _, n := range names {
		path := filepath.Join(dir, n)
		data, err := readRooted(root, n, MaxCaseBytes)
		if err != nil {
			return nil, &CaseError{File: path, Message: err.Error()}
		}
		c, err := DecodeCase(path, data)
		if err != nil {
			return nil, err
		}
		cases = append(cases, c)
	}
	return cases, nil
}

// DecodeCase decodes one golden case file strictly: unknown or misspelt
// fields, duplicate members, a scripted case without request or run
// context, a packet case with scripted members, an unknown status or an
// invalid clock are refused with a *CaseError naming file and field. file
// names the case (its base name without .json is Case.Name).
func DecodeCase(file string, data []byte) (*Case, error) {
	fail := func(field, format string, args ...any) (*Case, error) {
		return nil, &CaseError{File: file, Field: field, Message: fmt.Sprintf(format, args...)}
	}
	if len(data) > MaxCaseBytes {
		return fail("", "is larger than %d bytes", MaxCaseBytes)
	}
	var c Case
	if probs, _ := wire.Decode(data, &c); len(probs) > 0 {
		// A misspelt member also leaves the right one missing: name the
		// misspelling.
		p := probs[0]
		if i := slices.IndexFunc(probs, func(p wire.Problem) bool { return p.Message != "is required" }); i >= 0 {
			p = probs[i]
		}
		return fail(p.Path, "%s", safeMessage(p.Message))
	}
	c.File = file
	c.Name = strings.TrimSuffix(filepath.Base(file), ".json")
	c.start = defaultStart
	if c.Now != "" {
		t, err := time.Parse(time.RFC3339, c.Now)
		if err != nil {
			return fail("now", "must be an RFC 3339 date-time")
		}
		c.start = t
	}
	if !slices.Contains([]decision.Status{decision.Decided, decision.Deferred, decision.Rejected, decision.Escalated, decision.InFlight}, c.Expect.Status) {
		return fail("expect.status", "%q is not a final record status (DECIDED, DEFERRED, REJECTED, ESCALATED, IN_FLIGHT)", problem.Clip(string(c.Expect.Status)))
	}
	if c.PlannerLatencyMS < 0 {
		return fail("planner_latency_ms", "must be ≥ 0")
	}
	for i, s := range c.Secrets {
		if len(s) < 4 {
			return fail(wire.Index("secrets", i), "a secret must be at least 4 bytes (a shorter one matches by accident)")
		}
	}
	for i, a := range c.Approve {
		if a.GateID == "" || a.Approver == "" || a.Role == "" {
			return fail(wire.Index("approve", i), "gate_id, approver and role are required")
		}
	}
	for i, r := range c.Expect.PolicyResults {
		if !slices.Contains([]string{"allow", "deny", "not_applicable"}, r.Outcome) {
			return fail(wire.Index("expect.policy_results", i)+".outcome", "must be allow, deny or not_applicable")
		}
	}
	if c.Packet != "" {
		switch {
		case len(c.Request) > 0, len(c.RunContext) > 0, len(c.Turns) > 0, len(c.Tools) > 0, len(c.Evidence) > 0, len(c.Memory) > 0, len(c.Approve) > 0, c.PlannerLatencyMS != 0:
			return fail("packet", "a packet case replays what the packet recorded: request, run_context, evidence, memory, turns, tools, approve and planner_latency_ms must be left out")
		case !filepath.IsLocal(filepath.FromSlash(c.Packet)):
			return fail("packet", "must be a path relative to the case file, inside its directory")
		}
		return &c, nil
	}
	if len(c.Request) == 0 {
		return fail("request", "is required (or give a packet)")
	}
	if len(c.RunContext) == 0 {
		return fail("run_context", "is required (or give a packet)")
	}
	req, err := runcontext.DecodeInvokeRequest(c.Request)
	if err != nil {
		return fail("request", "%v", err)
	}
	rc, err := runcontext.DecodeRunContext(c.RunContext)
	if err != nil {
		return fail("run_context", "%v", err)
	}
	c.req, c.rc = req, rc
	for id, rs := range c.Tools {
		if !strings.Contains(id, ".") {
			return fail(wire.Join("tools", id), "must be a capability id adapter_id.capability")
		}
		for i, r := range rs {
			if !slices.Contains(scriptedStatuses, r.Status) {
				return fail(wire.Index(wire.Join("tools", id), i)+".status", "%q is not one of %s", problem.Clip(r.Status), strings.Join(scriptedStatuses[1:], ", "))
			}
			if r.LatencyMS < 0 || r.CostCents < 0 || r.Tokens < 0 {
				return fail(wire.Index(wire.Join("tools", id), i), "latency_ms, cost_cents and tokens must be ≥ 0")
			}
		}
	}
	if c.Intent == "" {
		c.Intent = req.Input.Intent
	}
	return &c, nil
}

// scriptedStatuses are the statuses a scripted result may give (the CLI's
// tools file).
var scriptedStatuses = []string{"", "ok", "completed", "failed", "error", "blocked", "rejected", "denied"}
