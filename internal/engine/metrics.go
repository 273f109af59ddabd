package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/decisionspec"
	"github.com/contextos/contextos/internal/opmetrics"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// This file records the runtime's operational metrics (internal/opmetrics,
// on Options.MeterProvider) and marks the spans of failed compiles and
// runs. A run's metrics are recorded by the runtime that runs it live;
// the runtimes Runtime.Replay builds record none (the replay itself is
// counted, contextos.replays). With the no-op provider (the default)
// nothing here reads the clock or builds a label.

// otherValue is an attribute value outside its closed set (OpenTelemetry's
// error.type fallback).
const otherValue = "_OTHER"

// unresolvedRef labels a compile whose pack the registry does not hold.
const unresolvedRef = "unresolved"

// labels returns the run's metric labels: its resolved pack refs and its
// intent, which the compile admitted (both bounded).
func (r *run) labels() opmetrics.Labels {
	if r.lab.PackRef == "" {
		refs := make([]string, len(r.inputs))
		for i, in := range r.inputs {
			refs[i] = in.Ref.String()
		}
		r.lab = opmetrics.Labels{PackRef: strings.Join(refs, ","), Intent: r.rc.Intent}
	}
	return r.lab
}

// compileStart reads the clock when a metric will time the compile; the
// zero time otherwise.
func (rt *Runtime) compileStart(ctx context.Context) time.Time {
	if !rt.metrics.Enabled(ctx) {
		return time.Time{}
	}
	return rt.opts.Now()
}

// observeCompile records a run's compile (begun at start) that ended with
// err: its result and latency, and, for a successful first compile of the
// run (first), the tool-surface size, the policy rules evaluated and the
// buckets truncated, so a run that pauses and resumes counts them once.
func (r *run) observeCompile(ctx context.Context, start time.Time, err error, first bool) {
	m := r.rt.metrics
	if !m.Enabled(ctx) {
		return
	}
	d := r.rt.opts.Now().Sub(start)
	if err != nil {
		m.Compile(ctx, r.compileRef(err), errorType(err), d)
		return
	}
	l := r.labels()
	m.Compile(ctx, l.PackRef, "", d)
	if !first {
		return
	}
	ledger := &r.cc.ContextLedger
	m.ToolSurface(ctx, l, len(ledger.Tools))
	for _, pd := range ledger.PolicyResults {
		m.RuleEvaluation(ctx, l, opmetrics.StageCompile, pd.BundleID, pd.RuleID, string(pd.Outcome))
	}
	for _, b := range ledger.Budget.TruncatedBuckets {
		m.BucketTruncation(ctx, l, b)
	}
}

// compileRef is the pack-ref label of a failed compile: the refs resolved,
// then the ref resolution stopped at when the registry holds it (its pack
// was refused: signature, compatibility, state), else "unresolved" — a
// ref the registry does not hold is the caller's text and never a label.
func (r *run) compileRef(err error) string {
	refs := make([]string, 0, len(r.req.ContextPackRefs))
	for _, in := range r.inputs {
		refs = append(refs, in.Ref.String())
	}
	if n := len(refs); n < len(r.req.ContextPackRefs) {
		ref := unresolvedRef
		if registryHeld(err) {
			if p, perr := pack.ParseRef(r.req.ContextPackRefs[n]); perr == nil {
				ref = p.String()
			}
		}
		refs = append(refs, ref)
	}
	return strings.Join(refs, ",")
}

// registryHeld reports a resolution error about a pack the registry
// returned.
func registryHeld(err error) bool {
	for _, target := range []error{pack.ErrSignature, pack.ErrIncompatible, pack.ErrNotUsable, pack.ErrInvalid, pack.ErrImmutable} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// errorTypes maps errors to their error.type, first match wins (an
// *compiler.Error of ErrOverlayVersion matches ErrInput too, so it comes
// first).
var errorTypes = []struct {
	target error
	name   string
}{
	{pack.ErrUnpinnedRef, "pack_unpinned"},
	{pack.ErrNotFound, "pack_not_found"},
	{pack.ErrSignature, "pack_signature"},
	{pack.ErrIncompatible, "pack_incompatible"},
	{pack.ErrNotUsable, "pack_not_usable"},
	{pack.ErrImmutable, "pack_immutable"},
	{pack.ErrOverlay, "pack_overlay"},
	{pack.ErrInvalid, "pack_invalid"},
	{compiler.ErrOverlayVersion, "overlay_version"},
	{compiler.ErrTenant, "tenant_mismatch"},
	{compiler.ErrOntology, "ontology"},
	{compiler.ErrConflict, "run_context_conflict"},
	{compiler.ErrIntent, "intent"},
	{compiler.ErrPolicy, "policy"},
	{compiler.ErrEvidence, "evidence"},
	{compiler.ErrBudget, "budget_exceeded"},
	{runcontext.ErrBudgetExceeded, "budget_exceeded"},
	{compiler.ErrMerge, "pack_merge"},
	{compiler.ErrInput, "compile_input"},
	{runcontext.ErrClaim, "identity_claim"},
	{ErrPanic, "panic"},
	{ErrCheckpointConflict, "checkpoint_conflict"},
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "timeout"},
}

// errorType is err's class for error.type and span statuses: a closed set
// of names (otherValue for the rest), never the error's text.
func errorType(err error) string {
	for _, e := range errorTypes {
		if errors.Is(err, e.target) {
			return e.name
		}
	}
	return otherValue
}

// observeCall records a gateway call's latency and status, a refusal, and
// the policy rules evaluated for the call.
func (r *run) observeCall(ctx context.Context, res *gateway.ToolResultEnvelope) {
	m := r.rt.metrics
	if res == nil || !m.Enabled(ctx) {
		return
	}
	l := r.labels()
	tool := otherValue
	if slices.Contains(r.cc.ContextLedger.Tools, res.CapabilityID) {
		tool = res.CapabilityID
	}
	status := otherValue
	if slices.Contains(gateway.Statuses(), res.Status) {
		status = string(res.Status)
	}
	m.ToolCall(ctx, l, tool, status, time.Duration(res.LatencyMS)*time.Millisecond)
	if res.Status == gateway.StatusBlocked || res.Status == gateway.StatusRejected {
		reason := otherValue
		if res.Error != nil && gateway.ReasonFor(res.Error.Code) != "" {
			reason = gateway.ReasonFor(res.Error.Code)
		}
		m.Refusal(ctx, l, opmetrics.SourceGateway, reason)
	}
	for _, pd := range r.gwRun.CallDecisions(res.ToolCallID) {
		m.RuleEvaluation(ctx, l, opmetrics.StageToolCall, pd.BundleID, pd.RuleID, string(pd.Outcome))
	}
}

// observeGuardrailRefusal records a run a must_refuse guardrail refused.
func (r *run) observeGuardrailRefusal(ctx context.Context) {
	if m := r.rt.metrics; m.Enabled(ctx) {
		m.Refusal(ctx, r.labels(), opmetrics.SourceGuardrail, opmetrics.ReasonMustRefuse)
	}
}

// observeRecord records a run (an Invoke or a Resume) that ended with the
// stored record rec and, for a terminal record, whether each evidence name
// its decision requires was resolved.
func (r *run) observeRecord(ctx context.Context, rec *decision.Record) {
	m := r.rt.metrics
	if !m.Enabled(ctx) {
		return
	}
	l := r.labels()
	m.Run(ctx, l, string(rec.Status))
	if rec.Status == decision.Deferred {
		return
	}
	spec, ok := decisionspec.For(r.prepared.Pack(), rec.DecisionKey)
	if !ok || len(spec.RequiredEvidence) == 0 {
		return
	}
	missing := decision.Unsatisfied(spec, r.facts())
	for _, name := range spec.RequiredEvidence {
		resolved := !slices.ContainsFunc(missing, func(q decision.Requirement) bool { return q.RuleID == "" && q.Name == name })
		m.RequiredEvidence(ctx, l, spec.DecisionKey, name, resolved)
	}
}

// observeReplay records a replay of p that ended with report (nil when it
// could not be replayed).
func (rt *Runtime) observeReplay(ctx context.Context, p *replay.Packet, report *replay.Report) {
	m := rt.metrics
	if !m.Enabled(ctx) {
		return
	}
	status, ref := "error", unresolvedRef
	if report != nil {
		status = string(report.Status)
		if report.Status != replay.Invalid {
			ref = replayRef(p)
		}
	}
	m.Replay(ctx, ref, status)
}

// replayRef is the pack-ref label of a packet Replay re-ran: it resolved
// each of the packet's pack refs in the registry (a ref of a packet it
// refused is the packet's text, never a label).
func replayRef(p *replay.Packet) string {
	refs := make([]string, len(p.PackRefs))
	for i, s := range p.PackRefs {
		r, err := pack.ParseRef(s)
		if err != nil {
			return unresolvedRef
		}
		refs[i] = r.String()
	}
	if len(refs) == 0 {
		return unresolvedRef
	}
	return strings.Join(refs, ",")
}

// failSpan marks span failed with msg, a message of closed-set words
// (never an error's text, which may carry a secret).
func failSpan(span trace.Span, msg string) {
	if !span.IsRecording() {
		return
	}
	span.SetStatus(codes.Error, msg)
	span.RecordError(errors.New(msg))
}
