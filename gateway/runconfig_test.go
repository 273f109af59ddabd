package gateway_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// NewRun names the RunConfig field a caller left out (ErrConfig).
func TestNewRunNamesMissingField(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	full := gateway.RunConfig{Prepared: f.prepared, Compiled: f.cc, Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)}
	for _, c := range []struct {
		field string
		drop  func(*gateway.RunConfig)
	}{
		{"Prepared", func(c *gateway.RunConfig) { c.Prepared = nil }},
		{"Compiled", func(c *gateway.RunConfig) { c.Compiled = nil }},
		{"Request", func(c *gateway.RunConfig) { c.Request = nil }},
		{"RunContext", func(c *gateway.RunConfig) { c.RunContext = nil }},
		{"Meter", func(c *gateway.RunConfig) { c.Meter = nil }},
	} {
		t.Run(c.field, func(t *testing.T) {
			t.Parallel()
			cfg := full
			c.drop(&cfg)
			run, err := f.gw.NewRun(cfg, nil)
			if run != nil || !errors.Is(err, gateway.ErrConfig) || !strings.Contains(err.Error(), "RunConfig."+c.field+" ") {
				t.Errorf("NewRun without %s = %v, %v; want ErrConfig naming RunConfig.%s", c.field, run, err, c.field)
			}
		})
	}
	if _, err := f.gw.NewRun(full, nil); err != nil {
		t.Errorf("NewRun(full config) = %v", err)
	}
}
