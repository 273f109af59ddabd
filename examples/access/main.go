// Command access is the Go side of docs/getting-started.md: the IT access
// request pack that page writes, validated, signed, reviewed and
// published, then run by a runtime embedded in a Go program.
//
// An engineer asks for admin access to a database. The agent looks the
// employee up in the directory (a read-only tool), then asks IAM to grant
// the access (a write). The pack's GATE_SECURITY_REVIEW holds any grant of
// admin or owner level, judged on the call's own arguments, so the run
// pauses before IAM is called; a security lead approves that exact call;
// the resumed run grants the access once and ends DECIDED; and the replay
// of the run, offline, is replay_equal without calling IAM again.
//
// Run it with `go run ./examples/access`. The pack, request and run
// context are the files next to this one, the same ones the page shows.
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	_ "embed"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

var (
	//go:embed pack.json
	packJSON []byte
	//go:embed request.json
	requestJSON []byte
	//go:embed run-context.json
	runContextJSON []byte
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "access:", err)
		os.Exit(1)
	}
}

// run publishes the pack, runs the request to its pause, approves it,
// resumes the run and replays it, writing what happens to w.
func run(ctx context.Context, w io.Writer) error {
	registry, keys, err := publish(ctx, w)
	if err != nil {
		return err
	}
	req, err := runcontext.DecodeInvokeRequest(requestJSON)
	if err != nil {
		return err
	}
	runCtx, err := runcontext.DecodeRunContext(runContextJSON)
	if err != nil {
		return err
	}
	iam := &iamService{}

	// quick start: begin
	rt, err := contextos.New(contextos.PlannerFunc(plan), registry, keys, &contextos.Options{
		Adapters: []gateway.Registration{
			{AdapterID: "adp_directory", Adapter: gateway.AdapterFunc(lookup), Capabilities: map[string]gateway.Capability{"lookup": {HonorsContext: true}}},
			{AdapterID: "adp_iam", Adapter: gateway.AdapterFunc(iam.grant), Capabilities: map[string]gateway.Capability{"grant": {HonorsContext: true}}},
		},
		Ontologies:       []string{"ont.it@1.0.0"}, // the ontology versions this host supports
		ReplaySampleRate: 1,                        // capture every run for replay
	})
	if err != nil {
		return err
	}
	res, err := rt.Invoke(ctx, req, runCtx)
	if err != nil {
		return err // the request could not run at all; governed outcomes are results
	}
	if res.Status != decision.Deferred {
		return fmt.Errorf("the run did not pause for review: %s", res.Status)
	}
	fmt.Fprintf(w, "run      %s: %s, awaiting %s by a %s\n", res.RunID, res.Status, res.Pending.GateID, res.Pending.ApproverRole)

	// A security lead approves the paused call, bound to its exact arguments.
	approval := gateway.Approval{ApprovalID: "apr_sec_1", GateID: res.Pending.GateID, ActionDigest: res.Pending.ActionDigest,
		Approver: "usr_sec_9", ApproverRole: "security_lead", DecidedAt: time.Now()}
	res, err = rt.Resume(ctx, res.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{approval}})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "resume   %s: %s %s, approved by %s\n", res.RunID, res.Status, res.Record.Outcome, res.Record.Approvals[0].Approver)

	// Replay the run offline from its packet: no planner, no tool is called.
	packet, err := rt.Packets().Get(ctx, res.ReplayPacketID)
	if err != nil {
		return err
	}
	report, err := rt.Replay(ctx, packet)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "replay   %s, %d differences\n", report.Status, len(report.Diffs))
	// quick start: end

	fmt.Fprintf(w, "iam      %d grant(s): %s\n", len(iam.calls()), strings.Join(iam.calls(), "; "))
	return nil
}

// publish validates the pack, signs it with a development key, and
// reviews and publishes it in an in-memory registry: the registry and the
// keys a runtime verifies packs with. A service keeps both in a durable
// store (docs/stores.md) and its private key out of the process.
func publish(ctx context.Context, w io.Writer) (pack.Registry, pack.KeyResolver, error) {
	p, err := pack.DecodeAndValidate(packJSON, nil) // strict decoding and every validation gate
	if err != nil {
		return nil, nil, err
	}
	seed := sha256.Sum256([]byte("contextos access example dev key"))
	key := ed25519.NewKeyFromSeed(seed[:])
	kid := pack.KeyID(key.Public().(ed25519.PublicKey))
	signed, err := pack.Sign(p, kid, key, nil)
	if err != nil {
		return nil, nil, err
	}
	reg := pack.NewMemoryRegistry(nil)
	entry, err := reg.Put(ctx, signed)
	if err != nil {
		return nil, nil, err
	}
	// Each required review role signs off, each by a reviewer of its own.
	if _, err := pack.Publish(ctx, reg, entry.Ref, "first release",
		pack.Signoff{Reviewer: "ana", Role: pack.RoleArchitecture}, pack.Signoff{Reviewer: "raj", Role: pack.RoleSecurity},
		pack.Signoff{Reviewer: "mei", Role: pack.RoleData}, pack.Signoff{Reviewer: "ola", Role: pack.RoleEvaluation}); err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(w, "pack     %s published, signed by %s\n", entry.Ref, kid)
	return reg, runcontext.NewStaticKeys(map[string]ed25519.PublicKey{kid: key.Public().(ed25519.PublicKey)}), nil
}

// plan is the planner: look the employee up, then grant what the request
// asks for and propose the decision. A host plugs a model in here
// (docs/planners.md); the pack, the critic and the gateway decide either
// way.
func plan(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	employee, _ := req.Request.Input.Context["employee_id"].(string)
	system, _ := req.Request.Input.Context["system"].(string)
	if len(req.Results) == 0 {
		return &contextos.Plan{Steps: []contextos.Step{{CapabilityID: "adp_directory.lookup", Args: map[string]any{"employee_id": employee}}}}, nil
	}
	return &contextos.Plan{
		Steps: []contextos.Step{{CapabilityID: "adp_iam.grant", Args: map[string]any{"employee_id": employee, "system": system, "level": "admin"}}},
		Decision: &contextos.DecisionProposal{DecisionKey: "it.access.grant", Outcome: "granted",
			Outputs:    map[string]any{"system": system, "level": "admin"},
			Rationale:  "Active engineer on the billing team; admin access granted after security review.",
			Confidence: 0.9, SubjectIDs: []string{"employee:" + employee, "system:" + system}},
	}, nil
}

// lookup is the directory's read-only tool.
func lookup(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
	return &gateway.Outcome{Output: map[string]any{"employee_id": c.Envelope.Args["employee_id"], "status": "active", "team": "billing", "manager": "usr_310"}}, ctx.Err()
}

// iamService is the IAM write tool; it keeps every grant it made.
type iamService struct {
	mu     sync.Mutex
	grants []string
}

func (s *iamService) grant(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := fmt.Sprintf("grt_%d", 5512+len(s.grants))
	s.grants = append(s.grants, fmt.Sprintf("%s %v on %v", id, c.Envelope.Args["level"], c.Envelope.Args["system"]))
	// A write names what it changed.
	return &gateway.Outcome{Output: map[string]any{"grant_id": id}, Mutations: []string{"grant:" + id}}, nil
}

func (s *iamService) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.grants...)
}
