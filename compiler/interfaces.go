package compiler

import (
	"context"
	"slices"
	"unicode/utf8"
)

// EvidenceSource retrieves evidence for a run (knowledge graph, document
// store, …). It must honour ctx, be safe for concurrent use, and return
// items in a deterministic order for the same query (the order becomes the
// block order). The compiler admits only trusted, fresh, unexpired items.
type EvidenceSource interface {
	Evidence(ctx context.Context, q EvidenceQuery) ([]EvidenceItem, error)
}

// EvidenceQuery describes the run evidence is retrieved for.
type EvidenceQuery struct {
	TenantID        string
	Intent          string
	SnapshotPinRule string         // the pack's knowledge_graph.snapshot_pin_rule
	Context         map[string]any // the request's input.context (read only)
}

// MemoryRecall recalls memories for a run. It must honour ctx, be safe for
// concurrent use, and return items in a deterministic order. The compiler
// uses only promoted memories.
type MemoryRecall interface {
	Recall(ctx context.Context, q MemoryQuery) ([]MemoryItem, error)
}

// MemoryQuery describes the run memories are recalled for.
type MemoryQuery struct {
	TenantID string
	UserID   string
	Intent   string
}

// Tokenizer counts the tokens of a text. It must be deterministic, return
// 0 for "" and a non-negative count otherwise, and be safe for concurrent
// use.
type Tokenizer interface {
	Count(text string) int
}

// EstimateTokenizer is the default Tokenizer: one token per four runes,
// rounded up. It is our own estimate, not a model's tokenizer; hosts that
// need exact counts plug in their model's.
type EstimateTokenizer struct{}

// Count implements Tokenizer.
func (EstimateTokenizer) Count(text string) int { return (runeCount(text) + 3) / 4 }

// runeCount is utf8.RuneCountInString, eight bytes at a time where they
// are all ASCII (a compiled prompt mostly is); any other byte is read as
// a range over the string reads it (an invalid one counts one rune).
func runeCount(s string) int {
	n := 0
	for len(s) > 0 {
		if len(s) >= 8 && (uint64(s[0])|uint64(s[1])<<8|uint64(s[2])<<16|uint64(s[3])<<24|
			uint64(s[4])<<32|uint64(s[5])<<40|uint64(s[6])<<48|uint64(s[7])<<56)&0x8080808080808080 == 0 {
			n, s = n+8, s[8:]
			continue
		}
		size := 1
		if s[0] >= utf8.RuneSelf {
			_, size = utf8.DecodeRuneInString(s)
		}
		n, s = n+1, s[size:]
	}
	return n
}

// StaticEvidence is an in-memory EvidenceSource that returns the same
// items for every query.
type StaticEvidence []EvidenceItem

// Evidence implements EvidenceSource.
func (s StaticEvidence) Evidence(ctx context.Context, _ EvidenceQuery) ([]EvidenceItem, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return slices.Clone(s), nil
}

// StaticMemory is an in-memory MemoryRecall that returns the same items
// for every query.
type StaticMemory []MemoryItem

// Recall implements MemoryRecall.
func (s StaticMemory) Recall(ctx context.Context, _ MemoryQuery) ([]MemoryItem, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return slices.Clone(s), nil
}

var (
	_ EvidenceSource = StaticEvidence(nil)
	_ MemoryRecall   = StaticMemory(nil)
	_ Tokenizer      = EstimateTokenizer{}
)
