package contextos_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// Options.MeterProvider receives the runtime's operational metrics. Here a
// ManualReader collects them after one refund; a host plugs in its own
// provider (a periodic reader and an OTLP or Prometheus exporter).
func ExampleOptions_meterProvider() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	// The signed support pack, published in a registry.
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	kid := pack.KeyID(key.Public().(ed25519.PublicKey))
	p, err := pack.Decode(fixture.SupportPack())
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
	if _, err := pack.Publish(ctx, registry, entry.Ref, "release",
		pack.Signoff{Reviewer: "arch-reviewer", Role: pack.RoleArchitecture}, pack.Signoff{Reviewer: "security-reviewer", Role: pack.RoleSecurity},
		pack.Signoff{Reviewer: "data-reviewer", Role: pack.RoleData}, pack.Signoff{Reviewer: "eval-reviewer", Role: pack.RoleEvaluation}); err != nil {
		log.Fatal(err)
	}
	keys := runcontext.NewStaticKeys(map[string]ed25519.PublicKey{kid: key.Public().(ed25519.PublicKey)})

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
	ok := func(out map[string]any, mutations ...string) gateway.Adapter {
		return gateway.AdapterFunc(func(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
			return &gateway.Outcome{Output: out, Mutations: mutations}, ctx.Err()
		})
	}
	var evidence compiler.StaticEvidence
	if err := json.Unmarshal(fixture.Evidence(), &evidence); err != nil {
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
		Identity:   contextos.IdentityOptions{AllowUnclaimed: true},
		// The operational metrics go to the host's meter provider.
		MeterProvider: mp,
	})
	if err != nil {
		log.Fatal(err)
	}

	req, err := runcontext.DecodeInvokeRequest(fixture.Invoke())
	if err != nil {
		log.Fatal(err)
	}
	req.Input.Context["refund_amount"] = 1200
	rc, err := runcontext.DecodeRunContext(fixture.RunContext())
	if err != nil {
		log.Fatal(err)
	}
	if _, err := rt.Invoke(ctx, req, rc); err != nil {
		log.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				var n int64
				for _, dp := range d.DataPoints {
					n += dp.Value
				}
				fmt.Printf("%s %s: %d\n", m.Name, m.Unit, n)
			case metricdata.Histogram[float64]:
				var n uint64
				for _, dp := range d.DataPoints {
					n += dp.Count
				}
				fmt.Printf("%s %s: %d measured\n", m.Name, m.Unit, n)
			case metricdata.Histogram[int64]:
				for _, dp := range d.DataPoints {
					fmt.Printf("%s %s: %d\n", m.Name, m.Unit, dp.Sum)
				}
			}
		}
	}
	// Unordered output:
	// contextos.pack.compiles {compile}: 1
	// contextos.pack.compile.duration s: 1 measured
	// contextos.compile.tool_surface.size {capability}: 3
	// contextos.policy.rule.evaluations {evaluation}: 2
	// contextos.runs {run}: 1
	// contextos.decision.required_evidence {item}: 3
	// contextos.tool.call.duration s: 3 measured
}
