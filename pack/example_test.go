package pack_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// Validation runs every gate and names the gate, path and failure.
func ExampleValidate() {
	data := fixture.SupportPack()
	p, err := pack.Decode(data)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(pack.Validate(p, nil))

	p.ToolingLayer.Permissions[2].RequiresApprovalGate = "" // the refund tool loses its gate
	var ve *pack.ValidationError
	if errors.As(pack.Validate(p, nil), &ve) {
		for _, problem := range ve.Problems {
			fmt.Println(problem)
		}
	}
	// Output:
	// <nil>
	// risk: tooling_layer.permissions[2].requires_approval_gate: permission p_issue_refund exposes destructive capability adp_payments.issue_refund without an approval gate
}

// Publishing and resolving: sign, put into a registry, publish, and
// resolve with the issuer's key and the host's versions.
func ExampleResolver() {
	ctx := context.Background()
	data := fixture.SupportPack()
	p, err := pack.Decode(data)
	if err != nil {
		log.Fatal(err)
	}
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)) // use a real key
	kid := pack.KeyID(key.Public().(ed25519.PublicKey))
	signed, err := pack.Sign(p, kid, key, nil)
	if err != nil {
		log.Fatal(err)
	}

	reg := pack.NewMemoryRegistry(nil)
	entry, err := reg.Put(ctx, signed)
	if err != nil {
		log.Fatal(err)
	}
	// A stored signed file is linted; it is published only after every
	// required role has signed off.
	if _, err := pack.Publish(ctx, reg, entry.Ref, "release",
		pack.Signoff{Reviewer: "ana", Role: pack.RoleArchitecture}, pack.Signoff{Reviewer: "sam", Role: pack.RoleSecurity},
		pack.Signoff{Reviewer: "dee", Role: pack.RoleData}, pack.Signoff{Reviewer: "eva", Role: pack.RoleEvaluation}); err != nil {
		log.Fatal(err)
	}

	keys := runcontext.NewStaticKeys(map[string]ed25519.PublicKey{kid: key.Public().(ed25519.PublicKey)})
	r := pack.NewResolver(reg, keys, &pack.ResolverOptions{Host: pack.Host{"runtime": "1.0.0", "ontology": "1.0.0"}})
	res, err := r.ResolveString(ctx, "ctxpack.support@1.0.0", pack.UseExecute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Ref, res.State)

	_, err = r.ResolveString(ctx, "ctxpack.support@latest", pack.UseExecute)
	fmt.Println(errors.Is(err, pack.ErrUnpinnedRef))

	// A revocation is seen by the next resolve, though the document stays
	// cached for a day (ttl_seconds): no new run, no resume; replay only.
	if _, err := reg.SetState(ctx, entry.Ref, pack.StateRevoked, "refund threshold bug"); err != nil {
		log.Fatal(err)
	}
	for _, u := range pack.Uses() {
		_, err = r.Resolve(ctx, entry.Ref, u)
		fmt.Println(u, err)
	}
	// Output:
	// ctxpack.support@1.0.0 published
	// true
	// execute pack: ctxpack.support@1.0.0 is revoked and cannot be used for execute (reason: refund threshold bug)
	// resume pack: ctxpack.support@1.0.0 is revoked and cannot be used for resume (reason: refund threshold bug)
	// replay <nil>
}

// Warnings names what a valid pack is risky with, and the fix: here the
// seed pack's finance gate, which reads the refund the caller asserts
// rather than the one the call makes.
func ExampleWarnings() {
	p, err := pack.Decode(fixture.SupportPack())
	if err != nil {
		log.Fatal(err)
	}
	for _, w := range pack.Warnings(p) {
		fmt.Println(w.Gate, w.Code, w.Path)
	}
	p.PolicyLayer.ApprovalGates[0].When = []byte(`{">": [{"var": "tool.args.amount_inr"}, 3000]}`)
	fmt.Println(len(pack.Warnings(p)), pack.Validate(p, nil))
	// Output:
	// risk caller_asserted_control policy_layer.approval_gates[0].when
	// 0 <nil>
}

// Diff classifies a change and checks the version bump.
func ExampleDiff() {
	data := fixture.SupportPack()
	old, err := pack.Decode(data)
	if err != nil {
		log.Fatal(err)
	}
	next, err := pack.Decode(data)
	if err != nil {
		log.Fatal(err)
	}
	next.PackMeta.PackVersion = "1.0.1"
	next.PolicyLayer.Guardrails.RedactionRules = append(next.PolicyLayer.Guardrails.RedactionRules, "iban")
	d := pack.Diff(old, next, nil)
	fmt.Println(d.Class, d.VersionOK)
	fmt.Println(d.Version)
	for _, c := range d.Changes {
		fmt.Println(c.Class, c.Path, c.Reason)
	}
	// Output:
	// minor false
	// a minor change needs at least a MINOR bump: 1.0.0 → at least 1.1.0
	// minor policy_layer.guardrails.redaction_rules added iban
}

// Overlays constrain a base pack per environment and never expand it.
func ExampleApplyOverlay() {
	data := fixture.SupportPack()
	base, err := pack.Decode(data)
	if err != nil {
		log.Fatal(err)
	}
	view, applied, err := pack.ApplyOverlay(base, &pack.Overlay{
		OverlayID: "ov_staging", Base: "ctxpack.support@1.0.0", Environment: "staging",
		EndpointRefs: map[string]string{"adp_orders": "internal://orders-staging"},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(view.ToolingLayer.AdapterRegistry[0].EndpointRef, applied.OverlayID)

	_, _, err = pack.ApplyOverlay(base, &pack.Overlay{
		OverlayID: "ov_bad", Base: "ctxpack.support@1.0.0", Environment: "prod",
		AdapterApprovalModes: map[string]pack.ApprovalMode{"adp_payments": runcontext.ReadOnly},
	}, nil)
	fmt.Println(err)
	// Output:
	// internal://orders-staging ov_staging
	// pack: overlay ov_bad refused: lower_approval_mode: adapter_approval_modes.adp_payments: cannot lower adapter adp_payments's approval mode from destructive to read_only
}

// Deployments pins a published version per environment, promotes it once
// its golden replay verifies, and rolls back to the prior version.
func ExampleDeployments() {
	ctx := context.Background()
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)) // use a real key
	kid := pack.KeyID(key.Public().(ed25519.PublicKey))
	reg := pack.NewMemoryRegistry(nil)
	review := []pack.Signoff{
		{Reviewer: "ana", Role: pack.RoleArchitecture}, {Reviewer: "sam", Role: pack.RoleSecurity},
		{Reviewer: "dee", Role: pack.RoleData}, {Reviewer: "eva", Role: pack.RoleEvaluation},
	}
	var refs []pack.Ref
	for _, version := range []string{"1.0.0", "1.1.0"} {
		p, err := pack.Decode(fixture.SupportPack())
		if err != nil {
			log.Fatal(err)
		}
		p.PackMeta.PackVersion = version
		signed, err := pack.Sign(p, kid, key, nil)
		if err != nil {
			log.Fatal(err)
		}
		e, err := reg.Put(ctx, signed)
		if err != nil {
			log.Fatal(err)
		}
		if e, err = pack.Publish(ctx, reg, e.Ref, "release", review...); err != nil {
			log.Fatal(err)
		}
		refs = append(refs, e.Ref)
	}

	now := time.Date(2026, 5, 9, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	d, err := pack.NewDeployments(reg, &pack.DeploymentOptions{Now: clock})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range refs {
		if _, err := d.Pin(ctx, "prod", r, "rollout"); err != nil {
			log.Fatal(err)
		}
	}
	// The golden replay (package eval) finds a different manifest: the
	// promotion is blocked.
	replayDiffers := func(ctx context.Context, env string, ref pack.Ref) error {
		return errors.New("golden run 7: tool_manifest differs")
	}
	_, err = d.Promote(ctx, "prod", refs[1], "", replayDiffers)
	fmt.Println(errors.Is(err, pack.ErrPromotionBlocked))

	// Roll back: the prior version is pinned again and replayed.
	replayOK := func(ctx context.Context, env string, ref pack.Ref) error {
		now = now.Add(90 * time.Second) // the replay takes 90s
		return nil
	}
	res, err := d.Rollback(ctx, pack.Slot{Env: "prod", PackID: refs[0].ID}, "incident 42", replayOK)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Pin.Action, res.Pin.Ref, "replacing", res.Pin.Previous, "in", res.Duration)
	cur, err := d.Pinned(ctx, pack.Slot{Env: "prod", PackID: refs[0].ID})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cur.Ref)
	_, err = d.Pinned(ctx, pack.Slot{Env: "staging", PackID: refs[0].ID})
	fmt.Println(errors.Is(err, pack.ErrNotPinned))
	// Output:
	// true
	// rollback ctxpack.support@1.0.0 replacing ctxpack.support@1.1.0 in 1m30s
	// ctxpack.support@1.0.0
	// true
}

// A permission may give its own capability a lower approval mode than its
// adapter's maximum: a read-only lookup on an adapter that can also write.
// Validation accepts it (no idempotency key for a read); the compiler
// surfaces the lookup under read_only, and the gateway governs its calls
// as reads. A higher mode than the adapter's is refused.
func ExamplePermission_Mode() {
	p, err := pack.Decode(fixture.SupportPack())
	if err != nil {
		log.Fatal(err)
	}
	orders := &p.ToolingLayer.AdapterRegistry[0]
	orders.ApprovalMode = runcontext.LocalWrite // adp_orders can also write
	lookup := &p.ToolingLayer.Permissions[0]
	lookup.ApprovalMode = runcontext.ReadOnly
	fmt.Println(lookup.CapabilityID(), lookup.Mode(*orders), pack.Validate(p, nil))

	lookup.ApprovalMode = runcontext.Network
	fmt.Println(pack.Validate(p, nil))
	// Output:
	// adp_orders.lookup read_only <nil>
	// pack: invalid: risk: tooling_layer.permissions[0].approval_mode: permission p_orders_lookup asks for network, above adapter adp_orders's approval_mode local_write; risk: tooling_layer.permissions[0].arg_constraints.idempotency_key: permission p_orders_lookup exposes write-class capability adp_orders.lookup (network) without arg_constraints.idempotency_key.required
}
