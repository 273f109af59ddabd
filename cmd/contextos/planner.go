package main

import (
	"fmt"
	"strings"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/planner/anthropic"
	"github.com/contextos/contextos/planner/openai"
)

// modelPlanner builds the model planner --planner names: openai:MODEL or
// anthropic:MODEL, with the provider's key and base URL read through
// getenv (OPENAI_API_KEY and OPENAI_BASE_URL, or ANTHROPIC_API_KEY and
// ANTHROPIC_BASE_URL).
func modelPlanner(spec string, getenv func(string) string) (contextos.Planner, error) {
	provider, model, ok := strings.Cut(spec, ":")
	if !ok || model == "" {
		return nil, fmt.Errorf("--planner %.80q: want openai:MODEL or anthropic:MODEL", spec)
	}
	switch provider {
	case "openai":
		p, err := openai.New(openai.Options{Model: model, Getenv: getenv})
		if err != nil {
			return nil, fmt.Errorf("--planner %s: %w", provider, err)
		}
		return p, nil
	case "anthropic":
		p, err := anthropic.New(anthropic.Options{Model: model, Getenv: getenv})
		if err != nil {
			return nil, fmt.Errorf("--planner %s: %w", provider, err)
		}
		return p, nil
	}
	return nil, fmt.Errorf("--planner %.80q: the provider is openai or anthropic", spec)
}
