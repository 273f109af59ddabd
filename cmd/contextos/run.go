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
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/wire"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/transport"
)

// packSet is the --pack, --pub and --allow-unsigned flags: the packs go
// into an in-memory registry the runtime trusts.
type packSet struct {
	packs, pubs   multiFlag
	allowUnsigned bool
	redactors     redactorsFlag // redactors.go
}

func (s *packSet) register(fs *flag.FlagSet) {
	fs.Var(&s.packs, "pack", "pack `FILE`, plain or signed (repeatable)")
	fs.Var(&s.pubs, "pub", "trusted public key `FILE`; signed packs must verify with one (repeatable)")
	fs.BoolVar(&s.allowUnsigned, "allow-unsigned", false, "accept plain (unsigned) packs, signed here with a throwaway key")
	s.redactors.register(fs)
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
	reg := pack.NewMemoryRegistry()
	var packs []*pack.Pack
	for _, name := range s.packs {
		data, err := readInput(name, stdin)
		if err != nil {
			return nil, nil, nil, err
		}
		if isSigned(data) {
			v, err := pack.Verify(ctx, data, keys)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("%s: %w", name, err)
			}
			packs = append(packs, v.Pack)
		} else {
			if !s.allowUnsigned {
				return nil, nil, nil, fmt.Errorf("%s: the pack is not signed (sign it, or pass --allow-unsigned)", name)
			}
			p, err := pack.DecodeAndValidate(data)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("%s: %w", name, err)
			}
			if data, err = pack.Sign(p, devKid, dev); err != nil {
				return nil, nil, nil, err
			}
			keys.Add(devKid, dev.Public().(ed25519.PublicKey))
			packs = append(packs, p)
		}
		e, err := reg.Put(ctx, data)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		if _, err := reg.SetState(ctx, e.Ref, pack.StatePublished, "contextos run"); err != nil {
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
			if r.Error == nil {
				code := gateway.CodeExecutionFailed
				if r.Status != "failed" {
					code = gateway.CodePermissionDenied
				}
				return nil, gateway.NewToolError(code, false, "scripted "+r.Status, nil)
			}
			e := *r.Error
			return nil, &e
		}
		return &gateway.Outcome{Output: r.Output, Mutations: r.Mutations, CostCents: r.CostCents}, nil
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
	Status           decision.Status               `json:"status"`
	Record           *decision.Record              `json:"decision_record"`
	ToolResults      []*gateway.ToolResultEnvelope `json:"tool_results"`
	Events           []contextos.Event             `json:"events"`
	PendingApprovals []*gateway.ApprovalRequest    `json:"pending_approvals"`
}

func cmdRun(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var ps packSet
	ps.register(fs)
	var ontologies, approves multiFlag
	var claims claimFlags
	claims.register(fs)
	fs.Var(&ontologies, "ontology", "ontology the host declares, `NS@VERSION` (repeatable)")
	fs.Var(&approves, "approve", "answer a pause on a gate: `GATE=APPROVER:ROLE` (repeatable)")
	reqPath := fs.String("request", "", "invokeAgent request `FILE`")
	rcPath := fs.String("run-context", "", "RunContext `FILE`")
	planPath := fs.String("plan", "", "plan `FILE`: a JSON array of planner turns")
	toolsPath := fs.String("tools", "", "tools `FILE`: capability id → the results of its successive calls")
	evPath := fs.String("evidence", "", "evidence `FILE`: a JSON array of items")
	memPath := fs.String("memory", "", "memory `FILE`: a JSON array of items")
	recordOut := fs.String("record", "", "write the decision record to `OUT`")
	packetOut := fs.String("replay-packet", "", "write the replay packet to `OUT`")
	nowFlag := fs.String("now", "", "fixed clock, RFC 3339 (default: the wall clock)")
	endpointsPath := fs.String("endpoints", "", "endpoints `FILE`: endpoint_ref → {transport, url|command, auth, timeout_ms, max_attempts, backoff_ms, jitter}; those adapters are called for real")
	secretsPath := fs.String("secrets", "", "secrets `FILE`: secret name → value (or {key: value}) for the endpoints' auth")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos run --pack FILE… [--pub PUBFILE | --allow-unsigned] --request FILE --run-context FILE\n       --plan FILE --tools FILE [--approve GATE=APPROVER:ROLE] [--evidence FILE] [--memory FILE]\n       [--ontology NS@VERSION…] [--record OUT] [--replay-packet OUT] [--now RFC3339]\n       [--endpoints FILE [--secrets FILE]] [--redactors FILE]\n\nRuns one invocation with a scripted planner and scripted tools (or, for\nadapters whose endpoint_ref is in --endpoints, the real tools) and prints\n{status, decision_record, tool_results, events, pending_approvals}. Exit 0 when\nthe run completed (whatever its status), 1 on invalid input, 2 on an internal error.")
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "contextos run: "+format+"\n", a...)
		return code
	}
	if *reqPath == "" || *rcPath == "" || *planPath == "" || *toolsPath == "" || fs.NArg() != 0 {
		return fail(exitUsage, "--pack, --request, --run-context, --plan and --tools are required")
	}
	ctx := context.Background()
	reg, keys, packs, err := ps.registry(ctx, stdin)
	if err != nil {
		return fail(exitInvalid, "%v", err)
	}
	var req *runcontext.InvokeRequest
	var rc *runcontext.RunContext
	var turns []*contextos.Plan
	tools := &scriptedTools{results: map[string][]scriptedResult{}, next: map[string]int{}}
	for _, f := range []struct {
		path   string
		decode func([]byte) error
	}{
		{*reqPath, func(b []byte) (err error) { req, err = runcontext.DecodeInvokeRequest(b); return }},
		{*rcPath, func(b []byte) (err error) { rc, err = runcontext.DecodeRunContext(b); return }},
		{*planPath, func(b []byte) error { return strictJSON(b, &turns) }},
		{*toolsPath, func(b []byte) error {
			if err := strictJSON(b, &tools.results); err != nil {
				return err
			}
			for id, rs := range tools.results {
				for i, r := range rs {
					if !slices.Contains(scriptedStatuses, r.Status) {
						return fmt.Errorf("%s[%d].status: %.40q is not one of %s", id, i, r.Status, strings.Join(scriptedStatuses[1:], ", "))
					}
				}
			}
			return nil
		}},
	} {
		data, err := readInput(f.path, stdin)
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		if err := f.decode(data); err != nil {
			return fail(exitInvalid, "%s: %v", f.path, err)
		}
	}
	approvals := map[string][2]string{}
	for _, a := range approves {
		gate, who, ok1 := strings.Cut(a, "=")
		approver, role, ok2 := strings.Cut(who, ":")
		if !ok1 || !ok2 || gate == "" || approver == "" || role == "" {
			return fail(exitUsage, "--approve %q: want GATE=APPROVER:ROLE", a)
		}
		approvals[gate] = [2]string{approver, role}
	}
	now := time.Now
	if *nowFlag != "" {
		t, err := time.Parse(time.RFC3339, *nowFlag)
		if err != nil {
			return fail(exitUsage, "--now: %v", err)
		}
		now = func() time.Time { return t }
	}
	var live *liveAdapters
	if *endpointsPath != "" {
		var entries map[string]endpointEntry
		data, err := readInput(*endpointsPath, stdin)
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		if err := strictJSON(data, &entries); err != nil {
			return fail(exitInvalid, "%s: %v", *endpointsPath, err)
		}
		secrets := transport.MapSecrets{}
		if *secretsPath != "" {
			data, err := readInput(*secretsPath, stdin)
			if err != nil {
				return fail(exitUsage, "%v", err)
			}
			if secrets, err = readSecrets(data); err != nil {
				return fail(exitInvalid, "%s: %v", *secretsPath, err)
			}
		}
		if live, err = newLiveAdapters(ctx, packs, entries, secrets); err != nil {
			return fail(exitInvalid, "%s: %v", *endpointsPath, err)
		}
		defer live.close()
	} else if *secretsPath != "" {
		return fail(exitUsage, "--secrets needs --endpoints")
	}
	opts := &contextos.Options{Adapters: registrationsWith(packs, tools.adapter, live), Ontologies: ontologies, ReplaySampleRate: 1, Now: now}
	opts.Gateway.Redactors = ps.redactors.rules
	if opts.Identity, err = claims.options(); err != nil {
		return fail(exitUsage, "--claim-pub: %v", err)
	}
	ev, mem, code, ok := readEvidenceMemory("run", *evPath, *memPath, stdin, stderr)
	if !ok {
		return code
	}
	if ev != nil {
		opts.Evidence = ev
	}
	if mem != nil {
		opts.Memory = contextos.NewInMemoryMemory(mem...)
	}
	planner := contextos.PlannerFunc(func(ctx context.Context, r *contextos.PlanRequest) (*contextos.Plan, error) {
		if r.Turn >= len(turns) {
			return nil, fmt.Errorf("the plan file has %d turns; turn %d was asked for", len(turns), r.Turn+1)
		}
		return turns[r.Turn], nil
	})
	rt, err := contextos.New(planner, reg, keys, opts)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	out := runOutput{Events: []contextos.Event{}, PendingApprovals: []*gateway.ApprovalRequest{}}
	var res *contextos.Result
	collect := func(events func(func(contextos.Event, error) bool)) error {
		for e, err := range events {
			if err != nil {
				return err
			}
			if e.Kind == contextos.EventResult {
				res = e.Final
				continue
			}
			out.Events = append(out.Events, e)
		}
		return nil
	}
	if err := collect(rt.Stream(ctx, req, rc)); err != nil {
		return fail(exitInvalid, "%v", err)
	}
	for res.Pending != nil {
		a, ok := approvals[res.Pending.GateID]
		if !ok {
			break
		}
		delete(approvals, res.Pending.GateID)
		ap := gateway.Approval{ApprovalID: "apr_cli_" + res.Pending.ToolCallID, GateID: res.Pending.GateID, ActionDigest: res.Pending.ActionDigest,
			Approver: a[0], ApproverRole: a[1], DecidedAt: now()}
		if err := collect(rt.ResumeStream(ctx, res.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{ap}})); err != nil {
			return fail(exitUsage, "resume: %v", err)
		}
	}
	out.Status, out.Record, out.ToolResults = res.Status, res.Record, res.ToolResults
	if res.Pending != nil {
		out.PendingApprovals = append(out.PendingApprovals, res.Pending)
	}
	// The run's result goes to stdout whatever happens to the files.
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fail(exitUsage, "%v", err)
	}
	if *recordOut != "" {
		if err := writeJSON(*recordOut, res.Record); err != nil {
			return fail(exitUsage, "%v", err)
		}
	}
	if *packetOut != "" {
		var p *replay.Packet
		if res.ReplayPacketID != "" {
			p, err = rt.Packets().Get(ctx, res.ReplayPacketID)
		} else {
			// A paused run is captured from its checkpoint: the packet
			// replays to the same pause.
			p, err = rt.Capture(ctx, res.RunID, replay.SourceDecisionRecord)
		}
		if err != nil {
			return fail(exitUsage, "no replay packet is captured for run %s: %v", res.RunID, err)
		}
		if err := writeJSON(*packetOut, p); err != nil {
			return fail(exitUsage, "%v", err)
		}
	}
	return exitOK
}

func cmdReplay(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	var ps packSet
	ps.register(fs)
	var ontologies multiFlag
	var claims claimFlags
	claims.register(fs)
	fs.Var(&ontologies, "ontology", "ontology the host declares, `NS@VERSION` (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos replay --pack FILE… [--pub PUBFILE | --allow-unsigned] [--ontology NS@VERSION…] [--redactors FILE] PACKET\n\nReplays a replay packet offline (recorded planner outputs and tool outcomes, no\nlive call) against the given packs, which must have the pinned content hashes,\nand prints the result as JSON. Exit 0 on replay_equal, 1 on a mismatch or\ntampering, 2 on a usage error.")
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
	data, err := readInput(fs.Arg(0), stdin)
	if err != nil {
		fmt.Fprintln(stderr, "contextos replay:", err)
		return exitUsage
	}
	var p replay.Packet
	if err := wire.Strict(data); err != nil { // duplicate members, invalid UTF-8
		fmt.Fprintf(stderr, "contextos replay: %s: %v\n", fs.Arg(0), err)
		return exitInvalid
	}
	if err := json.Unmarshal(data, &p); err != nil {
		fmt.Fprintf(stderr, "contextos replay: %s: %v\n", fs.Arg(0), err)
		return exitInvalid
	}
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
	rt, err := contextos.New(noPlanner, reg, keys, &contextos.Options{Adapters: registrations(packs, noLive), Ontologies: ontologies, Identity: identity,
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
