package planner_test

import (
	"errors"
	"math"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/planner"
)

func TestPriceCents(t *testing.T) {
	p := planner.Price{InputUSDPerMTok: 3, CachedInputUSDPerMTok: 0.3, CacheWriteUSDPerMTok: 3.75, OutputUSDPerMTok: 15}
	for _, tc := range []struct {
		name   string
		price  planner.Price
		usage  contextos.PlanUsage
		writes int
		want   float64
	}{
		{"input and output", p, contextos.PlanUsage{InputTokens: 1_000_000, OutputTokens: 100_000}, 0, 300 + 150},
		{"cached input at its rate", p, contextos.PlanUsage{InputTokens: 1_000_000, CachedInputTokens: 800_000}, 0, 60 + 24},
		{"cache writes at theirs", p, contextos.PlanUsage{InputTokens: 1_000_000, CachedInputTokens: 500_000}, 200_000, 90 + 15 + 75},
		{"no cached rate: the input rate", planner.Price{InputUSDPerMTok: 2}, contextos.PlanUsage{InputTokens: 500_000, CachedInputTokens: 500_000}, 0, 100},
		{"no write rate: the input rate", planner.Price{InputUSDPerMTok: 2}, contextos.PlanUsage{InputTokens: 500_000}, 500_000, 100},
		{"parts capped at the input", p, contextos.PlanUsage{InputTokens: 100, CachedInputTokens: 500}, 900, 100 * 0.3 / 1e4},
		{"negative counts are 0", p, contextos.PlanUsage{InputTokens: -5, OutputTokens: -5, CachedInputTokens: -1}, -3, 0},
		{"Tokens alone is not priced", p, contextos.PlanUsage{Tokens: 1_000_000}, 0, 0},
	} {
		if got := tc.price.Cents(tc.usage, tc.writes); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: %v cents, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPriceValidate(t *testing.T) {
	if err := (planner.Price{InputUSDPerMTok: 3, OutputUSDPerMTok: 15}).Validate(); err != nil {
		t.Errorf("valid price: %v", err)
	}
	for _, p := range []planner.Price{
		{InputUSDPerMTok: -1}, {CachedInputUSDPerMTok: math.NaN()}, {CacheWriteUSDPerMTok: math.Inf(1)}, {OutputUSDPerMTok: math.Inf(-1)},
	} {
		if err := p.Validate(); !errors.Is(err, planner.ErrInvalidPrice) {
			t.Errorf("%+v: %v, want ErrInvalidPrice", p, err)
		}
	}
}
