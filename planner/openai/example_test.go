package openai_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/planner"
	"github.com/contextos/contextos/planner/openai"
	"github.com/contextos/contextos/runcontext"
)

// A runtime that plans with a model behind the Chat Completions API (here
// a loopback fake of it; an OpenAI-compatible server such as vLLM or
// Ollama works the same at its BaseURL).
func Example() {
	model := fakeModel()
	defer model.Close()

	p, err := openai.New(openai.Options{
		Model:   "gpt-4.1",
		APIKey:  "sk-example",       // default: $OPENAI_API_KEY
		BaseURL: model.URL + "/v1/", // default: $OPENAI_BASE_URL, else OpenAI
		Prices:  map[string]planner.Price{"gpt-4.1": {InputUSDPerMTok: 2, CachedInputUSDPerMTok: 0.5, OutputUSDPerMTok: 8}},
		Stream:  true, // plan deltas reach Runtime.Stream consumers
	})
	if err != nil {
		log.Fatal(err)
	}
	registry, keys, opts := supportRuntime()
	rt, err := contextos.New(p, registry, keys, opts)
	if err != nil {
		log.Fatal(err)
	}
	req, rc := supportRequest(1200)
	res, err := rt.Invoke(context.Background(), req, rc)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Record.Outcome)
	fmt.Println(res.Record.BudgetUsage.Tokens, "tokens,", res.Record.BudgetUsage.ToolCalls, "tool calls")
	// Output:
	// DECIDED approved
	// 4100 tokens, 3 tool calls
}

// fakeModel is a loopback Chat Completions API that answers the refund
// run's two turns (as a stream when asked).
func fakeModel() *httptest.Server {
	answers := []reply{
		{calls: []call{lookupCall("call_1"), evalCall("call_2")}, finish: "tool_calls", usage: usage{prompt: 1700, completion: 60}},
		{calls: []call{refundCall("call_3", 1200), decisionCall("call_4", "approved")}, finish: "tool_calls", usage: usage{prompt: 2200, completion: 140, cached: 1536}},
	}
	var turn atomic.Int32
	f := &fakeServer{chunkBytes: 16}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Stream bool `json:"stream"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rep := answers[min(int(turn.Add(1))-1, len(answers)-1)]
		if !in.Stream {
			w.Header().Set("Content-Type", "application/json")
			if _, err := w.Write(completion(rep)); err != nil {
				log.Print(err) // the client sees a cut-off answer and fails the run
			}
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range f.chunks(rep, true) {
			if _, err := fmt.Fprintf(w, "data: %s\n\n", c); err != nil {
				log.Print(err)
				return
			}
		}
		if _, err := fmt.Fprint(w, "data: [DONE]\n\n"); err != nil {
			log.Print(err)
		}
	}))
}

// supportRuntime is the canonical support pack, signed and published, its
// keys, and runtime options with in-process adapters.
func supportRuntime() (pack.Registry, pack.KeyResolver, *contextos.Options) {
	ctx := context.Background()
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	kid := pack.KeyID(key.Public().(ed25519.PublicKey))
	pk, err := pack.DecodeAndValidate(fixture.SupportPack(), nil)
	if err != nil {
		log.Fatal(err)
	}
	signed, err := pack.Sign(pk, kid, key, nil)
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
	ok := func(out map[string]any, mutations ...string) gateway.Adapter {
		return gateway.AdapterFunc(func(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
			return &gateway.Outcome{Output: out, Mutations: mutations}, ctx.Err()
		})
	}
	var evidence compiler.StaticEvidence
	if err := json.Unmarshal(fixture.Evidence(), &evidence); err != nil {
		log.Fatal(err)
	}
	return registry, keys, &contextos.Options{
		Adapters: []gateway.Registration{
			{AdapterID: "adp_orders", Adapter: ok(map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 1200}), Capabilities: map[string]gateway.Capability{"lookup": {}}},
			{AdapterID: "adp_policy", Adapter: ok(map[string]any{"eligible": true}), Capabilities: map[string]gateway.Capability{"eval": {}}},
			{AdapterID: "adp_payments", Adapter: ok(map[string]any{"transaction_id": "txn_1"}, "refund:txn_1"), Capabilities: map[string]gateway.Capability{"issue_refund": {Scopes: []string{"payments.refund"}}}},
		},
		Evidence:   evidence,
		Ontologies: []string{"ont.support@1.0.0"},
		Identity:   contextos.IdentityOptions{Keys: runcontext.NewStaticKeys(map[string]ed25519.PublicKey{"kid_identity_1": identityKey().Public().(ed25519.PublicKey)})},
	}
}

// identityKey is the example identity service's key.
func identityKey() ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = 1
	return ed25519.NewKeyFromSeed(seed)
}

// supportRequest is the canonical refund request for amount, with a
// signed identity claim for the run.
func supportRequest(amount int) (*runcontext.InvokeRequest, *runcontext.RunContext) {
	req, err := runcontext.DecodeInvokeRequest(fixture.Invoke())
	if err != nil {
		log.Fatal(err)
	}
	req.Input.Context["refund_amount"] = amount
	rc, err := runcontext.DecodeRunContext(fixture.RunContext())
	if err != nil {
		log.Fatal(err)
	}
	claim := &runcontext.IdentityClaim{Iss: "https://id.example", Sub: rc.Agent.AgentURN, RunID: rc.RunID, TenantID: rc.TenantID,
		PrincipalChain: rc.PrincipalChain(), Scopes: []string{"tools:read", "tools:write"},
		Nbf: time.Now().Add(-time.Minute).Unix(), Exp: time.Now().Add(5 * time.Minute).Unix()}
	if err := runcontext.SignClaim(claim, "kid_identity_1", identityKey()); err != nil {
		log.Fatal(err)
	}
	rc.Agent.IdentityClaim = claim
	return req, rc
}
