package planner_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
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

func TestParsePrice(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		model string
		want  planner.Price
		err   string // a part of the error, "" for none
	}{
		{spec: "gpt-4.1=2/8", model: "gpt-4.1", want: planner.Price{InputUSDPerMTok: 2, OutputUSDPerMTok: 8}},
		{spec: "gpt-4.1=2/8/0.5", model: "gpt-4.1", want: planner.Price{InputUSDPerMTok: 2, OutputUSDPerMTok: 8, CachedInputUSDPerMTok: 0.5}},
		{spec: "claude-sonnet-4-5=3/15/0.3/3.75", model: "claude-sonnet-4-5", want: planner.Price{InputUSDPerMTok: 3, OutputUSDPerMTok: 15, CachedInputUSDPerMTok: 0.3, CacheWriteUSDPerMTok: 3.75}},
		{spec: "org/model=v2=1/2", model: "org/model=v2", want: planner.Price{InputUSDPerMTok: 1, OutputUSDPerMTok: 2}},
		{spec: "m= 0 / 0 ", model: "m"},
		{spec: "gpt-4.1", err: "want MODEL=IN/OUT"},
		{spec: "=1/2", err: "want MODEL=IN/OUT"},
		{spec: "m=1", err: "got 1"},
		{spec: "m=1/2/3/4/5", err: "got 5"},
		{spec: "m=1/x", err: "OUT is"},
		{spec: "m=-1/2", err: "IN is"},
		{spec: "m=1/2/NaN", err: "CACHED is"},
		{spec: "m=1/2/3/Inf", err: "CACHE_WRITE is"},
		{spec: "m=1//2", err: "OUT is"},
	} {
		model, p, err := planner.ParsePrice(tc.spec)
		switch {
		case tc.err == "" && (err != nil || model != tc.model || p != tc.want):
			t.Errorf("ParsePrice(%q) = %q, %+v, %v; want %q, %+v", tc.spec, model, p, err, tc.model, tc.want)
		case tc.err != "" && (!errors.Is(err, planner.ErrInvalidPrice) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParsePrice(%q) error %v, want ErrInvalidPrice naming %q", tc.spec, err, tc.err)
		}
	}
}

// Whatever a command line gives, ParsePrice returns a valid price or an
// ErrInvalidPrice.
func FuzzParsePrice(f *testing.F) {
	for _, s := range []string{"gpt-4.1=2/8/0.5", "m=1/2/3/4", "=", "m=1e400/2", "a=b=1/2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		model, p, err := planner.ParsePrice(spec)
		if err != nil {
			if !errors.Is(err, planner.ErrInvalidPrice) {
				t.Fatalf("error %v does not wrap ErrInvalidPrice", err)
			}
			return
		}
		if model == "" || p.Validate() != nil {
			t.Fatalf("ParsePrice(%q) = %q, %+v: an empty model or an invalid price", spec, model, p)
		}
	})
}

func ExampleParsePrice() {
	model, p, err := planner.ParsePrice("gpt-4.1=2/8/0.5")
	if err != nil {
		panic(err)
	}
	cents := p.Cents(contextos.PlanUsage{InputTokens: 1_000_000, CachedInputTokens: 500_000, OutputTokens: 100_000}, 0)
	fmt.Printf("%s: %.2f cents\n", model, cents)
	// Output: gpt-4.1: 205.00 cents
}
