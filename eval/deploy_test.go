package eval

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/pack/packtest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// A version whose golden replay gives another tool manifest cannot be
// promoted; rolling back re-pins the prior version, replays its golden
// cases and records the rollback time.
func TestVerifierBlocksPromotionAndVerifiesRollback(t *testing.T) {
	ctx := context.Background()
	cases, err := Load(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	reg := pack.NewMemoryRegistry(nil)
	signer := packtest.NewSigner(3)
	var refs []pack.Ref
	for _, f := range []string{baselineFile, "testdata/packs/support-1.1.0-new-tool.json"} {
		e := packtest.Publish(t, reg, signer.Sign(t, loadTestPack(t, f)), "release-board")
		refs = append(refs, e.Ref)
	}
	now := time.Date(2026, 5, 9, 12, 0, 0, 0, time.UTC)
	reader := sdkmetric.NewManualReader()
	d, err := pack.NewDeployments(reg, &pack.DeploymentOptions{Now: func() time.Time { now = now.Add(time.Second); return now },
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		t.Fatal(err)
	}
	verify := Verifier(reg, cases, VerifierOptions{})

	if _, err := d.Pin(ctx, "prod", refs[0], "release"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Promote(ctx, "prod", refs[0], "observed", verify); err != nil {
		t.Fatalf("promote the released version: %v", err)
	}
	if _, err := d.Pin(ctx, "prod", refs[1], "release"); err != nil {
		t.Fatal(err)
	}
	_, err = d.Promote(ctx, "prod", refs[1], "observed", verify)
	var ve *VerifyError
	if !errors.Is(err, pack.ErrPromotionBlocked) || !errors.Is(err, ErrVerify) || !errors.As(err, &ve) || ve.Ref != refs[1] || len(ve.Problems) == 0 {
		t.Fatalf("promote a version whose manifest changed: %v", err)
	}
	for _, p := range ve.Problems {
		if p.Gate != pack.GateReplay {
			t.Errorf("problem of gate %s: %v", p.Gate, p)
		}
	}
	res, err := d.Rollback(ctx, pack.Slot{Env: "prod", PackID: refs[0].ID}, "incident 7", verify)
	if err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if res.Pin.Ref != refs[0] || res.Pin.Previous != refs[1] || res.Duration <= 0 {
		t.Fatalf("rollback %+v", res)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	var got []metricdata.HistogramDataPoint[float64]
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "contextos.pack.rollback.duration" {
				got = append(got, m.Data.(metricdata.Histogram[float64]).DataPoints...)
			}
		}
	}
	if len(got) != 1 || got[0].Count != 1 || got[0].Sum != res.Duration.Seconds() {
		t.Fatalf("rollback duration points %+v, want one of %v", got, res.Duration)
	}
	env, _ := got[0].Attributes.Value("deployment.environment.name")
	id, _ := got[0].Attributes.Value("contextos.pack.id")
	if env.AsString() != "prod" || id.AsString() != refs[0].ID {
		t.Errorf("attributes %v", got[0].Attributes)
	}
}

// A verifier with no golden cases verifies nothing, so it blocks the
// promotion rather than passing it.
func TestVerifierWithoutCasesBlocksPromotion(t *testing.T) {
	ctx := context.Background()
	reg := pack.NewMemoryRegistry(nil)
	ref := packtest.Publish(t, reg, packtest.NewSigner(3).Sign(t, loadTestPack(t, baselineFile)), "release-board").Ref
	d, err := pack.NewDeployments(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pin(ctx, "prod", ref, "release"); err != nil {
		t.Fatal(err)
	}
	for _, cases := range [][]*Case{nil, {}} {
		_, err := d.Promote(ctx, "prod", ref, "observed", Verifier(reg, cases, VerifierOptions{}))
		var ve *VerifyError
		if !errors.Is(err, pack.ErrPromotionBlocked) || !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Code != CodeNoCases {
			t.Errorf("Promote with %d cases = %v, want blocked with no_cases", len(cases), err)
		}
	}
	if p, err := d.Pinned(ctx, pack.Slot{Env: "prod", PackID: ref.ID}); err != nil || p.Promoted() {
		t.Errorf("pin after the blocked promotions = %+v, %v; want not promoted", p, err)
	}
}
