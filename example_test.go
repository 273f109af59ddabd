package contextos_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// A host builds one runtime around its planner, pack registry and tool
// adapters, invokes it and reads the decision record.
func Example() {
	ctx := context.Background()

	// A signed, published pack in a registry the runtime trusts.
	seed := make([]byte, ed25519.SeedSize)
	key := ed25519.NewKeyFromSeed(seed)
	kid := pack.KeyID(key.Public().(ed25519.PublicKey))
	doc := fixture.SupportPack()
	p, err := pack.DecodeAndValidate(doc, nil)
	if err != nil {
		log.Fatal(err)
	}
	signed, err := pack.Sign(p, kid, key, nil)
	if err != nil {
		log.Fatal(err)
	}
	registry := pack.NewMemoryRegistry(nil)
	entry, err := registry.Put(ctx, signed)
	if err != nil {
		log.Fatal(err)
	}
	// Review (each required role signs off, by a reviewer of its own), sign and publish.
	if _, err := pack.Publish(ctx, registry, entry.Ref, "release",
		pack.Signoff{Reviewer: "arch-reviewer", Role: pack.RoleArchitecture}, pack.Signoff{Reviewer: "security-reviewer", Role: pack.RoleSecurity},
		pack.Signoff{Reviewer: "data-reviewer", Role: pack.RoleData}, pack.Signoff{Reviewer: "eval-reviewer", Role: pack.RoleEvaluation}); err != nil {
		log.Fatal(err)
	}
	keys := runcontext.NewStaticKeys(map[string]ed25519.PublicKey{kid: key.Public().(ed25519.PublicKey)})
	// The identity service's key, a trust root of its own.
	idSeed := make([]byte, ed25519.SeedSize)
	idSeed[0] = 1
	idKey := ed25519.NewKeyFromSeed(idSeed)
	idKeys := runcontext.NewStaticKeys(map[string]ed25519.PublicKey{"kid_identity_1": idKey.Public().(ed25519.PublicKey)})

	// The planner: look the order up, then decide. A model goes here.
	planner := contextos.PlannerFunc(func(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
		if len(req.Results) == 0 {
			return &contextos.Plan{Steps: []contextos.Step{
				{CapabilityID: "adp_orders.lookup", Args: map[string]any{"order_id": "ord_881"}},
				{CapabilityID: "adp_policy.eval", Args: map[string]any{"order_id": "ord_881"}},
			}}, nil
		}
		return &contextos.Plan{
			Steps: []contextos.Step{{CapabilityID: "adp_payments.issue_refund", Args: map[string]any{"order_id": "ord_881", "amount_inr": 1200, "currency": "INR"}}},
			Decision: &contextos.DecisionProposal{DecisionKey: "support.refund.execute", Outcome: "approved", Confidence: 0.9,
				SubjectIDs: []string{"order:ord_881"}, EvidenceRefs: []string{"kg:order:ord_881#snapshot_kg_2026_05_03_T0930"}},
		}, nil
	})
	// A write names its side effects in mutations; one that does not has
	// not completed, and the run is not decided.
	ok := func(out map[string]any, mutations ...string) gateway.Adapter {
		return gateway.AdapterFunc(func(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
			return &gateway.Outcome{Output: out, Mutations: mutations}, ctx.Err()
		})
	}
	var evidence compiler.StaticEvidence
	b := fixture.Evidence()
	if err := json.Unmarshal(b, &evidence); err != nil {
		log.Fatal(err)
	}

	rt, err := contextos.New(planner, registry, keys, &contextos.Options{
		Adapters: []gateway.Registration{
			{AdapterID: "adp_orders", Adapter: ok(map[string]any{"status": "delivered"}), Capabilities: map[string]gateway.Capability{"lookup": {}}},
			{AdapterID: "adp_policy", Adapter: ok(map[string]any{"eligible": true}), Capabilities: map[string]gateway.Capability{"eval": {}}},
			{AdapterID: "adp_payments", Adapter: ok(map[string]any{"transaction_id": "txn_1"}, "refund:txn_1"), Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
		},
		Evidence:   evidence,
		Ontologies: []string{"ont.support@1.0.0"},
		// The keys of the identity service that signs agents' claims.
		Identity: contextos.IdentityOptions{Keys: idKeys},
	})
	if err != nil {
		log.Fatal(err)
	}

	b = fixture.Invoke()
	req, err := runcontext.DecodeInvokeRequest(b)
	if err != nil {
		log.Fatal(err)
	}
	req.Input.Context["refund_amount"] = 1200
	b = fixture.RunContext()
	rc, err := runcontext.DecodeRunContext(b)
	if err != nil {
		log.Fatal(err)
	}
	// The pack allows destructive work (the refund), so the run carries a
	// signed, short-lived identity claim for this run (an identity service
	// issues it; it is signed here for the example).
	claim := &runcontext.IdentityClaim{Iss: "https://id.example", Sub: rc.Agent.AgentURN, RunID: rc.RunID, TenantID: rc.TenantID,
		PrincipalChain: rc.PrincipalChain(), Scopes: []string{"tools:read", "tools:write"},
		Nbf: time.Now().Add(-time.Minute).Unix(), Exp: time.Now().Add(5 * time.Minute).Unix()}
	if err := runcontext.SignClaim(claim, "kid_identity_1", idKey); err != nil {
		log.Fatal(err)
	}
	rc.Agent.IdentityClaim = claim

	res, err := rt.Invoke(ctx, req, rc)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Record.Outcome, len(res.ToolResults), "tool calls")
	fmt.Println("trace:", res.Record.TraceID)
	fmt.Println("identity claim:", res.Record.AgentIdentity.ClaimVerification)
	// Output:
	// DECIDED approved 3 tool calls
	// trace: 4bf92f3577b34da6a3ce929d0e0e4736
	// identity claim: verified
}
