package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/planner"
	"github.com/contextos/contextos/planner/anthropic"
	"github.com/contextos/contextos/planner/openai"
)

// modelPlanner builds the model planner --planner names: openai:MODEL or
// anthropic:MODEL, with the provider's key and base URL read through
// getenv (OPENAI_API_KEY and OPENAI_BASE_URL, or ANTHROPIC_API_KEY and
// ANTHROPIC_BASE_URL), priced by --price (price, "" for none: the run's
// cost budget is then not charged for the model's tokens, which warn
// says).
func modelPlanner(spec, price string, getenv func(string) string, warn io.Writer) (contextos.Planner, error) {
	provider, model, ok := strings.Cut(spec, ":")
	if !ok || model == "" {
		return nil, fmt.Errorf("--planner %.80q: want openai:MODEL or anthropic:MODEL", spec)
	}
	var prices map[string]planner.Price
	if price != "" {
		priced, p, err := planner.ParsePrice(price)
		if err != nil {
			return nil, fmt.Errorf("--price: %w", err)
		}
		if priced != model {
			return nil, fmt.Errorf("--price prices model %.80q, --planner plans with %.80q", priced, model)
		}
		prices = map[string]planner.Price{model: p}
	} else {
		fmt.Fprintf(warn, "contextos: warning: no --price for %.80q: its tokens are charged to the token budget, not to the cost budget (max_cost_cents)\n", model)
	}
	switch provider {
	case "openai":
		p, err := openai.New(openai.Options{Model: model, Getenv: getenv, Prices: prices})
		if err != nil {
			return nil, fmt.Errorf("--planner %s: %w", provider, err)
		}
		return p, nil
	case "anthropic":
		p, err := anthropic.New(anthropic.Options{Model: model, Getenv: getenv, Prices: prices})
		if err != nil {
			return nil, fmt.Errorf("--planner %s: %w", provider, err)
		}
		return p, nil
	}
	return nil, fmt.Errorf("--planner %.80q: the provider is openai or anthropic", spec)
}
