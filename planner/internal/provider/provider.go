// Package provider holds what the model planner packages (planner/openai,
// planner/anthropic) check alike: their options' base URL and price table,
// and what of a provider's error reply they may repeat in their own
// errors, which the runtime logs: only identifier words (an error type,
// code or request id), never free text, which a hostile or careless server
// can fill with a key it was sent.
package provider

import (
	"errors"
	"net/url"

	"github.com/contextos/contextos/internal/sortedkeys"
	"github.com/contextos/contextos/planner"
)

// BaseURL checks an option's base URL ("" is the SDK's default).
func BaseURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("BaseURL must be an absolute http or https URL")
	}
	return nil
}

// Prices checks a price table, model by model in sorted order, so the
// same table always reports the same model: the first model whose price
// is invalid, and why; "" and nil when every price is valid.
func Prices(prices map[string]planner.Price) (model string, err error) {
	for _, m := range sortedkeys.Of(prices) {
		if err := prices[m].Validate(); err != nil {
			return m, err
		}
	}
	return "", nil
}

// Word returns s when it is an identifier word of at most limit bytes
// (ASCII letters, digits and underscores; with lower set, no capitals),
// else "". An API key never passes: every provider's keys hold a '-'.
func Word(s string, limit int, lower bool) string {
	if s == "" || len(s) > limit {
		return ""
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_':
		case c >= 'A' && c <= 'Z' && !lower:
		default:
			return ""
		}
	}
	return s
}
