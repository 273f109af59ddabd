package temporalrun_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/temporalrun"
)

// New refuses a configuration the workflow cannot run with, naming the
// field, with ErrConfig.
func TestNewRefuses(t *testing.T) {
	w := newWorld(t, t.TempDir(), 0)
	valid := func() temporalrun.Config {
		return temporalrun.Config{Planner: contextos.PlannerFunc(plan), Registry: w.reg, Keys: w.keys, Adapters: w.adapters(),
			Decisions: w.decisions, Transcripts: w.transcr, Packets: w.packets, Runtime: w.options()}
	}
	if _, err := temporalrun.New(valid()); err != nil {
		t.Fatalf("New(valid) = %v", err)
	}
	for _, tc := range []struct {
		name, field string
		edit        func(*temporalrun.Config)
	}{
		{"no planner", "Planner", func(c *temporalrun.Config) { c.Planner = nil }},
		{"no registry", "Registry", func(c *temporalrun.Config) { c.Registry = nil }},
		{"no record store", "Decisions", func(c *temporalrun.Config) { c.Decisions = nil }},
		{"runtime adapters", "Runtime.Adapters", func(c *temporalrun.Config) { c.Runtime.Adapters = c.Adapters }},
		{"runtime store", "Runtime's stores", func(c *temporalrun.Config) { c.Runtime.Replays = contextos.NewInMemoryPackets() }},
		{"a clock", "Runtime.Now", func(c *temporalrun.Config) { c.Runtime.Now = time.Now }},
		{"OnPause", "OnPause", func(c *temporalrun.Config) { c.Runtime.OnPause = func(context.Context, contextos.PendingApproval) {} }},
		{"gateway sleep", "Runtime.Gateway.Sleep", func(c *temporalrun.Config) {
			c.Runtime.Gateway.Sleep = func(context.Context, time.Duration) error { return nil }
		}},
		{"memory", "Runtime.Memory", func(c *temporalrun.Config) { c.Runtime.Memory = contextos.NewInMemoryMemory() }},
		{"negative retries", "ActivityRetries", func(c *temporalrun.Config) { c.ActivityRetries = -1 }},
		{"nil adapter", "Adapters[0]", func(c *temporalrun.Config) { c.Adapters[0].Adapter = nil }},
		{"twice", "Adapters[1]", func(c *temporalrun.Config) { c.Adapters = []gateway.Registration{c.Adapters[0], c.Adapters[0]} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.edit(&c)
			_, err := temporalrun.New(c)
			if !errors.Is(err, temporalrun.ErrConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("New = %v, want ErrConfig naming %s", err, tc.field)
			}
		})
	}
}

// A configuration without the host's stores is refused: a run's records
// must land where the host reads them.
func ExampleNew() {
	_, err := temporalrun.New(temporalrun.Config{Planner: contextos.PlannerFunc(nil)})
	fmt.Println(errors.Is(err, temporalrun.ErrConfig))
	// Output: true
}
