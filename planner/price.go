package planner

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/contextos/contextos"
)

// ErrInvalidPrice is returned (wrapped) by Price.Validate for a price
// that is negative, NaN or infinite.
var ErrInvalidPrice = errors.New("planner: invalid price")

// Price is a model's price in US dollars per million tokens, which turns
// a turn's usage into the cents charged to the run's cost budget.
type Price struct {
	// InputUSDPerMTok prices input tokens neither read from nor written
	// to the provider's prompt cache.
	InputUSDPerMTok float64
	// CachedInputUSDPerMTok prices input tokens read from the prompt
	// cache; 0 prices them as InputUSDPerMTok.
	CachedInputUSDPerMTok float64
	// CacheWriteUSDPerMTok prices input tokens written to the prompt
	// cache; 0 prices them as InputUSDPerMTok.
	CacheWriteUSDPerMTok float64
	// OutputUSDPerMTok prices output tokens.
	OutputUSDPerMTok float64
}

// Validate reports a price that is not finite or is negative, naming the
// field (errors.Is(err, ErrInvalidPrice)).
func (p Price) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"InputUSDPerMTok", p.InputUSDPerMTok},
		{"CachedInputUSDPerMTok", p.CachedInputUSDPerMTok},
		{"CacheWriteUSDPerMTok", p.CacheWriteUSDPerMTok},
		{"OutputUSDPerMTok", p.OutputUSDPerMTok},
	} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("%w: %s is %v, want a finite number ≥ 0", ErrInvalidPrice, f.name, f.v)
		}
	}
	return nil
}

// Cents is the cost of usage u in US cents. InputTokens counts every
// input token: CachedInputTokens of them were read from the prompt cache
// and cacheWriteTokens written to it (both part of InputTokens); the rest
// are priced at InputUSDPerMTok. A count below 0 counts as 0, and the
// parts never exceed InputTokens (cached first, then written). Tokens is
// not priced: only the breakdown is.
func (p Price) Cents(u contextos.PlanUsage, cacheWriteTokens int) float64 {
	input := max(u.InputTokens, 0)
	cached := min(max(u.CachedInputTokens, 0), input)
	written := min(max(cacheWriteTokens, 0), input-cached)
	plain := input - cached - written
	cachedRate, writeRate := p.CachedInputUSDPerMTok, p.CacheWriteUSDPerMTok
	if cachedRate == 0 {
		cachedRate = p.InputUSDPerMTok
	}
	if writeRate == 0 {
		writeRate = p.InputUSDPerMTok
	}
	usd := (float64(plain)*p.InputUSDPerMTok + float64(cached)*cachedRate + float64(written)*writeRate +
		float64(max(u.OutputTokens, 0))*p.OutputUSDPerMTok) / 1e6
	return usd * 100
}

// ParsePrice parses a model's price as a command line gives it:
// "MODEL=IN/OUT[/CACHED[/CACHE_WRITE]]", US dollars per million tokens
// of input, output, input read from the prompt cache and input written
// to it (a part left out, or 0, prices those tokens as input), as in
// "gpt-4.1=2/8/0.5". The model is everything before the last "=" (a model
// name may hold one). An error wraps ErrInvalidPrice and names the part
// that is wrong.
func ParsePrice(spec string) (model string, p Price, err error) {
	i := strings.LastIndexByte(spec, '=')
	if i <= 0 {
		return "", Price{}, fmt.Errorf("%w: %.80q: want MODEL=IN/OUT[/CACHED[/CACHE_WRITE]] (USD per million tokens)", ErrInvalidPrice, spec)
	}
	model, parts := spec[:i], strings.Split(spec[i+1:], "/")
	if len(parts) < 2 || len(parts) > 4 {
		return "", Price{}, fmt.Errorf("%w: %.80q: want 2 to 4 prices after %q (IN/OUT[/CACHED[/CACHE_WRITE]]), got %d", ErrInvalidPrice, spec, model+"=", len(parts))
	}
	names := []string{"IN", "OUT", "CACHED", "CACHE_WRITE"}
	fields := []*float64{&p.InputUSDPerMTok, &p.OutputUSDPerMTok, &p.CachedInputUSDPerMTok, &p.CacheWriteUSDPerMTok}
	for j, s := range parts {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return "", Price{}, fmt.Errorf("%w: %.80q: %s is %.40q, want a finite number ≥ 0", ErrInvalidPrice, model, names[j], s)
		}
		*fields[j] = v
	}
	return model, p, nil
}
