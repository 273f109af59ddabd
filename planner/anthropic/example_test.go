package anthropic_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/planner"
	"github.com/contextos/contextos/planner/anthropic"
	"github.com/contextos/contextos/runcontext"
)

// A Claude model plans a runtime's runs: New with the model and its key,
// then contextos.New with the planner. The API here is a loopback
// stand-in that answers as the model would.
func ExampleNew() {
	api := fakeClaude()
	defer api.Close()

	p, err := anthropic.New(anthropic.Options{
		Model:   "claude-sonnet-4-5",
		APIKey:  "sk-ant-example", // default: $ANTHROPIC_API_KEY
		BaseURL: api.URL,          // default: $ANTHROPIC_BASE_URL, else api.anthropic.com
		Prices: map[string]planner.Price{"claude-sonnet-4-5": {
			InputUSDPerMTok: 3, CachedInputUSDPerMTok: 0.30, CacheWriteUSDPerMTok: 3.75, OutputUSDPerMTok: 15}},
	})
	if err != nil {
		log.Fatal(err)
	}
	registry, keys, opts := supportPack() // the signed support pack, its adapters and evidence
	rt, err := contextos.New(p, registry, keys, opts)
	if err != nil {
		log.Fatal(err)
	}

	req, err := runcontext.DecodeInvokeRequest(fixture.Invoke())
	if err != nil {
		log.Fatal(err)
	}
	rc, err := runcontext.DecodeRunContext(fixture.RunContext())
	if err != nil {
		log.Fatal(err)
	}
	res, err := rt.Invoke(context.Background(), req, rc)
	if err != nil {
		log.Fatal(err)
	}
	u := res.Record.BudgetUsage
	fmt.Println(res.Status, res.Record.Outcome, "after", len(res.ToolResults), "tool calls")
	fmt.Printf("%d tokens, %.4f cents\n", u.Tokens, u.CostUSDCents)
	// Output:
	// DECIDED denied after 2 tool calls
	// 4600 tokens, 1.2450 cents
}

// fakeClaude is a loopback Messages API: the first turn looks the order
// up and evaluates the policy, the next (whose request carries their
// results) denies the refund.
func fakeClaude() *httptest.Server {
	const lookup = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",
		"content":[{"type":"tool_use","id":"toolu_1","name":"adp_orders__lookup","input":{"order_id":"ord_881"}},
		           {"type":"tool_use","id":"toolu_2","name":"adp_policy__eval","input":{"order_id":"ord_881"}}],
		"stop_reason":"tool_use","stop_sequence":null,
		"usage":{"input_tokens":400,"cache_creation_input_tokens":1800,"cache_read_input_tokens":0,"output_tokens":60}}`
	const deny = `{"id":"msg_2","type":"message","role":"assistant","model":"claude-sonnet-4-5",
		"content":[{"type":"tool_use","id":"toolu_3","name":"propose_decision","input":{"decision_key":"support.refund.execute",
		 "outcome":"denied","rationale":"The customer asked to cancel the refund.","evidence_refs":["kg:order:ord_881#snapshot_kg_2026_05_03_T0930"]}}],
		"stop_reason":"tool_use","stop_sequence":null,
		"usage":{"input_tokens":420,"cache_creation_input_tokens":0,"cache_read_input_tokens":1800,"output_tokens":120}}`
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		answer := lookup
		if bytes.Contains(body, []byte(`"tool_result"`)) {
			answer = deny
		}
		w.Header().Set("Content-Type", "application/json")
		if _, err := io.WriteString(w, answer); err != nil {
			log.Print(err) // the client sees a cut-off answer and fails the run
		}
	}))
}

// supportPack publishes the canonical support pack, signed, and returns
// the runtime options with its adapters and evidence.
func supportPack() (pack.Registry, runcontext.KeyResolver, *contextos.Options) {
	ctx := context.Background()
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	kid := pack.KeyID(key.Public().(ed25519.PublicKey))
	p, err := pack.DecodeAndValidate(fixture.SupportPack(), nil)
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
	out := func(o map[string]any) gateway.Adapter {
		return gateway.AdapterFunc(func(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
			return &gateway.Outcome{Output: o}, nil
		})
	}
	var evidence compiler.StaticEvidence
	if err := json.Unmarshal(fixture.Evidence(), &evidence); err != nil {
		log.Fatal(err)
	}
	return registry, runcontext.NewStaticKeys(map[string]ed25519.PublicKey{kid: key.Public().(ed25519.PublicKey)}), &contextos.Options{
		Adapters: []gateway.Registration{
			{AdapterID: "adp_orders", Adapter: out(map[string]any{"status": "delivered", "total_inr": 4200}), Capabilities: map[string]gateway.Capability{"lookup": {}}},
			{AdapterID: "adp_policy", Adapter: out(map[string]any{"eligible": true}), Capabilities: map[string]gateway.Capability{"eval": {}}},
			{AdapterID: "adp_payments", Adapter: out(nil), Capabilities: map[string]gateway.Capability{"issue_refund": {}}},
		},
		Evidence:   evidence,
		Ontologies: []string{"ont.support@1.0.0"},
		// The example's run context carries no signed identity claim.
		Identity: contextos.IdentityOptions{AllowUnclaimed: true},
	}
}
