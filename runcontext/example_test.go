package runcontext_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/runcontext"
)

// Decoding is strict and reports every problem with its JSON path.
func ExampleDecodeInvokeRequest() {
	body := []byte(`{
	  "request_id": "req_9f3a12", "tenant_id": "tenant_acme_prod",
	  "user": {"user_id": "usr_771"},
	  "agent": {"agent_urn": "agent:contextos/support-refund@1.2.0", "workload_identity": "spiffe://contextos/agents/support"},
	  "context_pack_refs": ["ctxpack.support@latest"],
	  "input": {"intent": "support.refund", "message": "Refund order ord_881"},
	  "mode": "batch", "runtime": {"Max_Tool_Calls": 100},
	  "trace": {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"}
	}`)
	_, err := runcontext.DecodeInvokeRequest(body)
	var ve *runcontext.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			fmt.Println(p)
		}
	}
	// Output:
	// runtime.Max_Tool_Calls: unknown field "Max_Tool_Calls": field names are case-sensitive (did you mean "max_tool_calls"?)
	// context_pack_refs[0]: is not pinned: version in "ctxpack.support@latest" must be MAJOR.MINOR.PATCH (no ranges, tags, prereleases or build metadata)
}

// Materialize turns a request into the run's RunContext: hints become the
// budget, the request's trace becomes the run's, and a host RunContext that
// disagrees with the request is an error.
func ExampleMaterialize() {
	body := fixture.Invoke()
	req, err := runcontext.DecodeInvokeRequest(body)
	if err != nil {
		log.Fatal(err)
	}
	rc, err := runcontext.Materialize(req, nil, &runcontext.MaterializeOptions{DefaultSafetyMode: runcontext.Delegated})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rc.RunID, rc.SafetyMode, rc.RunBudget.MaxToolCalls, rc.TraceContext.TraceParent)

	host := &runcontext.RunContext{TenantID: "tenant_other"}
	_, err = runcontext.Materialize(req, host, nil)
	fmt.Println(errors.Is(err, runcontext.ErrConflict), err)
	// Output:
	// run_bb6be208caeeaf9b delegated 8 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
	// true runcontext: invalid run-context: tenant_id: host run context and request disagree on tenant_id
}

// A Meter refuses a charge over any dimension, whole, and names it.
func ExampleMeter() {
	start := time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC) // from the runtime's injected clock
	m := runcontext.NewMeter(runcontext.RunBudget{TotalTokens: 1000, MaxToolCalls: 1, WallClockMS: 30000, MaxCostCents: 1}, start)
	fmt.Println(m.ChargeToolCall())
	err := m.ChargeToolCall()
	var be *runcontext.BudgetError
	fmt.Println(errors.Is(err, runcontext.ErrBudgetExceeded), errors.As(err, &be) && be.Dimension == runcontext.DimToolCalls)
	fmt.Println(m.CheckWallClock(start.Add(31 * time.Second)))
	// Output:
	// <nil>
	// true true
	// runcontext: run budget exceeded: wall_clock_ms: elapsed 31000 ms ≥ limit 30000 ms
}

// Identity claims are signed with Ed25519 and verified by kid against the
// run, at the time of the runtime's clock.
func ExampleVerifyClaim() {
	seed := make([]byte, ed25519.SeedSize) // use a real key in production
	key := ed25519.NewKeyFromSeed(seed)
	now := time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC)
	claim := &runcontext.IdentityClaim{
		Iss: "https://id.acme.example", Sub: "agent:contextos/support-refund@1.2.0",
		RunID: "run_a1b2c3d4e5f60718", TenantID: "tenant_acme_prod",
		PrincipalChain: []runcontext.Principal{{Kind: runcontext.PrincipalUser, ID: "usr_771"}},
		Scopes:         []string{"tools:read"},
		Nbf:            now.Unix(), Exp: now.Add(5 * time.Minute).Unix(),
	}
	if err := runcontext.SignClaim(claim, "kid_2026_05", key); err != nil {
		log.Fatal(err)
	}
	keys := runcontext.NewStaticKeys(map[string]ed25519.PublicKey{"kid_2026_05": key.Public().(ed25519.PublicKey)})
	want := runcontext.ClaimExpectations{Now: now, RunID: "run_a1b2c3d4e5f60718", TenantID: "tenant_acme_prod", AgentURN: "agent:contextos/support-refund@1.2.0"}
	fmt.Println(runcontext.VerifyClaim(context.Background(), claim, keys, want))

	want.Now = now.Add(time.Hour)
	fmt.Println(runcontext.VerifyClaim(context.Background(), claim, keys, want))
	// Output:
	// <nil>
	// runcontext: identity claim rejected: exp: expired
}

func ExampleApprovalMode_AtMost() {
	safety := runcontext.Delegated
	for _, capability := range []runcontext.ApprovalMode{runcontext.ReadOnly, runcontext.Network, runcontext.Destructive} {
		fmt.Printf("%s surfaced under %s: %v\n", capability, safety, capability.AtMost(safety))
	}
	// Output:
	// read_only surfaced under delegated: true
	// network surfaced under delegated: true
	// destructive surfaced under delegated: false
}

func ExampleParseTraceparent() {
	tr, err := runcontext.ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-b9c7c989f97918e1-01")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("trace:", tr.TraceID, "span:", tr.SpanID, "flags:", tr.TraceFlags)
	fmt.Println("traceparent:", tr.Traceparent())
	// Output:
	// trace: 4bf92f3577b34da6a3ce929d0e0e4736 span: b9c7c989f97918e1 flags: 01
	// traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-b9c7c989f97918e1-01
}

// A token_ref names a secret in the host's store; a raw token in it is
// refused, and the error does not repeat it.
func ExampleRunContext_Validate_tokenRef() {
	data, err := fixture.Bytes("run-context.support.json")
	if err != nil {
		log.Fatal(err)
	}
	rc, err := runcontext.DecodeRunContext(data)
	if err != nil {
		log.Fatal(err)
	}
	rc.Agent.TokenRef = "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZ2VudCJ9.c2lnbmF0dXJlc2lnbmF0dXJl"
	err = rc.Validate()
	fmt.Println(errors.Is(err, runcontext.ErrRawToken))
	fmt.Println(err)
	// Output:
	// true
	// runcontext: invalid run-context: agent.token_ref: holds a bearer token, not a reference to one: a token_ref names a secret the host's store resolves (such as tok_user_7a or vault://…); rotate the credential, since it was sent
}
