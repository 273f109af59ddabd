// Package opmetrics defines the runtime's operational metrics (seed 003,
// "Operational metrics") on the OpenTelemetry metric API: one instrument
// per metric, made once per Runtime by New, and one typed method per
// metric to record it.
//
// Names are dot-separated, lowercase, under "contextos."; units are UCUM
// ("s", or a count in braces such as "{run}"). Attribute values are of
// bounded cardinality only: pack refs and ids, intents, rule, bundle,
// bucket, gate-metric and evidence names the packs declare, and closed
// sets of statuses, results and reasons. Nothing personal or per request
// is ever an attribute: no tenant id, subject, request or run id, amount
// or argument value. Callers pass only such values.
//
// Every method first asks its instrument whether it is enabled and returns
// at once when it is not (the no-op provider, or a view that drops it):
// the disabled path builds no attributes and allocates nothing. A nil
// *Metrics records nothing; a Metrics is made by New.
//
// The run engine (internal/engine) records every metric but two: the
// release-gate pass rate (ReleaseGate) and the rollback time (Rollback)
// are recorded by the code that runs the gates and rolls packs back (the
// evaluation package and the pack registry), which the host wires to the
// runtime's Metrics.
package opmetrics

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// ScopeName is the instrumentation scope of the meter.
const ScopeName = "github.com/contextos/contextos"

// Metric names.
const (
	NameCompiles          = "contextos.pack.compiles"
	NameCompileDuration   = "contextos.pack.compile.duration"
	NameToolSurface       = "contextos.compile.tool_surface.size"
	NameRuleEvaluations   = "contextos.policy.rule.evaluations"
	NameBucketTruncations = "contextos.compile.bucket.truncations"
	NameRequiredEvidence  = "contextos.decision.required_evidence"
	NameReplays           = "contextos.replays"
	NameReleaseGates      = "contextos.release_gate.evaluations"
	NameRollbackDuration  = "contextos.pack.rollback.duration"
	NameRuns              = "contextos.runs"
	NameToolCallDuration  = "contextos.tool.call.duration"
	NameRefusals          = "contextos.refusals"
	// The OpenTelemetry GenAI client metrics of a planner's model calls.
	NameGenAITokenUsage        = "gen_ai.client.token.usage"
	NameGenAIOperationDuration = "gen_ai.client.operation.duration"
)

// Attribute keys.
const (
	KeyPackRef          = "contextos.pack.ref"
	KeyPackID           = "contextos.pack.id"
	KeyIntent           = "contextos.intent"
	KeyCompileResult    = "contextos.compile.result"
	KeyErrorType        = "error.type"
	KeyPolicyStage      = "contextos.policy.stage"
	KeyBundleID         = "contextos.policy.bundle.id"
	KeyRuleID           = "contextos.rule.id"
	KeyRuleOutcome      = "contextos.policy.rule.outcome"
	KeyBucket           = "contextos.budget.bucket"
	KeyDecisionKey      = "contextos.decision.key"
	KeyEvidenceName     = "contextos.evidence.name"
	KeyEvidenceResolved = "contextos.evidence.resolved"
	KeyReplayStatus     = "contextos.replay.status"
	KeyGateMetric       = "contextos.release_gate.metric"
	KeyGateResult       = "contextos.release_gate.result"
	KeyEnvironment      = "deployment.environment.name"
	KeyRunStatus        = "contextos.run.status"
	KeyToolName         = "gen_ai.tool.name"
	KeyToolStatus       = "contextos.tool.status"
	KeyRefusalSource    = "contextos.refusal.source"
	KeyRefusalReason    = "contextos.refusal.reason"
	KeyGenAIOperation   = "gen_ai.operation.name"
	KeyGenAIProvider    = "gen_ai.provider.name"
	KeyGenAIModel       = "gen_ai.request.model"
	KeyGenAITokenType   = "gen_ai.token.type"
)

// Attribute values of closed sets.
const (
	ResultSuccess    = "success"
	ResultFailure    = "failure"
	GatePass         = "pass"
	GateFail         = "fail"
	StageCompile     = "compile"
	StageToolCall    = "tool_call"
	SourceGateway    = "gateway"
	SourceGuardrail  = "guardrail"
	ReasonMustRefuse = "guardrail_must_refuse"
	OperationChat    = "chat"
	TokenInput       = "input"
	TokenOutput      = "output"
)

// Explicit bucket boundaries. Durations are in seconds; the boundaries are
// fine where p95 and p99 of a healthy runtime fall.
var (
	// CompileBuckets spans 0.5 ms to 10 s.
	CompileBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 10}
	// ToolCallBuckets spans 1 ms to 60 s (tool calls cross the network).
	ToolCallBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	// RollbackBuckets spans 1 s to 24 h.
	RollbackBuckets = []float64{1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 86400}
	// GenAITokenBuckets and GenAIDurationBuckets are the GenAI
	// conventions' advised boundaries.
	GenAITokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	GenAIDurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	// ToolSurfaceBuckets counts capabilities.
	ToolSurfaceBuckets = []float64{0, 1, 2, 4, 8, 16, 32, 64, 128, 256}
)

// Metrics holds the instruments. Safe for concurrent use.
type Metrics struct {
	compiles          metric.Int64Counter
	compileDuration   metric.Float64Histogram
	toolSurface       metric.Int64Histogram
	ruleEvaluations   metric.Int64Counter
	bucketTruncations metric.Int64Counter
	requiredEvidence  metric.Int64Counter
	replays           metric.Int64Counter
	releaseGates      metric.Int64Counter
	rollbackDuration  metric.Float64Histogram
	runs              metric.Int64Counter
	toolCallDuration  metric.Float64Histogram
	refusals          metric.Int64Counter
	genAITokens       metric.Int64Histogram
	genAIDuration     metric.Float64Histogram
}

// Labels are the run's labels: its pack ref (the refs of a multi-pack
// run joined with ",") and its intent. Both must be values the runtime
// admitted (a resolved pack, an intent the pack serves).
type Labels struct {
	PackRef string
	Intent  string
}

// New makes the instruments on mp's meter for ScopeName. A nil mp records
// nothing (the no-op provider). The error joins the errors of the instruments mp refused; the
// instruments it returned are kept (an SDK returns a working instrument
// with its error).
func New(mp metric.MeterProvider) (*Metrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	meter := mp.Meter(ScopeName)
	m := &Metrics{}
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	m.compiles, err = meter.Int64Counter(NameCompiles, metric.WithUnit("{compile}"),
		metric.WithDescription("Context compiles by pack version and result (success or failure with error.type)."))
	keep(err)
	m.compileDuration, err = meter.Float64Histogram(NameCompileDuration, metric.WithUnit("s"),
		metric.WithDescription("Time to resolve the packs and compile a run's context."), metric.WithExplicitBucketBoundaries(CompileBuckets...))
	keep(err)
	m.toolSurface, err = meter.Int64Histogram(NameToolSurface, metric.WithUnit("{capability}"),
		metric.WithDescription("Capabilities surfaced in a compiled tool manifest, by pack and intent."), metric.WithExplicitBucketBoundaries(ToolSurfaceBuckets...))
	keep(err)
	m.ruleEvaluations, err = meter.Int64Counter(NameRuleEvaluations, metric.WithUnit("{evaluation}"),
		metric.WithDescription("Policy rule evaluations by rule and outcome; allow and deny are activations, not_applicable is not."))
	keep(err)
	m.bucketTruncations, err = meter.Int64Counter(NameBucketTruncations, metric.WithUnit("{truncation}"),
		metric.WithDescription("Compiles that truncated a context budget bucket, by bucket."))
	keep(err)
	m.requiredEvidence, err = meter.Int64Counter(NameRequiredEvidence, metric.WithUnit("{item}"),
		metric.WithDescription("Required evidence of terminal decisions, by whether the run resolved it."))
	keep(err)
	m.replays, err = meter.Int64Counter(NameReplays, metric.WithUnit("{replay}"),
		metric.WithDescription("Replays of captured runs by status; replay_equal over all is the determinism rate."))
	keep(err)
	m.releaseGates, err = meter.Int64Counter(NameReleaseGates, metric.WithUnit("{evaluation}"),
		metric.WithDescription("Release-gate evaluations of a pack version by gate metric and result."))
	keep(err)
	m.rollbackDuration, err = meter.Float64Histogram(NameRollbackDuration, metric.WithUnit("s"),
		metric.WithDescription("Time to roll a pack back to a prior version in an environment."), metric.WithExplicitBucketBoundaries(RollbackBuckets...))
	keep(err)
	m.runs, err = meter.Int64Counter(NameRuns, metric.WithUnit("{run}"),
		metric.WithDescription("Invocations and resumes that ended with a decision record, by record status."))
	keep(err)
	m.toolCallDuration, err = meter.Float64Histogram(NameToolCallDuration, metric.WithUnit("s"),
		metric.WithDescription("Gateway call latency by tool and result status."), metric.WithExplicitBucketBoundaries(ToolCallBuckets...))
	keep(err)
	m.refusals, err = meter.Int64Counter(NameRefusals, metric.WithUnit("{refusal}"),
		metric.WithDescription("Tool calls the gateway refused and runs a must_refuse guardrail refused, by reason."))
	keep(err)
	m.genAITokens, err = meter.Int64Histogram(NameGenAITokenUsage, metric.WithUnit("{token}"),
		metric.WithDescription("Tokens of a planner's model calls, by token type (input, output)."), metric.WithExplicitBucketBoundaries(GenAITokenBuckets...))
	keep(err)
	m.genAIDuration, err = meter.Float64Histogram(NameGenAIOperationDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of a planner's model calls (a planner turn)."), metric.WithExplicitBucketBoundaries(GenAIDurationBuckets...))
	keep(err)
	if m.anyNil() {
		return nil, errors.Join(append(errs, errors.New("opmetrics: the meter provider returned no instrument"))...)
	}
	return m, errors.Join(errs...)
}

// anyNil reports an instrument a provider did not return.
func (m *Metrics) anyNil() bool {
	return m.compiles == nil || m.compileDuration == nil || m.toolSurface == nil || m.ruleEvaluations == nil ||
		m.bucketTruncations == nil || m.requiredEvidence == nil || m.replays == nil || m.releaseGates == nil ||
		m.rollbackDuration == nil || m.runs == nil || m.toolCallDuration == nil || m.refusals == nil || m.genAITokens == nil || m.genAIDuration == nil
}

// Enabled reports whether any instrument records, so a caller can skip
// work (reading the clock, building labels) that only a metric needs.
func (m *Metrics) Enabled(ctx context.Context) bool {
	if m == nil {
		return false
	}
	return m.compiles.Enabled(ctx) || m.compileDuration.Enabled(ctx) || m.toolSurface.Enabled(ctx) || m.ruleEvaluations.Enabled(ctx) ||
		m.bucketTruncations.Enabled(ctx) || m.requiredEvidence.Enabled(ctx) || m.replays.Enabled(ctx) || m.releaseGates.Enabled(ctx) ||
		m.rollbackDuration.Enabled(ctx) || m.runs.Enabled(ctx) || m.toolCallDuration.Enabled(ctx) || m.refusals.Enabled(ctx) ||
		m.GenAIEnabled(ctx)
}

// GenAIEnabled reports whether a GenAI client metric records.
func (m *Metrics) GenAIEnabled(ctx context.Context) bool {
	return m != nil && (m.genAITokens.Enabled(ctx) || m.genAIDuration.Enabled(ctx))
}

// GenAI records a planner's model call (a chat turn) of model from
// provider that took d: its input and output tokens
// (gen_ai.client.token.usage, one point per token type, when the call
// reported usage) and its duration (gen_ai.client.operation.duration,
// with errorType when it failed).
func (m *Metrics) GenAI(ctx context.Context, provider, model, errorType string, usage bool, input, output int, d time.Duration) {
	if m == nil {
		return
	}
	base := []attribute.KeyValue{attribute.String(KeyGenAIOperation, OperationChat), attribute.String(KeyGenAIProvider, provider), attribute.String(KeyGenAIModel, model)}
	if usage && m.genAITokens.Enabled(ctx) {
		m.genAITokens.Record(ctx, int64(input), metric.WithAttributes(append(base, attribute.String(KeyGenAITokenType, TokenInput))...))
		m.genAITokens.Record(ctx, int64(output), metric.WithAttributes(append(base, attribute.String(KeyGenAITokenType, TokenOutput))...))
	}
	if m.genAIDuration.Enabled(ctx) {
		if errorType != "" {
			base = append(base, attribute.String(KeyErrorType, errorType))
		}
		m.genAIDuration.Record(ctx, d.Seconds(), metric.WithAttributes(base...))
	}
}

// Compile records a compile of packRef: errorType is "" for a success,
// else the failure's class (error.type, from a closed set). d is the
// compile's duration.
func (m *Metrics) Compile(ctx context.Context, packRef, errorType string, d time.Duration) {
	if m == nil {
		return
	}
	result := ResultSuccess
	if errorType != "" {
		result = ResultFailure
	}
	if m.compiles.Enabled(ctx) {
		if errorType != "" {
			m.compiles.Add(ctx, 1, metric.WithAttributes(attribute.String(KeyPackRef, packRef), attribute.String(KeyCompileResult, result),
				attribute.String(KeyErrorType, errorType)))
		} else {
			m.compiles.Add(ctx, 1, metric.WithAttributes(attribute.String(KeyPackRef, packRef), attribute.String(KeyCompileResult, result)))
		}
	}
	if m.compileDuration.Enabled(ctx) {
		m.compileDuration.Record(ctx, d.Seconds(), metric.WithAttributes(attribute.String(KeyPackRef, packRef), attribute.String(KeyCompileResult, result)))
	}
}

// ToolSurface records the size of a compiled tool manifest (capabilities
// surfaced).
func (m *Metrics) ToolSurface(ctx context.Context, l Labels, capabilities int) {
	if m == nil || !m.toolSurface.Enabled(ctx) {
		return
	}
	m.toolSurface.Record(ctx, int64(capabilities), metric.WithAttributes(attribute.String(KeyPackRef, l.PackRef), attribute.String(KeyIntent, l.Intent)))
}

// RuleEvaluation records one evaluation of a policy rule at stage
// (StageCompile or StageToolCall) with its outcome (allow, deny,
// not_applicable).
func (m *Metrics) RuleEvaluation(ctx context.Context, l Labels, stage, bundleID, ruleID, outcome string) {
	if m == nil || !m.ruleEvaluations.Enabled(ctx) {
		return
	}
	m.ruleEvaluations.Add(ctx, 1, metric.WithAttributes(attribute.String(KeyPackRef, l.PackRef), attribute.String(KeyIntent, l.Intent),
		attribute.String(KeyPolicyStage, stage), attribute.String(KeyBundleID, bundleID), attribute.String(KeyRuleID, ruleID),
		attribute.String(KeyRuleOutcome, outcome)))
}

// BucketTruncation records a compile that truncated bucket.
func (m *Metrics) BucketTruncation(ctx context.Context, l Labels, bucket string) {
	if m == nil || !m.bucketTruncations.Enabled(ctx) {
		return
	}
	m.bucketTruncations.Add(ctx, 1, metric.WithAttributes(attribute.String(KeyPackRef, l.PackRef), attribute.String(KeyIntent, l.Intent),
		attribute.String(KeyBucket, bucket)))
}

// RequiredEvidence records one required-evidence name of a terminal
// decision of decisionKey and whether the run resolved it.
func (m *Metrics) RequiredEvidence(ctx context.Context, l Labels, decisionKey, name string, resolved bool) {
	if m == nil || !m.requiredEvidence.Enabled(ctx) {
		return
	}
	m.requiredEvidence.Add(ctx, 1, metric.WithAttributes(attribute.String(KeyPackRef, l.PackRef), attribute.String(KeyIntent, l.Intent),
		attribute.String(KeyDecisionKey, decisionKey), attribute.String(KeyEvidenceName, name), attribute.Bool(KeyEvidenceResolved, resolved)))
}

// Replay records a replay of a packet of packRef ending with status
// (replay_equal, replay_mismatch, invalid, or error when it could not be
// replayed).
func (m *Metrics) Replay(ctx context.Context, packRef, status string) {
	if m == nil || !m.replays.Enabled(ctx) {
		return
	}
	m.replays.Add(ctx, 1, metric.WithAttributes(attribute.String(KeyPackRef, packRef), attribute.String(KeyReplayStatus, status)))
}

// ReleaseGate records one release gate (gateMetric: the gate's metric
// name, as the pack's evaluation_layer.release_gates declares it) of
// packRef, passed or not. The code that evaluates release gates calls it.
func (m *Metrics) ReleaseGate(ctx context.Context, packRef, gateMetric string, passed bool) {
	if m == nil || !m.releaseGates.Enabled(ctx) {
		return
	}
	result := GateFail
	if passed {
		result = GatePass
	}
	m.releaseGates.Add(ctx, 1, metric.WithAttributes(attribute.String(KeyPackRef, packRef), attribute.String(KeyGateMetric, gateMetric),
		attribute.String(KeyGateResult, result)))
}

// Rollback records that rolling pack packID back in environment env took
// d. The pack registry's rollback calls it.
func (m *Metrics) Rollback(ctx context.Context, packID, env string, d time.Duration) {
	if m == nil || !m.rollbackDuration.Enabled(ctx) {
		return
	}
	m.rollbackDuration.Record(ctx, d.Seconds(), metric.WithAttributes(attribute.String(KeyPackID, packID), attribute.String(KeyEnvironment, env)))
}

// Run records a run (an Invoke or a Resume) that ended with a record of
// status (DECIDED, DEFERRED, REJECTED, ESCALATED).
func (m *Metrics) Run(ctx context.Context, l Labels, status string) {
	if m == nil || !m.runs.Enabled(ctx) {
		return
	}
	m.runs.Add(ctx, 1, metric.WithAttributes(attribute.String(KeyPackRef, l.PackRef), attribute.String(KeyIntent, l.Intent),
		attribute.String(KeyRunStatus, status)))
}

// ToolCall records a gateway call of tool (a capability the run surfaced,
// or "other") that ended with status after d.
func (m *Metrics) ToolCall(ctx context.Context, l Labels, tool, status string, d time.Duration) {
	if m == nil || !m.toolCallDuration.Enabled(ctx) {
		return
	}
	m.toolCallDuration.Record(ctx, d.Seconds(), metric.WithAttributes(attribute.String(KeyPackRef, l.PackRef), attribute.String(KeyIntent, l.Intent),
		attribute.String(KeyToolName, tool), attribute.String(KeyToolStatus, status)))
}

// Refusal records a refusal: by the gateway (SourceGateway, reason: the
// Tool Contract reason of its code) or by a must_refuse guardrail
// (SourceGuardrail, ReasonMustRefuse).
func (m *Metrics) Refusal(ctx context.Context, l Labels, source, reason string) {
	if m == nil || !m.refusals.Enabled(ctx) {
		return
	}
	m.refusals.Add(ctx, 1, metric.WithAttributes(attribute.String(KeyPackRef, l.PackRef), attribute.String(KeyIntent, l.Intent),
		attribute.String(KeyRefusalSource, source), attribute.String(KeyRefusalReason, reason)))
}
