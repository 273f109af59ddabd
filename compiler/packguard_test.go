package compiler_test

import (
	"errors"
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/pack"
)

// A second pack that denies a capability the first allows: the merged view
// is refused (deny wins and cannot be overridden), so the refund tool is
// never surfaced.
func TestPrepareRefusesAllowOverDenyAcrossPacks(t *testing.T) {
	s := canonicalScenario(t)
	guard := canonicalScenario(t).pack
	guard.PackMeta.PackID = "ctxpack.guard"
	guard.ToolingLayer.Permissions = []pack.Permission{{PermissionID: "p_no_refunds", AdapterID: "adp_payments", Capability: "issue_refund", Allow: false}}
	inputs := append(s.inputs(), compiler.Input{Ref: pack.MustParseRef("ctxpack.guard@1.0.0"), Pack: guard})
	p, err := compiler.Prepare(inputs, &s.opts)
	var ve *pack.ValidationError
	if !errors.Is(err, compiler.ErrMerge) || !errors.As(err, &ve) || !ve.HasAt(pack.CodeDenyOverridden, "tooling_layer.permissions[2].allow") {
		if err == nil {
			cc, _ := p.Compile(ctx, s.req, s.rc)
			t.Fatalf("Prepare accepted an allow over a deny; tool manifest %+v", cc.Manifests.ToolManifest)
		}
		t.Fatalf("Prepare = %v, want ErrMerge with a deny_overridden problem", err)
	}
}

// A pack with no decision spec is refused before any run binds its outcome
// to one (it used to validate and then panic the runtime).
func TestPrepareRefusesPackWithoutDecisionSpec(t *testing.T) {
	s := canonicalScenario(t)
	s.pack.DecisionLayer.DecisionSpecs = nil
	for i := range s.pack.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules {
		s.pack.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[i].DecisionBinding = ""
	}
	_, err := compiler.Prepare(s.inputs(), &s.opts)
	var ve *pack.ValidationError
	if !errors.As(err, &ve) || !ve.HasAt(pack.CodeRequired, "decision_layer.decision_specs") {
		t.Fatalf("Prepare = %v, want a required decision_layer.decision_specs problem", err)
	}
}
