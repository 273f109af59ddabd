package compiler

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// Clone returns a copy of c that shares no memory with it: every list,
// map and pointer it reaches is copied (the JSON-shaped values of open
// objects, constraints, deep). A runtime gives its planner and critic a
// clone, so what they do to the compiled context they read changes
// nothing the run enforces or records.
func (c *CompiledContext) Clone() *CompiledContext {
	if c == nil {
		return nil
	}
	o := *c
	// The string lists share one array, sized for them all.
	a := strs{room: make([]string, 0, c.strings())}
	p := &o.CompiledPrompt
	p.ContextBlocks = cloneEach(p.ContextBlocks, func(b *ContextBlock) { b.ProvenanceRefs = a.clone(b.ProvenanceRefs) })
	m := &o.Manifests
	m.PolicyManifest = cloneEach(m.PolicyManifest, func(e *PolicyManifestEntry) { e.RuleIDs = a.clone(e.RuleIDs) })
	m.ToolManifest = cloneEach(m.ToolManifest, func(e *ToolManifestEntry) {
		e.Capabilities = a.clone(e.Capabilities)
		e.Constraints = jsonv.CloneObject(e.Constraints)
		if e.CapabilityMetadata != nil {
			cm := make(map[string]CapabilityMetadata, len(e.CapabilityMetadata))
			for k, v := range e.CapabilityMetadata {
				v.Constraints = cloneConstraints(v.Constraints)
				if v.Extra != nil {
					x := make(map[string]json.RawMessage, len(v.Extra))
					for xk, xv := range v.Extra {
						x[xk] = slices.Clone(xv)
					}
					v.Extra = x
				}
				cm[k] = v
			}
			e.CapabilityMetadata = cm
		}
	})
	m.EvidenceManifest = slices.Clone(m.EvidenceManifest)
	rc := &o.RuntimeControls
	rc.MustRefuse, rc.MustEscalate = a.clone(rc.MustRefuse), a.clone(rc.MustEscalate)
	rc.ApprovalGatesActive, rc.RedactionRulesActive = a.clone(rc.ApprovalGatesActive), a.clone(rc.RedactionRulesActive)
	b := &o.BudgetReport
	b.TokensAllocated, b.TokensUsedByBucket, b.BucketTruncations = maps.Clone(b.TokensAllocated), maps.Clone(b.TokensUsedByBucket), maps.Clone(b.BucketTruncations)
	if b.DroppedBlockIDs != nil {
		d := make(map[runcontext.Bucket][]string, len(b.DroppedBlockIDs))
		for k, v := range b.DroppedBlockIDs {
			d[k] = a.clone(v)
		}
		b.DroppedBlockIDs = d
	}
	b.Warnings = a.clone(b.Warnings)
	l := &o.ContextLedger
	l.Packs = clonePacks(l.Packs)
	l.PolicyBundles = a.clone(l.PolicyBundles)
	l.PolicyResults = cloneEach(l.PolicyResults, func(d *policy.Decision) {
		if d.Allow != nil {
			a := *d.Allow
			d.Allow = &a
		}
		d.Requires, d.Raise = a.clone(d.Requires), a.clone(d.Raise)
	})
	l.GuardrailsRaised.MustRefuse, l.GuardrailsRaised.MustEscalate = a.clone(l.GuardrailsRaised.MustRefuse), a.clone(l.GuardrailsRaised.MustEscalate)
	l.ApprovalGates = cloneEach(l.ApprovalGates, func(g *policy.Gate) { g.ActivatedBy = a.clone(g.ActivatedBy) })
	l.Tools = a.clone(l.Tools)
	l.ToolsWithheld = slices.Clone(l.ToolsWithheld)
	l.EvidenceRefs, l.MemoryRefs = a.clone(l.EvidenceRefs), a.clone(l.MemoryRefs)
	l.Omissions = cloneEach(l.Omissions, func(om *Omission) { om.SourceRefs = a.clone(om.SourceRefs) })
	if l.Environment != nil {
		env := *l.Environment
		env.Defaulted = a.clone(env.Defaulted)
		l.Environment = &env
	}
	l.Budget.TruncatedBuckets = a.clone(l.Budget.TruncatedBuckets)
	return &o
}

// strings counts the strings in the lists Clone copies with a strs (a
// count too low only costs Clone another chunk).
func (c *CompiledContext) strings() int {
	n := 0
	for i := range c.CompiledPrompt.ContextBlocks {
		n += len(c.CompiledPrompt.ContextBlocks[i].ProvenanceRefs)
	}
	m := &c.Manifests
	for i := range m.PolicyManifest {
		n += len(m.PolicyManifest[i].RuleIDs)
	}
	for i := range m.ToolManifest {
		n += len(m.ToolManifest[i].Capabilities)
	}
	rc := &c.RuntimeControls
	n += len(rc.MustRefuse) + len(rc.MustEscalate) + len(rc.ApprovalGatesActive) + len(rc.RedactionRulesActive)
	for _, v := range c.BudgetReport.DroppedBlockIDs {
		n += len(v)
	}
	n += len(c.BudgetReport.Warnings)
	l := &c.ContextLedger
	n += len(l.PolicyBundles)
	for i := range l.PolicyResults {
		n += len(l.PolicyResults[i].Requires) + len(l.PolicyResults[i].Raise)
	}
	n += len(l.GuardrailsRaised.MustRefuse) + len(l.GuardrailsRaised.MustEscalate)
	for i := range l.ApprovalGates {
		n += len(l.ApprovalGates[i].ActivatedBy)
	}
	n += len(l.Tools) + len(l.EvidenceRefs) + len(l.MemoryRefs)
	for i := range l.Omissions {
		n += len(l.Omissions[i].SourceRefs)
	}
	if l.Environment != nil {
		n += len(l.Environment.Defaulted)
	}
	return n + len(l.Budget.TruncatedBuckets)
}

// strs hands out copies of string lists from shared backing arrays, a
// chunk at a time: a compiled context holds dozens of short lists, which
// cost an allocation each otherwise. Each copy's capacity is its length,
// so appending to one never writes into another.
type strs struct{ room []string }

// strsChunk is how many strings a chunk of strs holds.
const strsChunk = 64

func (a *strs) clone(s []string) []string {
	switch {
	case s == nil:
		return nil
	case len(s) == 0:
		return []string{} // empty stays empty (no allocation)
	case len(s) > cap(a.room)-len(a.room):
		if len(s) > strsChunk/2 {
			return slices.Clone(s)
		}
		a.room = make([]string, 0, strsChunk)
	}
	n := len(a.room)
	a.room = append(a.room, s...)
	return a.room[n : n+len(s) : n+len(s)]
}

// cloneEach returns a copy of s (nil stays nil) whose elements f has
// given their own lists, maps and pointers.
func cloneEach[T any](s []T, f func(*T)) []T {
	s = slices.Clone(s)
	for i := range s {
		f(&s[i])
	}
	return s
}

// cloneConstraints returns a copy of a capability's argument constraints
// that shares no memory with them (nil for nil).
func cloneConstraints(c map[string]map[string]any) map[string]map[string]any {
	if c == nil {
		return nil
	}
	out := make(map[string]map[string]any, len(c))
	for k, v := range c {
		out[k] = jsonv.CloneObject(v)
	}
	return out
}

// clonePacks returns a copy of a ledger's packs that shares no memory
// with them.
func clonePacks(ps []LedgerPack) []LedgerPack {
	return cloneEach(ps, func(p *LedgerPack) {
		if p.Overlay != nil {
			ov := *p.Overlay
			p.Overlay = &ov
		}
	})
}
