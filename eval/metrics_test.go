package eval

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Test counts each release gate the candidate was held to, with the
// gated metric and its result; a run without a baseline holds no gate
// and counts nothing.
func TestReleaseGateMetric(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		pack     string
		baseline bool
		want     map[string]int64 // "metric/result" → count
	}{
		{"no baseline", baselineFile, false, map[string]int64{}},
		{"baseline against itself", baselineFile, true, map[string]int64{"policy/pass": 1, "safety/pass": 1}},
		{"policy regression", "testdata/packs/support-2.0.0-policy-regression.json", true, map[string]int64{"policy/fail": 1, "safety/fail": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reader := sdkmetric.NewManualReader()
			opts := TestOptions{Pack: readTestFile(t, tc.pack), Golden: goldenDir, AllowUnsigned: true,
				MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
			if tc.baseline {
				opts.Baseline = readTestFile(t, baselineFile)
			}
			rep, err := Test(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(context.Background(), &rm); err != nil {
				t.Fatal(err)
			}
			got := map[string]int64{}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if m.Name != "contextos.release_gate.evaluations" {
						t.Errorf("unexpected metric %s", m.Name)
						continue
					}
					for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
						ref, _ := dp.Attributes.Value("contextos.pack.ref")
						if ref.AsString() != rep.Pack {
							t.Errorf("pack ref attribute %q, want %q", ref.AsString(), rep.Pack)
						}
						metric, _ := dp.Attributes.Value("contextos.release_gate.metric")
						result, _ := dp.Attributes.Value("contextos.release_gate.result")
						got[metric.AsString()+"/"+result.AsString()] += dp.Value
					}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("release gate counts (-want +got):\n%s", diff)
			}
		})
	}
}
