package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/sortedkeys"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// The commands that read a durable store: records, approvals and resume.

func recordsCommands() []command {
	return []command{
		{"list", "list the stored decision records (--run, --tenant, --status filter them)", cmdRecordsList},
		{"show", "print one stored decision record", cmdRecordsShow},
		{"verify", "verify the record chain; name its first broken link", cmdRecordsVerify},
	}
}

func cmdRecords(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return dispatch("contextos records", recordsCommands(), args, stdin, stdout, stderr)
}

func approvalsCommands() []command {
	return []command{
		{"list", "list the stored runs that await an approval, their arguments redacted", cmdApprovalsList},
	}
}

func cmdApprovals(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return dispatch("contextos approvals", approvalsCommands(), args, stdin, stdout, stderr)
}

// parseArgs parses fs's flags wherever they stand among args and returns
// the positional arguments ("resume RUN_ID --approve …" as well as
// "resume --approve … RUN_ID").
func parseArgs(fs *flag.FlagSet, args []string, stderr io.Writer) (pos []string, code int, ok bool) {
	for {
		if code, ok := parse(fs, args, stderr); !ok {
			return nil, code, false
		}
		if fs.NArg() == 0 {
			return pos, 0, true
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// recordSummary is one line of records list.
type recordSummary struct {
	RecordID    string          `json:"record_id"`
	RunID       string          `json:"run_id"`
	TenantID    string          `json:"tenant_id"`
	Status      decision.Status `json:"status"`
	Outcome     string          `json:"outcome,omitempty"`
	DecisionKey string          `json:"decision_key"`
	Timestamp   string          `json:"timestamp"`
	Closes      string          `json:"closes,omitempty"`
	RecordHash  string          `json:"record_hash"`
}

func cmdRecordsList(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("records list", flag.ContinueOnError)
	var st storeFlag
	st.register(fs)
	var f decision.Filter
	var status string
	fs.StringVar(&f.RunID, "run", "", "only the records of run `ID`")
	fs.StringVar(&f.TenantID, "tenant", "", "only the records of tenant `ID`")
	fs.StringVar(&status, "status", "", "only the records with `STATUS` (DECIDED, DEFERRED, REJECTED, ESCALATED, IN_FLIGHT, CLOSED)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos records list --store sqlite:PATH|postgres://… [--run ID] [--tenant ID] [--status STATUS]\n\nPrints the stored decision records, in the order they were appended, as a JSON\narray of {record_id, run_id, tenant_id, status, outcome, decision_key, timestamp,\ncloses, record_hash}.")
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	fail := func(err error) int { return failCmd(stderr, "records list", err) }
	if fs.NArg() != 0 {
		return fail(exitf(exitUsage, "takes no arguments"))
	}
	if status != "" {
		if err := f.Status.UnmarshalText([]byte(status)); err != nil {
			return fail(exitf(exitUsage, "--status: %v", err))
		}
	}
	ctx := context.Background()
	s, err := st.require(ctx, "records list")
	if err != nil {
		return fail(err)
	}
	defer s.Close()
	recs, err := s.Records().List(ctx, f)
	if err != nil {
		return fail(exitf(exitUsage, "%v", err))
	}
	out := make([]recordSummary, 0, len(recs))
	for _, r := range recs {
		out = append(out, recordSummary{RecordID: r.RecordID, RunID: r.RunID, TenantID: r.TenantID, Status: r.Status, Outcome: r.Outcome,
			DecisionKey: r.DecisionKey, Timestamp: r.Timestamp, Closes: r.Closes, RecordHash: r.RecordHash})
	}
	return fail(printJSON(stdout, out))
}

func cmdRecordsShow(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("records show", flag.ContinueOnError)
	var st storeFlag
	st.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos records show --store sqlite:PATH|postgres://… RECORD_ID\n\nPrints the stored decision record as JSON. Exit 1 when the store has no such record.")
		fs.PrintDefaults()
	}
	pos, code, ok := parseArgs(fs, args, stderr)
	if !ok {
		return code
	}
	fail := func(err error) int { return failCmd(stderr, "records show", err) }
	if len(pos) != 1 {
		return fail(exitf(exitUsage, "one RECORD_ID is required"))
	}
	ctx := context.Background()
	s, err := st.require(ctx, "records show")
	if err != nil {
		return fail(err)
	}
	defer s.Close()
	r, err := s.Records().Get(ctx, pos[0])
	if errors.Is(err, decision.ErrNotFound) {
		return fail(exitf(exitInvalid, "no record %.80q in the store", pos[0]))
	}
	if err != nil {
		return fail(exitf(exitUsage, "%v", err))
	}
	return fail(printJSON(stdout, r))
}

func cmdRecordsVerify(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("records verify", flag.ContinueOnError)
	var st storeFlag
	st.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos records verify --store sqlite:PATH|postgres://…\n\nVerifies the stored record chain: every record's hash and its link to the one\nbefore. Exit 0 and 'verified: N records' when it holds; exit 1 and\n'broken: record INDEX (RECORD_ID): REASON', naming the first broken link, when not.")
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	fail := func(err error) int { return failCmd(stderr, "records verify", err) }
	if fs.NArg() != 0 {
		return fail(exitf(exitUsage, "takes no arguments"))
	}
	ctx := context.Background()
	s, err := st.require(ctx, "records verify")
	if err != nil {
		return fail(err)
	}
	defer s.Close()
	err = s.Records().Verify(ctx)
	var ce *decision.ChainError
	switch {
	case errors.As(err, &ce):
		fmt.Fprintf(stdout, "broken: record %d (%s): %s\n", ce.Index, ce.RecordID, ce.Reason)
		return exitInvalid
	case err != nil:
		return fail(exitf(exitUsage, "%v", err))
	}
	recs, err := s.Records().List(ctx, decision.Filter{})
	if err != nil {
		return fail(exitf(exitUsage, "%v", err))
	}
	fmt.Fprintf(stdout, "verified: %d records\n", len(recs))
	return exitOK
}

func cmdApprovalsList(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("approvals list", flag.ContinueOnError)
	var st storeFlag
	st.register(fs)
	var redactors redactorsFlag
	redactors.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos approvals list --store sqlite:PATH|postgres://… [--redactors FILE]\n\nPrints the stored runs that await an approval, oldest first, as a JSON array of\n{run_id, tenant_id, gate_id, approver_role, capability_id, tool_call_id, args,\naction_digest, ttl_seconds, requested_at, deferred_record_id}. The arguments are\nredacted by every built-in rule and the run's own rules (give the host rules a\npack names with --redactors).")
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	fail := func(err error) int { return failCmd(stderr, "approvals list", err) }
	if fs.NArg() != 0 {
		return fail(exitf(exitUsage, "takes no arguments"))
	}
	if err := redactors.load(stdin); err != nil {
		return fail(exitf(exitUsage, "%v", err))
	}
	ctx := context.Background()
	s, err := st.require(ctx, "approvals list")
	if err != nil {
		return fail(err)
	}
	defer s.Close()
	// The listing reads checkpoints and records only: no pack is resolved
	// and no planner or tool is called.
	opts := &contextos.Options{}
	s.Configure(opts)
	opts.Gateway.Redactors = redactors.rules
	noPlanner := contextos.PlannerFunc(func(context.Context, *contextos.PlanRequest) (*contextos.Plan, error) {
		return nil, errors.New("approvals list plans nothing")
	})
	rt, err := contextos.New(noPlanner, pack.NewMemoryRegistry(redactors.validation()), runcontext.NewStaticKeys(nil), opts)
	if err != nil {
		return fail(exitf(exitUsage, "%v", err))
	}
	list, err := rt.PendingApprovals(ctx, s.Checkpoints())
	if err != nil {
		return fail(exitf(exitUsage, "%v", err))
	}
	// The runtime redacts by the built-in rules and the run's active
	// ones; every --redactors rule applies too, whatever the run's pack
	// activated, as serve's inbox and webhook apply them.
	if len(redactors.rules) > 0 {
		rules := make([]gateway.Redactor, 0, len(redactors.rules))
		for _, name := range sortedkeys.Of(redactors.rules) {
			rules = append(rules, redactors.rules[name])
		}
		for i := range list {
			if v, changed := gateway.RedactValue(list[i].Args, rules); changed {
				m, _ := v.(map[string]any)
				if m == nil {
					m = map[string]any{}
				}
				list[i].Args = m
			}
		}
	}
	return fail(printJSON(stdout, list))
}

func cmdResume(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("resume", flag.ContinueOnError)
	var f runFlags
	f.registerShared(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos resume RUN_ID --store sqlite:PATH|postgres://… --approve GATE=APPROVER:ROLE…\n       --pack FILE… [--pub PUBFILE | --allow-unsigned] (--plan FILE | --planner P:MODEL [--price MODEL=IN/OUT…]) --tools FILE [--evidence FILE]\n       [--memory FILE] [--ontology NS@VERSION…] [--overlay FILE…] [--record OUT] [--replay-packet OUT]\n       [--now RFC3339] [--endpoints FILE [--secrets FILE]] [--redactors FILE]\n\nContinues a run paused in the store (by an earlier run or resume, in another\nprocess) with an approval of the gate it awaits, by that approver holding that\nrole and bound to the paused action, and prints what run prints. The flags are\nrun's: the same packs, plan, tools, evidence, memory, ontologies and overlays.\nExit 0 when the run went on (whatever its status), 1 when it awaits no approval\nor cannot be resumed, 2 on a usage or internal error.")
		fs.PrintDefaults()
	}
	pos, code, ok := parseArgs(fs, args, stderr)
	if !ok {
		return code
	}
	fail := func(err error) int { return failCmd(stderr, "resume", err) }
	switch {
	case f.store.spec == "":
		return fail(exitf(exitUsage, "resume needs --store sqlite:PATH or --store postgres://… (the paused run is in a durable store)"))
	case len(pos) != 1:
		return fail(exitf(exitUsage, "one RUN_ID is required"))
	case f.plan == "" && f.planner == "" || f.tools == "":
		return fail(exitf(exitUsage, "--pack, --plan (or --planner) and --tools are required"))
	case f.plan != "" && f.planner != "":
		return fail(exitf(exitUsage, "--plan and --planner are alternatives: give one"))
	case len(f.approves) == 0:
		return fail(exitf(exitUsage, "--approve GATE=APPROVER:ROLE is required: it answers the gate the run awaits"))
	}
	runID := pos[0]
	ctx := context.Background()
	st, err := f.store.require(ctx, "resume")
	if err != nil {
		return fail(err)
	}
	defer st.Close()
	in, err := loadRunInputs(ctx, &f, stdin)
	if err != nil {
		return fail(err)
	}
	rt, closeLive, err := buildRunRuntime(ctx, &f, in, st, stdin, stderr)
	if err != nil {
		return fail(err)
	}
	defer closeLive()
	out, res, err := resumeRun(ctx, rt, in, runID)
	if err != nil {
		return fail(err)
	}
	printNotices(stderr, "resume", out.Notices)
	return fail(renderRun(ctx, &f, rt, out, res, stdout))
}

// testHookPendingRead, set by a test, runs after resumeRun has read the
// pause it answers and before it resumes: where another process's resume
// can continue the run.
var testHookPendingRead func(runID string)

// resumeRun answers the approval runID awaits with its --approve and
// continues the run, answering each further pause an --approve answers.
// Each resume names the pause it answers (its DEFERRED record): a run that
// another process continued in the meantime, to its end or to a later
// pause of the same gate, is refused rather than given an approval of
// another action.
func resumeRun(ctx context.Context, rt *contextos.Runtime, in *runInputs, runID string) (*runOutput, *contextos.Result, error) {
	pending, err := rt.PendingApprovals(ctx, contextos.RunList{runID})
	if err != nil {
		return nil, nil, exitf(exitUsage, "%v", err)
	}
	var p *contextos.PendingApproval
	for i := range pending {
		if pending[i].RunID == runID {
			p = &pending[i]
		}
	}
	if p == nil {
		return nil, nil, exitf(exitInvalid, "run %.80q awaits no approval in the store (unknown, finished, or being continued)", runID)
	}
	if testHookPendingRead != nil {
		testHookPendingRead(runID)
	}
	approvals := maps.Clone(in.approvals)
	a, ok := approvals[p.GateID]
	if !ok {
		return nil, nil, exitf(exitUsage, "run %.80q awaits %s (role %s): give --approve %s=APPROVER:ROLE", runID, p.GateID, p.ApproverRole, p.GateID)
	}
	if a.role != p.ApproverRole {
		// Refused here, before the gateway would deny it and end the run.
		return nil, nil, exitf(exitUsage, "run %.80q awaits %s by role %s; --approve gives role %.80q", runID, p.GateID, p.ApproverRole, a.role)
	}
	delete(approvals, p.GateID)
	c := newRunCollector()
	ap := cliApproval(p.ToolCallID, p.GateID, p.ActionDigest, a, in.now())
	if err := c.collect(rt.ResumeStream(ctx, runID, contextos.ResumeInput{Approvals: []gateway.Approval{ap}, Pause: p.RecordID})); err != nil {
		return nil, nil, exitf(exitInvalid, "%v", err)
	}
	return c.answerPauses(ctx, rt, in, approvals)
}

// printJSON prints v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return exitf(exitUsage, "%v", err)
	}
	return nil
}
