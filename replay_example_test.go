package contextos_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// Runtime.Replay re-runs a stored packet offline: the recorded planner
// outputs and adapter outcomes stand in for the model and the tools, and
// no registered adapter is called. A packet replays equal, reports a
// mismatch at the step that diverged, or is refused as tampered.
func ExampleRuntime_Replay() {
	ctx := context.Background()

	// The pack the packets pin, signed and published as when they were
	// recorded (packets pin pack content hashes, not the packs).
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = 7
	key := ed25519.NewKeyFromSeed(seed)
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
	// Review (each required role signs off, by a reviewer of its own), sign and publish.
	if _, err := pack.Publish(ctx, registry, entry.Ref, "release",
		pack.Signoff{Reviewer: "arch-reviewer", Role: pack.RoleArchitecture}, pack.Signoff{Reviewer: "security-reviewer", Role: pack.RoleSecurity},
		pack.Signoff{Reviewer: "data-reviewer", Role: pack.RoleData}, pack.Signoff{Reviewer: "eval-reviewer", Role: pack.RoleEvaluation}); err != nil {
		log.Fatal(err)
	}
	keys := runcontext.NewStaticKeys(map[string]ed25519.PublicKey{kid: key.Public().(ed25519.PublicKey)})

	// The host's registrations; a replay serves the recorded outcomes in
	// place of each adapter, so none of these is called.
	live := gateway.AdapterFunc(func(context.Context, *gateway.Call) (*gateway.Outcome, error) {
		log.Fatal("a replay called a live adapter")
		return nil, nil
	})
	scopes := map[string][]string{"adp_payments.issue_refund": {"payments.refund"}}
	var adapters []gateway.Registration
	for _, a := range p.ToolingLayer.AdapterRegistry {
		caps := map[string]gateway.Capability{}
		for _, c := range a.Capabilities {
			caps[c] = gateway.Capability{Scopes: scopes[a.AdapterID+"."+c]}
		}
		adapters = append(adapters, gateway.Registration{AdapterID: a.AdapterID, Adapter: live, Capabilities: caps})
	}
	planner := contextos.PlannerFunc(func(context.Context, *contextos.PlanRequest) (*contextos.Plan, error) {
		return nil, errors.New("a replay asked the live planner")
	})
	rt, err := contextos.New(planner, registry, keys, &contextos.Options{
		Adapters:   adapters,
		Ontologies: []string{"ont.support@1.0.0"},
		// The packets were recorded without identity claims.
		Identity: contextos.IdentityOptions{AllowUnclaimed: true},
	})
	if err != nil {
		log.Fatal(err)
	}

	for _, name := range []string{"good-decided-approved-1200.json", "mismatch-adapter-outcome.json", "bad-expected-status.json"} {
		b, err := os.ReadFile("replay/testdata/corpus/" + name)
		if err != nil {
			log.Fatal(err)
		}
		var packet replay.Packet
		if err := json.Unmarshal(b, &packet); err != nil {
			log.Fatal(err)
		}
		report, err := rt.Replay(ctx, &packet)
		switch {
		case errors.Is(err, replay.ErrTamper):
			fmt.Printf("%s: %s (refused: %s)\n", name, report.Status, report.Diffs[0].Kind)
			continue
		case err != nil:
			log.Fatal(err)
		}
		fmt.Printf("%s: %s\n", name, report.Status)
		for _, d := range report.Diffs {
			fmt.Printf("  %s, step %d: %s\n", d.Kind, d.Step, d.Detail)
		}
	}
	// Output:
	// good-decided-approved-1200.json: replay_equal
	// mismatch-adapter-outcome.json: replay_mismatch
	//   tool_transcript, step 3: transcript step 3 (result adp_policy.eval) differs
	//   decision, step -1: the rebuilt decision record (DECIDED approved) differs from the packet's (DECIDED approved) in lineage, replay
	// bad-expected-status.json: invalid (refused: tamper)
}
