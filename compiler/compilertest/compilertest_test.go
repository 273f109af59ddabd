package compilertest_test

import (
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/compiler/compilertest"
)

func TestStaticEvidenceConformance(t *testing.T) {
	compilertest.RunEvidenceSourceTests(t, func(_ *testing.T, items []compiler.EvidenceItem) compiler.EvidenceSource {
		return compiler.StaticEvidence(items)
	})
}

func TestStaticMemoryConformance(t *testing.T) {
	compilertest.RunMemoryRecallTests(t, func(_ *testing.T, items []compiler.MemoryItem) compiler.MemoryRecall {
		return compiler.StaticMemory(items)
	})
}

func TestEstimateTokenizerConformance(t *testing.T) {
	compilertest.RunTokenizerTests(t, compiler.EstimateTokenizer{})
}
