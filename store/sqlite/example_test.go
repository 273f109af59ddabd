package sqlite_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/store/sqlite"
)

// A service keeps every runtime store in one database: open it, point the
// runtime's options at it, and build the runtime over its pack registry.
// docs/stores.md shows the same lines on PostgreSQL (postgres.Open with
// the database URL); here SQLite in memory makes them runnable.
func Example() {
	if err := service(context.Background()); err != nil {
		fmt.Println("error:", err)
	}
	// Output:
	// DECIDED denied
	// 1 record stored, chain verified
}

// service wires the stores, publishes the host's pack and serves one
// request.
func service(ctx context.Context) error {
	h, err := newHost()
	if err != nil {
		return err
	}
	myPlanner, keys, registrations, myGraph := h.planner, h.keys, h.registrations, h.graph
	// docs/stores.md: begin
	st, err := sqlite.Open(ctx, ":memory:", nil)
	if err != nil {
		return err
	}
	defer st.Close()
	opts := &contextos.Options{Adapters: registrations, Evidence: myGraph, Ontologies: []string{"ont.support@1.0.0"}}
	st.Configure(opts) // checkpoints, replay packets, records, transcripts, memory, idempotency claims, used approvals
	rt, err := contextos.New(myPlanner, st.Registry(nil), keys, opts)
	if err != nil {
		return err
	}
	// docs/stores.md: end
	// A deploy step publishes each signed pack once.
	reg := st.Registry(nil)
	entry, err := reg.Put(ctx, h.signedPack)
	if err != nil {
		return err
	}
	// Review (each required role signs off, by a reviewer of its own), sign and publish.
	if _, err := pack.Publish(ctx, reg, entry.Ref, "deploy",
		pack.Signoff{Reviewer: "arch-reviewer", Role: pack.RoleArchitecture}, pack.Signoff{Reviewer: "security-reviewer", Role: pack.RoleSecurity},
		pack.Signoff{Reviewer: "data-reviewer", Role: pack.RoleData}, pack.Signoff{Reviewer: "eval-reviewer", Role: pack.RoleEvaluation}); err != nil {
		return err
	}
	res, err := rt.Invoke(ctx, h.req, h.runCtx)
	if err != nil {
		return err
	}
	fmt.Println(res.Status, res.Record.Outcome)
	recs, err := st.Records().List(ctx, decision.Filter{RunID: res.RunID})
	if err != nil {
		return err
	}
	if err := st.Records().Verify(ctx); err != nil {
		return err
	}
	fmt.Println(len(recs), "record stored, chain verified")
	return nil
}

// host is what a service brings of its own: a planner, the pack and its
// signing key, tool adapters, evidence, and a request to serve.
type host struct {
	planner       contextos.Planner
	keys          pack.KeyResolver
	signedPack    []byte
	registrations []gateway.Registration
	graph         compiler.EvidenceSource
	req           *runcontext.InvokeRequest
	runCtx        *runcontext.RunContext
}

// newHost is the support-refund host of the repository's fixtures, with a
// read-only run: the planner looks the order up and denies the refund.
func newHost() (*host, error) {
	seed := make([]byte, ed25519.SeedSize)
	key := ed25519.NewKeyFromSeed(seed)
	kid := pack.KeyID(key.Public().(ed25519.PublicKey))
	p, err := pack.DecodeAndValidate(fixture.SupportPack(), nil)
	if err != nil {
		return nil, err
	}
	signed, err := pack.Sign(p, kid, key, nil)
	if err != nil {
		return nil, err
	}
	var graph compiler.StaticEvidence
	if err := json.Unmarshal(fixture.Evidence(), &graph); err != nil {
		return nil, err
	}
	req, err := runcontext.DecodeInvokeRequest(fixture.Invoke())
	if err != nil {
		return nil, err
	}
	rc, err := runcontext.DecodeRunContext(fixture.RunContext())
	if err != nil {
		return nil, err
	}
	rc.SafetyMode = runcontext.ReadOnly // no write surfaced: no identity claim needed
	answer := func(out map[string]any) gateway.Adapter {
		return gateway.AdapterFunc(func(ctx context.Context, _ *gateway.Call) (*gateway.Outcome, error) {
			return &gateway.Outcome{Output: out}, ctx.Err()
		})
	}
	turn := 0
	planner := contextos.PlannerFunc(func(ctx context.Context, _ *contextos.PlanRequest) (*contextos.Plan, error) {
		turn++
		if turn == 1 {
			return &contextos.Plan{Steps: []contextos.Step{{CapabilityID: "adp_orders.lookup", Args: map[string]any{"order_id": "ord_881"}}}}, ctx.Err()
		}
		return &contextos.Plan{Decision: &contextos.DecisionProposal{DecisionKey: "support.refund.execute", Outcome: "denied", Confidence: 1,
			SubjectIDs: []string{"order:ord_881"}, Rationale: "Refunds are not issued in read-only mode."}}, ctx.Err()
	})
	return &host{
		planner:    planner,
		keys:       runcontext.NewStaticKeys(map[string]ed25519.PublicKey{kid: key.Public().(ed25519.PublicKey)}),
		signedPack: signed,
		registrations: []gateway.Registration{
			{AdapterID: "adp_orders", Adapter: answer(map[string]any{"status": "delivered"}), Capabilities: map[string]gateway.Capability{"lookup": {}}},
			{AdapterID: "adp_policy", Adapter: answer(map[string]any{"eligible": true}), Capabilities: map[string]gateway.Capability{"eval": {}}},
			{AdapterID: "adp_payments", Adapter: answer(map[string]any{}), Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
		},
		graph:  graph,
		req:    req,
		runCtx: rc,
	}, nil
}

// TestDocsServiceSnippet holds docs/stores.md's PostgreSQL service
// snippet (the page's first go block) to Example's lines: the same lines,
// but for the Open line.
func TestDocsServiceSnippet(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)// docs/stores.md: begin\n(.*?)\t// docs/stores.md: end\n`).FindSubmatch(src)
	if m == nil {
		t.Fatal("example_test.go has no docs/stores.md: begin/end block")
	}
	var example []string
	for _, line := range strings.Split(strings.TrimSuffix(string(m[1]), "\n"), "\n") {
		example = append(example, strings.TrimPrefix(line, "\t"))
	}
	page, err := os.ReadFile("../../docs/stores.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := regexp.MustCompile("(?s)```go\n(.*?)```\n").FindSubmatch(page)
	if sec == nil {
		t.Fatal("docs/stores.md has no go block")
	}
	snippet := strings.Split(strings.TrimSuffix(string(sec[1]), "\n"), "\n")
	const (
		docsOpen    = `st, err := postgres.Open(ctx, os.Getenv("DATABASE_URL"), nil)`
		exampleOpen = `st, err := sqlite.Open(ctx, ":memory:", nil)`
	)
	if snippet[0] != docsOpen || example[0] != exampleOpen {
		t.Errorf("first lines: docs/stores.md %q, Example %q; want %q and %q", snippet[0], example[0], docsOpen, exampleOpen)
	}
	if strings.Join(snippet[1:], "\n") != strings.Join(example[1:], "\n") {
		t.Errorf("the docs/stores.md snippet and Example differ after the Open line:\ndocs/stores.md:\n%s\nExample:\n%s", strings.Join(snippet, "\n"), strings.Join(example, "\n"))
	}
}
