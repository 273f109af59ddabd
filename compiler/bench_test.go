package compiler_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// BenchmarkCompileCanonical is the per-request compile of the canonical
// scenario on a Prepared (what the runtime runs per request).
func BenchmarkCompileCanonical(b *testing.B) {
	s := canonicalScenario(b)
	p, err := compiler.Prepare(s.inputs(), &s.opts)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Compile(ctx, s.req, s.rc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompileCanonicalWithPrepare includes the once-per-pack work.
func BenchmarkCompileCanonicalWithPrepare(b *testing.B) {
	s := canonicalScenario(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := compiler.Compile(ctx, s.inputs(), s.req, s.rc, &s.opts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDigestCompiledContext is only the canonical digest of the
// canonical compiled output: the floor compile cannot beat.
func BenchmarkDigestCompiledContext(b *testing.B) {
	cc := canonicalScenario(b).compile(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := canon.Digest(cc); err != nil {
			b.Fatal(err)
		}
	}
}

// scaledPack is the canonical pack with n extra rules (in one bundle) and
// n extra read-only adapters, each with a permission.
func scaledPack(b *testing.B, n int) *pack.Pack {
	p := canonicalScenario(b).pack
	rules := &p.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules
	for i := 0; i < n; i++ {
		*rules = append(*rules, pack.Rule{
			RuleID: "R_SCALE_" + strconv.Itoa(i), AppliesTo: map[string]any{"intent": "support.refund"},
			If:              json.RawMessage(fmt.Sprintf(`{"and":[{">":[{"var":"request.context.refund_amount"},%d]},{"==":[{"var":"user.role"},"support_agent"]}]}`, i)),
			Then:            &pack.Effect{Allow: ptrTo(true), Requires: []string{"order_lookup"}},
			DecisionBinding: "support.refund.execute", Rationale: "scale rule " + strconv.Itoa(i),
		})
		id := "adp_scale" + strconv.Itoa(i)
		p.ToolingLayer.AdapterRegistry = append(p.ToolingLayer.AdapterRegistry, pack.Adapter{AdapterID: id, Type: "INTERNAL", EndpointRef: "internal://" + id, Capabilities: []string{"read"}, ApprovalMode: runcontext.ReadOnly})
		p.ToolingLayer.Permissions = append(p.ToolingLayer.Permissions, pack.Permission{PermissionID: "p_" + id, AdapterID: id, Capability: "read", Allow: true})
	}
	if err := pack.Validate(p, nil); err != nil {
		b.Fatal(err)
	}
	return p
}

func ptrTo[T any](v T) *T { return &v }

// BenchmarkCompileScale measures how the per-request compile grows with
// the pack: 10, 100 and 1,000 rules and adapters.
func BenchmarkCompileScale(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("rules_adapters=%d", n), func(b *testing.B) {
			s := canonicalScenario(b)
			s.pack = scaledPack(b, n)
			for _, bucket := range runcontext.Buckets() {
				s.rc.RunBudget.BucketTokens[bucket] = 1 << 20 // measure compile, not truncation
			}
			s.rc.RunBudget.TotalTokens = 1 << 23
			p, err := compiler.Prepare(s.inputs(), &s.opts)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Compile(ctx, s.req, s.rc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPrepareScale measures the once-per-pack work as the pack grows:
// 1,000, 10,000 and 100,000 rules, each with its own read-only adapter and
// permission. Time and allocations per rule stay flat: the curve is linear.
func BenchmarkPrepareScale(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			s := canonicalScenario(b)
			s.pack = scaledPack(b, n)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := compiler.Prepare(s.inputs(), &s.opts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/rule")
		})
	}
}

// BenchmarkCompileDigestFloor is the digests alone that a compile of the
// canonical scenario computes: request_hash, run_context_hash,
// evidence_hash, memory_hash, compiled_context_hash and ledger_hash (the
// last two through Verify). BenchmarkCompileCanonical over this is what
// the compile costs beyond its own hashes.
func BenchmarkCompileDigestFloor(b *testing.B) {
	s := canonicalScenario(b)
	cc := s.compile(b)
	ev, err := s.opts.Evidence.Evidence(ctx, compiler.EvidenceQuery{})
	if err != nil {
		b.Fatal(err)
	}
	mem, err := s.opts.Memory.Recall(ctx, compiler.MemoryQuery{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, v := range []any{s.req, s.rc, ev, mem} {
			if _, err := canon.Digest(v); err != nil {
				b.Fatal(err)
			}
		}
		if err := cc.Verify(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompileVaryingInput compiles requests whose input differs from
// the previous compile's (the refund amount moves each time): the
// content-hash memo never sees the encoding it holds, and hashes from the
// last state inside the shared prefix.
func BenchmarkCompileVaryingInput(b *testing.B) {
	s := canonicalScenario(b)
	p, err := compiler.Prepare(s.inputs(), &s.opts)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		s.req.Input.Context["refund_amount"] = 4000 + i%997
		if _, err := p.Compile(ctx, s.req, s.rc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCloneCanonical is the copy of the canonical compiled context a
// runtime gives its planner and critic.
func BenchmarkCloneCanonical(b *testing.B) {
	cc := canonicalScenario(b).compile(b)
	b.ReportAllocs()
	for b.Loop() {
		_ = cc.Clone()
	}
}
