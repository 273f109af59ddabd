package compiler

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// The writers below are the canonical (RFC 8785) form of what
// compiled_context_hash and ledger_hash cover, written field by field
// instead of by canon's reflective encoder: every compile hashes both.
// They write exactly what canon.JSON writes for the same values (members
// in UTF-16 order, omitempty as encoding/json reads it, nil slices and
// maps as null, integers beyond ±(2^53−1) refused, an approval mode
// through its MarshalText) and hand what they do not write themselves
// (constraint maps of any values, capability metadata with extension
// members, map keys that are not valid UTF-8) to canon.AppendValue.
// TestCanonicalWritersMatchReflection and FuzzCanonicalWriters hold them
// to canon.JSON, every field of every type filled; a field added to one
// of these types and not written here fails them.

// contentEncoding is compiledContent's canonical form (contentHash).
type contentEncoding struct{ c *CompiledContext }

// AppendCanonical implements canon.Appender. Where the writer fails, the
// value is encoded again by canon.AppendValue, for the very error the
// reflective encoder reports (of two faults, the one it meets first).
func (e contentEncoding) AppendCanonical(dst []byte) ([]byte, error) {
	out, err := e.append(dst)
	if err != nil {
		c := e.c
		return canon.AppendValue(dst, compiledContent{c.CompiledPrompt, c.Manifests, c.RuntimeControls, c.BudgetReport})
	}
	return out, nil
}

func (e contentEncoding) append(dst []byte) (_ []byte, err error) {
	c := e.c
	dst = append(dst, `{"budget_report":`...)
	if dst, err = appendBudgetReport(dst, &c.BudgetReport); err != nil {
		return nil, err
	}
	dst = append(dst, `,"compiled_prompt":`...)
	if dst, err = appendCompiledPrompt(dst, &c.CompiledPrompt); err != nil {
		return nil, err
	}
	dst = append(dst, `,"manifests":`...)
	if dst, err = appendManifests(dst, &c.Manifests); err != nil {
		return nil, err
	}
	dst = append(dst, `,"runtime_controls":`...)
	dst = appendRuntimeControls(dst, &c.RuntimeControls)
	return append(dst, '}'), nil
}

// ledgerEncoding is a ContextLedger's canonical form; with noLedgerHash,
// the form with ledger_hash left out (LedgerHash).
type ledgerEncoding struct {
	l            *ContextLedger
	noLedgerHash bool
}

// AppendCanonical implements canon.Appender; where the writer fails, as
// contentEncoding's.
func (e ledgerEncoding) AppendCanonical(dst []byte) ([]byte, error) {
	out, err := e.append(dst)
	if err != nil {
		c := *e.l
		if e.noLedgerHash {
			c.LedgerHash = ""
		}
		return canon.AppendValue(dst, &c)
	}
	return out, nil
}

func (e ledgerEncoding) append(dst []byte) (_ []byte, err error) {
	l := e.l
	dst = append(dst, `{"approval_gates":`...)
	if dst, err = appendSlice(dst, l.ApprovalGates, appendGate); err != nil {
		return nil, err
	}
	dst = append(dst, `,"budget":{"tokens_used_at_compile":`...)
	if dst, err = canon.AppendInt(dst, int64(l.Budget.TokensUsedAtCompile)); err != nil {
		return nil, err
	}
	dst = append(dst, `,"truncated_buckets":`...)
	dst = canon.AppendStrings(dst, l.Budget.TruncatedBuckets)
	dst = append(dst, '}')
	if l.CompiledContextHash != "" {
		dst = canon.AppendString(append(dst, `,"compiled_context_hash":`...), l.CompiledContextHash)
	}
	if l.DataClassification != "" {
		dst = canon.AppendString(append(dst, `,"data_classification":`...), string(l.DataClassification))
	}
	if l.Environment != nil {
		dst = appendEnvironment(append(dst, `,"environment":`...), l.Environment)
	}
	dst = canon.AppendStrings(append(dst, `,"evidence_refs":`...), l.EvidenceRefs)
	dst = append(dst, `,"guardrails_raised":`...)
	dst = appendRaised(dst, &l.GuardrailsRaised)
	dst = appendInputs(append(dst, `,"inputs":`...), &l.Inputs)
	dst = canon.AppendString(append(dst, `,"intent":`...), l.Intent)
	if !e.noLedgerHash && l.LedgerHash != "" {
		dst = canon.AppendString(append(dst, `,"ledger_hash":`...), l.LedgerHash)
	}
	dst = canon.AppendStrings(append(dst, `,"memory_refs":`...), l.MemoryRefs)
	if len(l.Omissions) > 0 {
		if dst, err = appendSlice(append(dst, `,"omissions":`...), l.Omissions, appendOmission); err != nil {
			return nil, err
		}
	}
	dst = canon.AppendString(append(dst, `,"ontology":`...), l.Ontology)
	dst = canon.AppendString(append(dst, `,"pack_ref":`...), l.PackRef)
	if dst, err = appendSlice(append(dst, `,"packs":`...), l.Packs, appendLedgerPack); err != nil {
		return nil, err
	}
	dst = canon.AppendStrings(append(dst, `,"policy_bundles":`...), l.PolicyBundles)
	if dst, err = appendSlice(append(dst, `,"policy_results":`...), l.PolicyResults, appendDecision); err != nil {
		return nil, err
	}
	dst = canon.AppendString(append(dst, `,"policy_verdict":`...), string(l.PolicyVerdict))
	dst = canon.AppendString(append(dst, `,"request_id":`...), l.RequestID)
	dst = canon.AppendString(append(dst, `,"run_id":`...), l.RunID)
	dst = canon.AppendString(append(dst, `,"safety_mode":`...), l.SafetyMode)
	dst = canon.AppendString(append(dst, `,"tenant_id":`...), l.TenantID)
	dst = canon.AppendStrings(append(dst, `,"tools":`...), l.Tools)
	if len(l.ToolsWithheld) > 0 {
		if dst, err = appendSlice(append(dst, `,"tools_withheld":`...), l.ToolsWithheld, appendWithheld); err != nil {
			return nil, err
		}
	}
	dst = canon.AppendString(append(dst, `,"trace_id":`...), l.TraceID)
	return append(dst, '}'), nil
}

// appendSlice writes s as a JSON array (nil as null), each element by f.
func appendSlice[T any](dst []byte, s []T, f func([]byte, *T) ([]byte, error)) (_ []byte, err error) {
	if s == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '[')
	for i := range s {
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, err = f(dst, &s[i]); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

// appendMap writes a map with string keys (nil as null), members in
// canonical order, each value by f. A map with a key that is not valid
// UTF-8 is written by canon.AppendValue, as canon writes it (the key's
// replaced form orders it).
func appendMap[K ~string, V any](dst []byte, m map[K]V, f func([]byte, V) ([]byte, error)) (_ []byte, err error) {
	if m == nil {
		return append(dst, "null"...), nil
	}
	var small [16]K
	keys := small[:0]
	for k := range m {
		if !utf8.ValidString(string(k)) {
			return canon.AppendValue(dst, m)
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b K) int { return canon.CompareKeys(string(a), string(b)) })
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(canon.AppendString(dst, string(k)), ':')
		if dst, err = f(dst, m[k]); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

func appendIntValue(dst []byte, i int) ([]byte, error) { return canon.AppendInt(dst, int64(i)) }

func appendBoolValue(dst []byte, b bool) ([]byte, error) { return canon.AppendBool(dst, b), nil }

func appendStringsValue(dst []byte, s []string) ([]byte, error) {
	return canon.AppendStrings(dst, s), nil
}

// appendApprovalMode writes m through its MarshalText, as canon does (an
// unknown mode is an error).
func appendApprovalMode(dst []byte, m runcontext.ApprovalMode) ([]byte, error) {
	b, err := m.MarshalText()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", canon.ErrNotCanonicalizable, err)
	}
	return canon.AppendString(dst, string(b)), nil
}

func appendBudgetReport(dst []byte, r *BudgetReport) (_ []byte, err error) {
	dst = append(dst, `{"bucket_truncations":`...)
	if dst, err = appendMap(dst, r.BucketTruncations, appendBoolValue); err != nil {
		return nil, err
	}
	if len(r.DroppedBlockIDs) > 0 {
		if dst, err = appendMap(append(dst, `,"dropped_block_ids":`...), r.DroppedBlockIDs, appendStringsValue); err != nil {
			return nil, err
		}
	}
	if dst, err = appendMap(append(dst, `,"tokens_allocated":`...), r.TokensAllocated, appendIntValue); err != nil {
		return nil, err
	}
	if dst, err = canon.AppendInt(append(dst, `,"tokens_used_at_compile":`...), int64(r.TokensUsedAtCompile)); err != nil {
		return nil, err
	}
	if dst, err = appendMap(append(dst, `,"tokens_used_by_bucket":`...), r.TokensUsedByBucket, appendIntValue); err != nil {
		return nil, err
	}
	if len(r.Warnings) > 0 {
		dst = canon.AppendStrings(append(dst, `,"warnings":`...), r.Warnings)
	}
	return append(dst, '}'), nil
}

func appendCompiledPrompt(dst []byte, p *CompiledPrompt) (_ []byte, err error) {
	dst = append(dst, `{"context_blocks":`...)
	if dst, err = appendSlice(dst, p.ContextBlocks, appendContextBlock); err != nil {
		return nil, err
	}
	dst = canon.AppendString(append(dst, `,"developer":`...), p.Developer)
	dst = canon.AppendString(append(dst, `,"system":`...), p.System)
	dst = canon.AppendString(append(dst, `,"task":`...), p.Task)
	return append(dst, '}'), nil
}

func appendContextBlock(dst []byte, b *ContextBlock) (_ []byte, err error) {
	dst = canon.AppendString(append(dst, `{"block_id":`...), b.BlockID)
	dst = canon.AppendString(append(dst, `,"bucket":`...), string(b.Bucket))
	dst = canon.AppendString(append(dst, `,"content":`...), b.Content)
	if dst, err = canon.AppendInt(append(dst, `,"priority":`...), int64(b.Priority)); err != nil {
		return nil, err
	}
	if len(b.ProvenanceRefs) > 0 {
		dst = canon.AppendStrings(append(dst, `,"provenance_refs":`...), b.ProvenanceRefs)
	}
	if b.Truncated {
		dst = append(dst, `,"truncated":true`...)
	}
	return append(dst, '}'), nil
}

func appendManifests(dst []byte, m *Manifests) (_ []byte, err error) {
	dst = append(dst, `{"evidence_manifest":`...)
	if dst, err = appendSlice(dst, m.EvidenceManifest, appendEvidenceEntry); err != nil {
		return nil, err
	}
	if dst, err = appendSlice(append(dst, `,"policy_manifest":`...), m.PolicyManifest, appendPolicyEntry); err != nil {
		return nil, err
	}
	if dst, err = appendSlice(append(dst, `,"tool_manifest":`...), m.ToolManifest, appendToolEntry); err != nil {
		return nil, err
	}
	return append(dst, '}'), nil
}

func appendEvidenceEntry(dst []byte, e *EvidenceManifestEntry) ([]byte, error) {
	dst = canon.AppendString(append(dst, `{"evidence_ref":`...), e.EvidenceRef)
	if e.Hash != "" {
		dst = canon.AppendString(append(dst, `,"hash":`...), e.Hash)
	}
	if e.SourceID != "" {
		dst = canon.AppendString(append(dst, `,"source_id":`...), e.SourceID)
	}
	return append(dst, '}'), nil
}

func appendPolicyEntry(dst []byte, e *PolicyManifestEntry) ([]byte, error) {
	dst = canon.AppendString(append(dst, `{"bundle_id":`...), e.BundleID)
	dst = canon.AppendStrings(append(dst, `,"rule_ids":`...), e.RuleIDs)
	return append(dst, '}'), nil
}

func appendToolEntry(dst []byte, e *ToolManifestEntry) (_ []byte, err error) {
	dst = canon.AppendString(append(dst, `{"adapter_id":`...), e.AdapterID)
	dst = canon.AppendStrings(append(dst, `,"capabilities":`...), e.Capabilities)
	if len(e.CapabilityMetadata) > 0 {
		if dst, err = appendMap(append(dst, `,"capability_metadata":`...), e.CapabilityMetadata, appendCapabilityMetadata); err != nil {
			return nil, err
		}
	}
	if len(e.Constraints) > 0 {
		if dst, err = canon.AppendValue(append(dst, `,"constraints":`...), e.Constraints); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendCapabilityMetadata writes m as canon does: an open object, whose
// extension members (rare) canon itself writes among the fields.
func appendCapabilityMetadata(dst []byte, m CapabilityMetadata) (_ []byte, err error) {
	if len(m.Extra) > 0 {
		return canon.AppendValue(dst, m)
	}
	dst = append(dst, '{')
	if m.ApprovalGate != "" {
		dst = canon.AppendString(append(dst, `"approval_gate":`...), m.ApprovalGate)
		dst = append(dst, ',')
	}
	if m.GateActive {
		dst = append(dst, `"approval_gate_active":true,`...)
	}
	if m.GatePerCall != "" {
		dst = canon.AppendString(append(dst, `"approval_gate_per_call":`...), m.GatePerCall)
		dst = append(dst, ',')
	}
	if dst, err = appendApprovalMode(append(dst, `"approval_mode":`...), m.ApprovalMode); err != nil {
		return nil, err
	}
	if len(m.Constraints) > 0 {
		if dst, err = canon.AppendValue(append(dst, `,"constraints":`...), m.Constraints); err != nil {
			return nil, err
		}
	}
	dst = canon.AppendString(append(dst, `,"kind":`...), m.Kind)
	dst = canon.AppendString(append(dst, `,"permission_id":`...), m.PermissionID)
	dst = canon.AppendString(append(dst, `,"risk_level":`...), m.RiskLevel)
	dst = canon.AppendString(append(dst, `,"source":`...), m.Source)
	return append(dst, '}'), nil
}

func appendRuntimeControls(dst []byte, r *RuntimeControls) []byte {
	dst = canon.AppendStrings(append(dst, `{"approval_gates_active":`...), r.ApprovalGatesActive)
	dst = canon.AppendStrings(append(dst, `,"must_escalate":`...), r.MustEscalate)
	dst = canon.AppendStrings(append(dst, `,"must_refuse":`...), r.MustRefuse)
	dst = canon.AppendStrings(append(dst, `,"redaction_rules_active":`...), r.RedactionRulesActive)
	return append(dst, '}')
}

func appendGate(dst []byte, g *policy.Gate) (_ []byte, err error) {
	dst = append(dst, '{')
	if len(g.ActivatedBy) > 0 {
		dst = canon.AppendStrings(append(dst, `"activated_by":`...), g.ActivatedBy)
		dst = append(dst, ',')
	}
	dst = canon.AppendBool(append(dst, `"active":`...), g.Active)
	dst = canon.AppendString(append(dst, `,"gate_id":`...), g.GateID)
	if g.PerCall {
		dst = append(dst, `,"per_call":true`...)
	}
	dst = canon.AppendString(append(dst, `,"required_approver_role":`...), g.ApproverRole)
	if dst, err = canon.AppendInt(append(dst, `,"ttl_seconds":`...), int64(g.TTLSeconds)); err != nil {
		return nil, err
	}
	return append(dst, '}'), nil
}

func appendRaised(dst []byte, r *policy.Raised) []byte {
	dst = canon.AppendStrings(append(dst, `{"must_escalate":`...), r.MustEscalate)
	dst = canon.AppendStrings(append(dst, `,"must_refuse":`...), r.MustRefuse)
	return append(dst, '}')
}

func appendDecision(dst []byte, d *policy.Decision) (_ []byte, err error) {
	dst = append(dst, '{')
	if d.Allow != nil {
		dst = canon.AppendBool(append(dst, `"allow":`...), *d.Allow)
		dst = append(dst, ',')
	}
	if d.ApprovalMode != "" {
		if dst, err = appendApprovalMode(append(dst, `"approval_mode":`...), d.ApprovalMode); err != nil {
			return nil, err
		}
		dst = append(dst, ',')
	}
	if d.Branch != "" {
		dst = canon.AppendString(append(dst, `"branch":`...), d.Branch)
		dst = append(dst, ',')
	}
	dst = canon.AppendString(append(dst, `"bundle_id":`...), d.BundleID)
	dst = canon.AppendString(append(dst, `,"data_digest":`...), d.DataDigest)
	if d.DecisionBinding != "" {
		dst = canon.AppendString(append(dst, `,"decision_binding":`...), d.DecisionBinding)
	}
	dst = canon.AppendString(append(dst, `,"outcome":`...), string(d.Outcome))
	dst = canon.AppendString(append(dst, `,"policy_decision_id":`...), d.PolicyDecisionID)
	if len(d.Raise) > 0 {
		dst = canon.AppendStrings(append(dst, `,"raise":`...), d.Raise)
	}
	if d.Rationale != "" {
		dst = canon.AppendString(append(dst, `,"rationale":`...), d.Rationale)
	}
	if d.Reason != "" {
		dst = canon.AppendString(append(dst, `,"reason":`...), d.Reason)
	}
	if len(d.Requires) > 0 {
		dst = canon.AppendStrings(append(dst, `,"requires":`...), d.Requires)
	}
	if d.RequiresApprovalGate != "" {
		dst = canon.AppendString(append(dst, `,"requires_approval_gate":`...), d.RequiresApprovalGate)
	}
	dst = canon.AppendString(append(dst, `,"rule_id":`...), d.RuleID)
	return append(dst, '}'), nil
}

func appendEnvironment(dst []byte, e *LedgerEnvironment) []byte {
	// Every member is omitempty: a comma before each but the first written.
	sep := byte('{')
	if e.Currency != "" {
		dst = canon.AppendString(append(append(dst, sep), `"currency":`...), e.Currency)
		sep = ','
	}
	if len(e.Defaulted) > 0 {
		dst = canon.AppendStrings(append(append(dst, sep), `"defaulted":`...), e.Defaulted)
		sep = ','
	}
	if e.Locale != "" {
		dst = canon.AppendString(append(append(dst, sep), `"locale":`...), e.Locale)
		sep = ','
	}
	if e.Timezone != "" {
		dst = canon.AppendString(append(append(dst, sep), `"timezone":`...), e.Timezone)
		sep = ','
	}
	if sep == '{' {
		return append(dst, "{}"...)
	}
	return append(dst, '}')
}

func appendInputs(dst []byte, in *LedgerInputs) []byte {
	dst = append(dst, '{')
	if in.EvidenceHash != "" {
		dst = canon.AppendString(append(dst, `"evidence_hash":`...), in.EvidenceHash)
		dst = append(dst, ',')
	}
	if in.MemoryHash != "" {
		dst = canon.AppendString(append(dst, `"memory_hash":`...), in.MemoryHash)
		dst = append(dst, ',')
	}
	dst = canon.AppendString(append(dst, `"request_hash":`...), in.RequestHash)
	dst = canon.AppendString(append(dst, `,"run_context_hash":`...), in.RunContextHash)
	return append(dst, '}')
}

func appendOmission(dst []byte, o *Omission) (_ []byte, err error) {
	dst = append(dst, '{')
	if o.EstimatedTokens != 0 {
		if dst, err = canon.AppendInt(append(dst, `"estimated_tokens":`...), int64(o.EstimatedTokens)); err != nil {
			return nil, err
		}
		dst = append(dst, ',')
	}
	dst = canon.AppendString(append(dst, `"kind":`...), o.Kind)
	if o.Priority != 0 {
		if dst, err = canon.AppendInt(append(dst, `,"priority":`...), int64(o.Priority)); err != nil {
			return nil, err
		}
	}
	dst = canon.AppendString(append(dst, `,"reason":`...), o.Reason)
	dst = canon.AppendString(append(dst, `,"ref":`...), o.Ref)
	if len(o.SourceRefs) > 0 {
		dst = canon.AppendStrings(append(dst, `,"source_refs":`...), o.SourceRefs)
	}
	return append(dst, '}'), nil
}

func appendLedgerPack(dst []byte, p *LedgerPack) ([]byte, error) {
	dst = canon.AppendString(append(dst, `{"content_hash":`...), p.ContentHash)
	if p.Overlay != nil {
		dst = appendOverlay(append(dst, `,"overlay":`...), p.Overlay)
	}
	dst = canon.AppendString(append(dst, `,"ref":`...), p.Ref)
	return append(dst, '}'), nil
}

func appendOverlay(dst []byte, o *pack.AppliedOverlay) []byte {
	dst = canon.AppendString(append(dst, `{"environment":`...), o.Environment)
	dst = canon.AppendString(append(dst, `,"hash":`...), o.Hash)
	dst = canon.AppendString(append(dst, `,"overlay_id":`...), o.OverlayID)
	return append(dst, '}')
}

func appendWithheld(dst []byte, w *WithheldTool) ([]byte, error) {
	dst = canon.AppendString(append(dst, `{"capability":`...), w.Capability)
	dst = canon.AppendString(append(dst, `,"reason":`...), w.Reason)
	return append(dst, '}'), nil
}
