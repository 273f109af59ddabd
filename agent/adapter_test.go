package agent_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/contextos/contextos/agent"
)

func TestUsageOf(t *testing.T) {
	t.Parallel()
	cost := func(f float64) *float64 { return &f }
	for _, c := range []struct {
		name, data string
		want       agent.Usage
		ok         bool
	}{
		{"none", ``, agent.Usage{}, false},
		{"other members", `{"session":{"id":"s"}}`, agent.Usage{}, false},
		{"full", `{"usage":{"input_tokens":2400,"output_tokens":84,"cached_input_tokens":2000},"cost_usd":0.0123}`, agent.Usage{InputTokens: 2400, OutputTokens: 84, CachedInputTokens: 2000, CostUSD: cost(0.0123)}, true},
		{"usage only", `{"usage":{"input_tokens":1}}`, agent.Usage{InputTokens: 1}, true},
		{"cost only", `{"cost_usd":0}`, agent.Usage{CostUSD: cost(0)}, true},
		{"negative and fractional counts", `{"usage":{"input_tokens":-1,"output_tokens":1.5}}`, agent.Usage{}, false},
		{"negative cost", `{"cost_usd":-1}`, agent.Usage{}, false},
		{"string cost", `{"cost_usd":"1"}`, agent.Usage{}, false},
		{"not an object", `[1]`, agent.Usage{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			u, ok := agent.UsageOf(agent.Completion{Data: json.RawMessage(c.data)})
			if ok != c.ok || u.InputTokens != c.want.InputTokens || u.OutputTokens != c.want.OutputTokens || u.CachedInputTokens != c.want.CachedInputTokens ||
				(u.CostUSD == nil) != (c.want.CostUSD == nil) || u.CostUSD != nil && *u.CostUSD != *c.want.CostUSD {
				t.Fatalf("got %+v %v, want %+v %v", u, ok, c.want, c.ok)
			}
		})
	}
	if u := (agent.Usage{InputTokens: 3, OutputTokens: 4, CachedInputTokens: 2}); u.Tokens() != 7 {
		t.Errorf("tokens %d", u.Tokens())
	}
}

// FuzzUsageOf: whatever a backend puts in its completion data, the usage
// read from it has no negative count and a finite cost ≥ 0.
func FuzzUsageOf(f *testing.F) {
	for _, s := range []string{`{"usage":{"input_tokens":2400,"output_tokens":84},"cost_usd":0.01}`, `{"cost_usd":1e308}`, `null`, `{"usage":null}`, `{"usage":{"input_tokens":9223372036854775808}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		u, ok := agent.UsageOf(agent.Completion{Data: data})
		if u.InputTokens < 0 || u.OutputTokens < 0 || u.CachedInputTokens < 0 {
			t.Fatalf("negative count %+v", u)
		}
		if u.CostUSD != nil && (*u.CostUSD < 0 || math.IsInf(*u.CostUSD, 0) || math.IsNaN(*u.CostUSD)) {
			t.Fatalf("cost %v", *u.CostUSD)
		}
		if !ok && (u != agent.Usage{}) {
			t.Fatalf("not ok but %+v", u)
		}
	})
}
