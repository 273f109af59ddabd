package runcontext

import (
	"encoding/json"
	"errors"
	"github.com/contextos/contextos/internal/problem"
	"github.com/contextos/contextos/internal/requestid"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/internal/fixture"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	return fixture.Read(t, name)
}

func fixtureRequest(t testing.TB) *InvokeRequest {
	t.Helper()
	r, err := DecodeInvokeRequest(readFixture(t, "invoke.support-refund.json"))
	if err != nil {
		t.Fatalf("seed invocation does not validate: %v", err)
	}
	return r
}

func fixtureRunContext(t testing.TB) *RunContext {
	t.Helper()
	rc, err := DecodeRunContext(readFixture(t, "run-context.support.json"))
	if err != nil {
		t.Fatalf("seed run context does not validate: %v", err)
	}
	return rc
}

func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v is not a *ValidationError", err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("error %v does not match ErrInvalid", err)
	}
	return ve.Problems
}

func hasProblem(ps []Problem, path string, rule Code) bool {
	for _, p := range ps {
		if p.Path == path && p.Code == rule {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }

func TestSeedFixturesValidate(t *testing.T) {
	r := fixtureRequest(t)
	if r.RequestID != "req_9f3a12" || r.Input.Context["refund_amount"] != 4200.0 || r.User.Delegation.TokenRef != "tok_user_7a" {
		t.Errorf("fixture decoded wrongly: %+v", r)
	}
	rc := fixtureRunContext(t)
	if rc.SafetyMode != Destructive || rc.RunBudget.BucketTokens[BucketEvidence] != 400 {
		t.Errorf("fixture run context decoded wrongly: %+v", rc)
	}
}

// Every rule of InvokeRequest validation, each with the failing mutation and
// the passing variant.
func TestInvokeRequestRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		bad, good func(r *InvokeRequest)
		path      string
		rule      Code
	}{
		{"request_id required", func(r *InvokeRequest) { r.RequestID = "" }, func(r *InvokeRequest) { r.RequestID = "req_1" }, "request_id", CodeRequired},
		{"request_id charset", func(r *InvokeRequest) { r.RequestID = "req_ bad" }, func(r *InvokeRequest) { r.RequestID = "req_good-1" }, "request_id", CodeFormat},
		{"request_id length", func(r *InvokeRequest) { r.RequestID = "req_" + strings.Repeat("a", 300) }, func(r *InvokeRequest) { r.RequestID = "req_" + strings.Repeat("a", 120) }, "request_id", CodeFormat},
		{"tenant_id required", func(r *InvokeRequest) { r.TenantID = "" }, func(r *InvokeRequest) {}, "tenant_id", CodeRequired},
		{"session_id format", func(r *InvokeRequest) { r.SessionID = "sess 1" }, func(r *InvokeRequest) { r.SessionID = "" }, "session_id", CodeFormat},
		{"user_id required", func(r *InvokeRequest) { r.User.UserID = "" }, func(r *InvokeRequest) {}, "user.user_id", CodeRequired},
		{"tenure_days ≥ 0", func(r *InvokeRequest) { r.User.TenureDays = ptr(-1) }, func(r *InvokeRequest) { r.User.TenureDays = ptr(0) }, "user.tenure_days", CodeRange},
		{"delegation auth_type enum", func(r *InvokeRequest) { r.User.Delegation.AuthType = "kerberos" }, func(r *InvokeRequest) { r.User.Delegation.AuthType = AuthOIDC }, "user.delegation.auth_type", CodeEnum},
		{"delegation auth_type required", func(r *InvokeRequest) { r.User.Delegation.AuthType = "" }, func(r *InvokeRequest) { r.User.Delegation.AuthType = AuthSAML }, "user.delegation.auth_type", CodeRequired},
		{"delegation subject", func(r *InvokeRequest) { r.User.Delegation.Subject = " " }, func(r *InvokeRequest) {}, "user.delegation.subject", CodeRequired},
		{"delegation scopes required", func(r *InvokeRequest) { r.User.Delegation.Scopes = nil }, func(r *InvokeRequest) { r.User.Delegation.Scopes = []string{} }, "user.delegation.scopes", CodeRequired},
		{"delegation empty scope", func(r *InvokeRequest) { r.User.Delegation.Scopes = []string{"a", ""} }, func(r *InvokeRequest) {}, "user.delegation.scopes[1]", CodeFormat},
		{"agent_urn required", func(r *InvokeRequest) { r.Agent.AgentURN = "" }, func(r *InvokeRequest) {}, "agent.agent_urn", CodeRequired},
		{"agent_urn form", func(r *InvokeRequest) { r.Agent.AgentURN = "agent:contextos/support-refund" }, func(r *InvokeRequest) { r.Agent.AgentURN = "agent:acme.support/refund_bot@2.0.0-rc.1" }, "agent.agent_urn", CodeFormat},
		{"agent_urn semver", func(r *InvokeRequest) { r.Agent.AgentURN = "agent:contextos/support-refund@1.2" }, func(r *InvokeRequest) {}, "agent.agent_urn", CodeFormat},
		{"agent_urn uppercase", func(r *InvokeRequest) { r.Agent.AgentURN = "agent:ContextOS/x@1.0.0" }, func(r *InvokeRequest) {}, "agent.agent_urn", CodeFormat},
		{"workload_identity required", func(r *InvokeRequest) { r.Agent.WorkloadIdentity = "" }, func(r *InvokeRequest) {}, "agent.workload_identity", CodeRequired},
		{"workload_identity scheme", func(r *InvokeRequest) { r.Agent.WorkloadIdentity = "https://contextos/agents/support" }, func(r *InvokeRequest) { r.Agent.WorkloadIdentity = "spiffe://acme.prod/ns/agents/sa/support" }, "agent.workload_identity", CodeFormat},
		{"workload_identity no path", func(r *InvokeRequest) { r.Agent.WorkloadIdentity = "spiffe://contextos" }, func(r *InvokeRequest) {}, "agent.workload_identity", CodeFormat},
		{"workload_identity port", func(r *InvokeRequest) { r.Agent.WorkloadIdentity = "spiffe://contextos:8443/a" }, func(r *InvokeRequest) {}, "agent.workload_identity", CodeFormat},
		{"workload_identity userinfo", func(r *InvokeRequest) { r.Agent.WorkloadIdentity = "spiffe://u:p@contextos/a" }, func(r *InvokeRequest) {}, "agent.workload_identity", CodeFormat},
		{"workload_identity uppercase domain", func(r *InvokeRequest) { r.Agent.WorkloadIdentity = "spiffe://ContextOS/a" }, func(r *InvokeRequest) {}, "agent.workload_identity", CodeFormat},
		{"workload_identity dot segment", func(r *InvokeRequest) { r.Agent.WorkloadIdentity = "spiffe://contextos/a/../b" }, func(r *InvokeRequest) {}, "agent.workload_identity", CodeFormat},
		{"lifecycle enum", func(r *InvokeRequest) { r.Agent.Lifecycle = "paused" }, func(r *InvokeRequest) { r.Agent.Lifecycle = LifecycleActive }, "agent.lifecycle", CodeEnum},
		{"lifecycle active only", func(r *InvokeRequest) { r.Agent.Lifecycle = LifecycleSuspended }, func(r *InvokeRequest) { r.Agent.Lifecycle = LifecycleActive }, "agent.lifecycle", CodeConsistent},
		{"principal kind enum", func(r *InvokeRequest) {
			r.Agent.PrincipalChain = []Principal{{Kind: "robot", ID: "x"}}
		}, func(r *InvokeRequest) { r.Agent.PrincipalChain = []Principal{{Kind: PrincipalAutomation, ID: "x"}} }, "agent.principal_chain[0].kind", CodeEnum},
		{"principal id required", func(r *InvokeRequest) {
			r.Agent.PrincipalChain = []Principal{{Kind: PrincipalUser}}
		}, func(r *InvokeRequest) { r.Agent.PrincipalChain = []Principal{{Kind: PrincipalUser, ID: "usr_771"}} }, "agent.principal_chain[0].id", CodeRequired},
		{"principal chain tenant", func(r *InvokeRequest) {
			r.Agent.PrincipalChain = []Principal{{Kind: PrincipalUser, ID: "u", TenantID: "tenant_acme_prod"}, {Kind: PrincipalAgent, ID: "a", TenantID: "tenant_other"}}
		}, func(r *InvokeRequest) {
			r.Agent.PrincipalChain = []Principal{{Kind: PrincipalUser, ID: "u", TenantID: "tenant_acme_prod"}, {Kind: PrincipalAgent, ID: "a"}}
		}, "agent.principal_chain[1].tenant_id", CodeConsistent},
		{"pack refs at least one", func(r *InvokeRequest) { r.ContextPackRefs = nil }, func(r *InvokeRequest) {}, "context_pack_refs", CodeRequired},
		{"pack ref unpinned", func(r *InvokeRequest) { r.ContextPackRefs = []string{"ctxpack.support"} }, func(r *InvokeRequest) {}, "context_pack_refs[0]", CodeFormat},
		{"pack ref latest", func(r *InvokeRequest) { r.ContextPackRefs = []string{"ctxpack.support@latest"} }, func(r *InvokeRequest) {}, "context_pack_refs[0]", CodeFormat},
		{"pack ref range", func(r *InvokeRequest) { r.ContextPackRefs = []string{"ctxpack.support@^1.0.0"} }, func(r *InvokeRequest) {}, "context_pack_refs[0]", CodeFormat},
		{"pack ref build metadata", func(r *InvokeRequest) { r.ContextPackRefs = []string{"a@1.0.0", "b@1.0.0+build"} }, func(r *InvokeRequest) { r.ContextPackRefs = []string{"a@1.0.0", "b@1.0.0"} }, "context_pack_refs[1]", CodeFormat},
		{"pack ref duplicate pack", func(r *InvokeRequest) { r.ContextPackRefs = []string{"a@1.0.0", "a@1.0.1"} }, func(r *InvokeRequest) { r.ContextPackRefs = []string{"a@1.0.0", "decision-catalog.support@2.1.0"} }, "context_pack_refs[1]", CodeConsistent},
		{"intent required", func(r *InvokeRequest) { r.Input.Intent = "" }, func(r *InvokeRequest) {}, "input.intent", CodeRequired},
		{"message required", func(r *InvokeRequest) { r.Input.Message = "" }, func(r *InvokeRequest) {}, "input.message", CodeRequired},
		{"mode required", func(r *InvokeRequest) { r.Mode = "" }, func(r *InvokeRequest) { r.Mode = ModeStream }, "mode", CodeRequired},
		{"mode enum", func(r *InvokeRequest) { r.Mode = "interactive" }, func(r *InvokeRequest) { r.Mode = ModeLongRunning }, "mode", CodeEnum},
		{"plan timeout > 0", func(r *InvokeRequest) { r.Runtime.PlanTimeoutMS = ptr[int64](0) }, func(r *InvokeRequest) { r.Runtime.PlanTimeoutMS = ptr[int64](5000) }, "runtime.plan_timeout_ms", CodeRange},
		{"max tool calls ≥ 0", func(r *InvokeRequest) { r.Runtime.MaxToolCalls = ptr(-1) }, func(r *InvokeRequest) { r.Runtime.MaxToolCalls = ptr(0) }, "runtime.max_tool_calls", CodeRange},
		{"max cost finite", func(r *InvokeRequest) { r.Runtime.MaxCostCents = ptr(-0.5) }, func(r *InvokeRequest) { r.Runtime.MaxCostCents = ptr(0.0) }, "runtime.max_cost_cents", CodeRange},
		{"bucket name", func(r *InvokeRequest) { r.Runtime.BucketTokens = map[Bucket]int{"evidense": 10} }, func(r *InvokeRequest) { r.Runtime.BucketTokens = map[Bucket]int{BucketEvidence: 10} }, "runtime.bucket_tokens.evidense", CodeEnum},
		{"attachment sha256 required", func(r *InvokeRequest) {
			r.Attachments = []Attachment{{ArtifactID: "art_1", MediaType: "application/pdf", URI: "s3://b/k.pdf"}}
		}, func(r *InvokeRequest) {
			r.Attachments = []Attachment{{ArtifactID: "art_1", MediaType: "application/pdf", URI: "s3://b/k.pdf", SHA256: strings.Repeat("2f", 32)}}
		}, "attachments[0].sha256", CodeRequired},
		{"attachment sha256 format", func(r *InvokeRequest) {
			r.Attachments = []Attachment{{ArtifactID: "art_1", MediaType: "application/pdf", URI: "s3://b/k.pdf", SHA256: "2f9cc0..."}}
		}, func(r *InvokeRequest) {
			r.Attachments = []Attachment{{ArtifactID: "art_1", MediaType: "application/pdf", URI: "s3://b/k.pdf", SHA256: "sha256:" + strings.Repeat("2f", 32)}}
		}, "attachments[0].sha256", CodeFormat},
		{"attachment media type required", func(r *InvokeRequest) {
			r.Attachments = []Attachment{{ArtifactID: "art_1", URI: "s3://b/k.pdf", SHA256: strings.Repeat("2f", 32)}}
		}, func(r *InvokeRequest) {
			r.Attachments = []Attachment{{ArtifactID: "art_1", MediaType: "text/plain; charset=utf-8", URI: "s3://b/k.pdf", SHA256: strings.Repeat("2f", 32)}}
		}, "attachments[0].media_type", CodeRequired},
		{"attachment media type format", func(r *InvokeRequest) {
			r.Attachments = []Attachment{{ArtifactID: "art_1", MediaType: "pdf", URI: "s3://b/k.pdf", SHA256: strings.Repeat("2f", 32)}}
		}, func(r *InvokeRequest) {}, "attachments[0].media_type", CodeFormat},
		{"attachment uri credentials", func(r *InvokeRequest) {
			r.Attachments = []Attachment{{ArtifactID: "art_1", MediaType: "application/pdf", URI: "https://user:hunter2@files/x", SHA256: strings.Repeat("2f", 32)}}
		}, func(r *InvokeRequest) {}, "attachments[0].uri", CodeFormat},
		{"trace id required", func(r *InvokeRequest) { r.Trace.TraceID = "" }, func(r *InvokeRequest) {}, "trace.trace_id", CodeRequired},
		{"trace id hex", func(r *InvokeRequest) { r.Trace.TraceID = strings.ToUpper(r.Trace.TraceID) }, func(r *InvokeRequest) {}, "trace.trace_id", CodeFormat},
		{"trace id zero", func(r *InvokeRequest) { r.Trace.TraceID = strings.Repeat("0", 32) }, func(r *InvokeRequest) {}, "trace.trace_id", CodeFormat},
		{"span id length", func(r *InvokeRequest) { r.Trace.SpanID = "00f067aa0ba902b" }, func(r *InvokeRequest) {}, "trace.span_id", CodeFormat},
		{"span id zero", func(r *InvokeRequest) { r.Trace.SpanID = strings.Repeat("0", 16) }, func(r *InvokeRequest) {}, "trace.span_id", CodeFormat},
		{"span id required", func(r *InvokeRequest) { r.Trace.SpanID = "" }, func(r *InvokeRequest) {}, "trace.span_id", CodeRequired},
		{"trace flags", func(r *InvokeRequest) { r.Trace.TraceFlags = "1" }, func(r *InvokeRequest) { r.Trace.TraceFlags = "00" }, "trace.trace_flags", CodeFormat},
		{"tracestate", func(r *InvokeRequest) { r.Trace.TraceState = "not a tracestate" }, func(r *InvokeRequest) { r.Trace.TraceState = "tenant=tenant_acme_prod" }, "trace.tracestate", CodeFormat},
		{"baggage", func(r *InvokeRequest) { r.Trace.Baggage = "=novalue;;" }, func(r *InvokeRequest) { r.Trace.Baggage = "session_id=sess_42f1" }, "trace.baggage", CodeFormat},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := fixtureRequest(t)
			tc.bad(r)
			ps := problemsOf(t, r.Validate())
			if !hasProblem(ps, tc.path, tc.rule) {
				t.Errorf("Validate() problems = %v, want one at %s (%s)", ps, tc.path, tc.rule)
			}
			r = fixtureRequest(t)
			tc.good(r)
			if err := r.Validate(); err != nil {
				t.Errorf("passing variant: Validate() = %v, want nil", err)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	r := fixtureRequest(t)
	r.RequestID = ""
	r.Mode = "x"
	r.ContextPackRefs = []string{"a", "b@1"}
	r.Trace.SpanID = ""
	ps := problemsOf(t, r.Validate())
	want := []string{"request_id", "context_pack_refs[0]", "context_pack_refs[1]", "mode", "trace.span_id"}
	var got []string
	for _, p := range ps {
		got = append(got, p.Path)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problem paths (-want +got):\n%s", diff)
	}
	var nilReq *InvokeRequest
	if err := nilReq.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil request: %v", err)
	}
	var nilRC *RunContext
	if err := nilRC.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil run context: %v", err)
	}
}

func TestRunContextRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		bad, good func(rc *RunContext)
		path      string
		rule      Code
	}{
		{"run_id required", func(rc *RunContext) { rc.RunID = "" }, func(rc *RunContext) {}, "run_id", CodeRequired},
		{"run_id prefix", func(rc *RunContext) { rc.RunID = "a1b2" }, func(rc *RunContext) { rc.RunID = "run_a1b2" }, "run_id", CodeFormat},
		{"trace_id required", func(rc *RunContext) { rc.TraceID = "" }, func(rc *RunContext) {}, "trace_id", CodeRequired},
		{"trace_id zero", func(rc *RunContext) { rc.TraceID = strings.Repeat("0", 32) }, func(rc *RunContext) {}, "trace_id", CodeFormat},
		{"tenant required", func(rc *RunContext) { rc.TenantID = "" }, func(rc *RunContext) {}, "tenant_id", CodeRequired},
		{"safety_mode required", func(rc *RunContext) { rc.SafetyMode = "" }, func(rc *RunContext) { rc.SafetyMode = ReadOnly }, "safety_mode", CodeRequired},
		{"safety_mode enum", func(rc *RunContext) { rc.SafetyMode = "root" }, func(rc *RunContext) { rc.SafetyMode = Network }, "safety_mode", CodeEnum},
		{"delegation for destructive", func(rc *RunContext) { rc.User.Delegation = nil }, func(rc *RunContext) { rc.User.Delegation = nil; rc.SafetyMode = Network }, "user.delegation", CodeRequired},
		{"delegation for delegated", func(rc *RunContext) { rc.User.Delegation = nil; rc.SafetyMode = Delegated }, func(rc *RunContext) { rc.SafetyMode = Delegated }, "user.delegation", CodeRequired},
		{"total tokens", func(rc *RunContext) { rc.RunBudget.TotalTokens = 0 }, func(rc *RunContext) {}, "run_budget.total_tokens", CodeRange},
		{"buckets within total", func(rc *RunContext) { rc.RunBudget.TotalTokens = 5000 }, func(rc *RunContext) { rc.RunBudget.TotalTokens = 8900 }, "run_budget.bucket_tokens", CodeConsistent},
		{"bucket negative", func(rc *RunContext) { rc.RunBudget.BucketTokens[BucketMemory] = -1 }, func(rc *RunContext) { rc.RunBudget.BucketTokens[BucketMemory] = 0 }, "run_budget.bucket_tokens.memory", CodeRange},
		{"wall clock", func(rc *RunContext) { rc.RunBudget.WallClockMS = 0 }, func(rc *RunContext) {}, "run_budget.wall_clock_ms", CodeRange},
		{"replans", func(rc *RunContext) { rc.RunBudget.MaxReplanAttempts = -1 }, func(rc *RunContext) { rc.RunBudget.MaxReplanAttempts = 0 }, "run_budget.max_replan_attempts", CodeRange},
		{"tool calls", func(rc *RunContext) { rc.RunBudget.MaxToolCalls = -1 }, func(rc *RunContext) { rc.RunBudget.MaxToolCalls = 0 }, "run_budget.max_tool_calls", CodeRange},
		{"cost", func(rc *RunContext) { rc.RunBudget.MaxCostCents = -1 }, func(rc *RunContext) {}, "run_budget.max_cost_cents", CodeRange},
		{"payload", func(rc *RunContext) { rc.RunBudget.MaxPayloadBytes = -1 }, func(rc *RunContext) { rc.RunBudget.MaxPayloadBytes = 10 }, "run_budget.max_payload_bytes", CodeRange},
		// Numbers beyond 2^53−1 have no exact canonical form: named where they enter.
		{"total tokens beyond 2^53−1", func(rc *RunContext) { rc.RunBudget.TotalTokens = math.MaxInt }, func(rc *RunContext) { rc.RunBudget.TotalTokens = 1<<53 - 1 }, "run_budget.total_tokens", CodeRange},
		{"bucket beyond 2^53−1", func(rc *RunContext) { rc.RunBudget.BucketTokens[BucketMemory] = 1 << 53 }, func(rc *RunContext) {}, "run_budget.bucket_tokens.memory", CodeRange},
		{"wall clock beyond 2^53−1", func(rc *RunContext) { rc.RunBudget.WallClockMS = math.MaxInt64 }, func(rc *RunContext) {}, "run_budget.wall_clock_ms", CodeRange},
		{"tool calls beyond 2^53−1", func(rc *RunContext) { rc.RunBudget.MaxToolCalls = 1 << 53 }, func(rc *RunContext) {}, "run_budget.max_tool_calls", CodeRange},
		{"replans beyond 2^53−1", func(rc *RunContext) { rc.RunBudget.MaxReplanAttempts = 1 << 53 }, func(rc *RunContext) {}, "run_budget.max_replan_attempts", CodeRange},
		{"cost beyond 2^53−1", func(rc *RunContext) { rc.RunBudget.MaxCostCents = 1e300 }, func(rc *RunContext) { rc.RunBudget.MaxCostCents = 1<<53 - 1 }, "run_budget.max_cost_cents", CodeRange},
		{"payload beyond 2^53−1", func(rc *RunContext) { rc.RunBudget.MaxPayloadBytes = math.MaxInt64 }, func(rc *RunContext) {}, "run_budget.max_payload_bytes", CodeRange},
		{"plan timeout beyond 2^53−1", func(rc *RunContext) { rc.RunBudget.PlanTimeoutMS = 1 << 53 }, func(rc *RunContext) {}, "run_budget.plan_timeout_ms", CodeRange},
		{"claim exp beyond 2^53−1", func(rc *RunContext) { c := validClaim(rc); c.Exp = math.MaxInt64; rc.Agent.IdentityClaim = c }, func(rc *RunContext) {}, "agent.identity_claim.exp", CodeRange},
		{"chain tenant", func(rc *RunContext) { rc.Agent.PrincipalChain[0].TenantID = "tenant_x" }, func(rc *RunContext) {}, "agent.principal_chain[0].tenant_id", CodeConsistent},
		{"trace context parent", func(rc *RunContext) { rc.TraceContext = &TraceContext{TraceParent: "00-xyz"} }, func(rc *RunContext) {
			rc.TraceContext = &TraceContext{TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-b9c7c989f97918e1-01"}
		}, "trace_context.traceparent", CodeFormat},
		{"trace context consistency", func(rc *RunContext) {
			rc.TraceContext = &TraceContext{TraceParent: "00-5bf92f3577b34da6a3ce929d0e0e4736-b9c7c989f97918e1-01"}
		}, func(rc *RunContext) {}, "trace_context.traceparent", CodeConsistent},
		{"claim shape", func(rc *RunContext) { rc.Agent.IdentityClaim = &IdentityClaim{Version: "ctxid/2"} }, func(rc *RunContext) { rc.Agent.IdentityClaim = validClaim(rc) }, "agent.identity_claim.version", CodeEnum},
		{"claim sub", func(rc *RunContext) {
			c := validClaim(rc)
			c.Sub = "agent:contextos/other@1.0.0"
			rc.Agent.IdentityClaim = c
		}, func(rc *RunContext) { rc.Agent.IdentityClaim = validClaim(rc) }, "agent.identity_claim.sub", CodeConsistent},
		{"claim run", func(rc *RunContext) { c := validClaim(rc); c.RunID = "run_other"; rc.Agent.IdentityClaim = c }, func(rc *RunContext) { rc.Agent.IdentityClaim = validClaim(rc) }, "agent.identity_claim.run_id", CodeConsistent},
		{"claim tenant", func(rc *RunContext) { c := validClaim(rc); c.TenantID = "tenant_x"; rc.Agent.IdentityClaim = c }, func(rc *RunContext) {}, "agent.identity_claim.tenant_id", CodeConsistent},
		{"claim exp", func(rc *RunContext) { c := validClaim(rc); c.Exp = c.Nbf; rc.Agent.IdentityClaim = c }, func(rc *RunContext) {}, "agent.identity_claim.exp", CodeRange},
		{"claim hash", func(rc *RunContext) { c := validClaim(rc); c.ClaimHash = "sha256:..."; rc.Agent.IdentityClaim = c }, func(rc *RunContext) {}, "agent.identity_claim.claim_hash", CodeFormat},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rc := fixtureRunContext(t)
			tc.bad(rc)
			ps := problemsOf(t, rc.Validate())
			if !hasProblem(ps, tc.path, tc.rule) {
				t.Errorf("Validate() problems = %v, want one at %s (%s)", ps, tc.path, tc.rule)
			}
			rc = fixtureRunContext(t)
			tc.good(rc)
			if err := rc.Validate(); err != nil {
				t.Errorf("passing variant: Validate() = %v, want nil", err)
			}
		})
	}
}

func TestStrictDecoding(t *testing.T) {
	t.Parallel()
	base := readFixture(t, "invoke.support-refund.json")
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(base, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	tests := []struct {
		name string
		doc  []byte
		path string
	}{
		{"case-variant key", edit(func(m map[string]any) { m["Tenant_ID"] = m["tenant_id"]; delete(m, "tenant_id") }), "Tenant_ID"},
		{"misspelled required field", edit(func(m map[string]any) { m["tenant"] = m["tenant_id"]; delete(m, "tenant_id") }), "tenant_id"},
		{"unknown member of closed trace", edit(func(m map[string]any) { m["trace"].(map[string]any)["parent"] = "x" }), "trace.parent"},
		{"misspelled budget hint", edit(func(m map[string]any) { m["runtime"].(map[string]any)["max_tool_cals"] = 100 }), "runtime.max_tool_cals"},
		{"unknown principal kind", edit(func(m map[string]any) {
			m["agent"].(map[string]any)["principal_chain"] = []any{map[string]any{"kind": "robot", "id": "x"}}
		}), "agent.principal_chain[0].kind"},
		{"wrong type", edit(func(m map[string]any) { m["context_pack_refs"] = "ctxpack.support@1.0.0" }), "context_pack_refs"},
		{"wrong nested type", edit(func(m map[string]any) { m["runtime"].(map[string]any)["max_tool_calls"] = "8" }), "runtime.max_tool_calls"},
		{"not json", []byte(`{"request_id":`), ""},
		{"trailing data", append(append([]byte{}, base...), []byte(` {}`)...), ""},
		{"empty", []byte(``), ""},
		{"array", []byte(`[]`), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := DecodeInvokeRequest(tc.doc)
			ps := problemsOf(t, err)
			found := false
			for _, p := range ps {
				if p.Path == tc.path {
					found = true
				}
			}
			if !found {
				t.Errorf("DecodeInvokeRequest problems = %v, want one at %q", ps, tc.path)
			}
		})
	}
	// Additive members are accepted and kept; open user claims reach Claims.
	doc := edit(func(m map[string]any) {
		m["x_host_extension"] = map[string]any{"k": 1}
		m["user"].(map[string]any)["tier"] = "gold"
	})
	r, err := DecodeInvokeRequest(doc)
	if err != nil {
		t.Fatalf("additive members refused: %v", err)
	}
	if string(r.Extensions["x_host_extension"]) != `{"k":1}` || string(r.User.Claims["tier"]) != `"gold"` {
		t.Errorf("extensions not kept: %v %v", r.Extensions, r.User.Claims)
	}
	out, _ := json.Marshal(r)
	if !strings.Contains(string(out), `"x_host_extension":{"k":1}`) || !strings.Contains(string(out), `"tier":"gold"`) {
		t.Errorf("extensions not written back: %s", out)
	}
}

// Round trip: decoding and re-encoding the seed documents loses nothing.
func TestRoundTrip(t *testing.T) {
	for _, name := range []string{"invoke.support-refund.json", "run-context.support.json"} {
		raw := readFixture(t, name)
		var v any
		if strings.HasPrefix(name, "invoke") {
			r, err := DecodeInvokeRequest(raw)
			if err != nil {
				t.Fatal(err)
			}
			v = r
		} else {
			rc, err := DecodeRunContext(raw)
			if err != nil {
				t.Fatal(err)
			}
			v = rc
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		json.Unmarshal(raw, &a)
		json.Unmarshal(out, &b)
		// The seed writes "metadata": {} which omitempty drops; nothing else may differ.
		if m, ok := a.(map[string]any); ok {
			if md, ok := m["metadata"].(map[string]any); ok && len(md) == 0 {
				delete(m, "metadata")
			}
		}
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("%s round trip (-in +out):\n%s", name, diff)
		}
	}
}

// request_id is "globally unique" (seed 000): any unique id is accepted —
// prefixed or not, a UUID, a ULID — and anything outside the safe charset
// or length is refused with a problem naming request_id.
func TestRequestIDAcceptsAnyUniqueID(t *testing.T) {
	for _, id := range []string{
		"req_9f3a12",
		"9f3a12",
		"123e4567-e89b-12d3-a456-426614174000", // UUID
		"01ARZ3NDEKTSV4RRFFQ69G5FAV",           // ULID
		"acme:orders:2026-05-03.1",
		"A",
		strings.Repeat("a", MaxRequestIDLen),
	} {
		r := fixtureRequest(t)
		r.RequestID = id
		if err := r.Validate(); err != nil {
			t.Errorf("request_id %q refused: %v", id, err)
		}
	}
}

// Request ids valid before issue 15 — "req_" then idPattern's charset
// (with @ and /), up to 256 bytes — stay valid: checkpoints of paused runs
// and replay packets recorded then hold them, and Resume and Replay
// validate the stored request again.
func TestRequestIDPreIssue15StillValid(t *testing.T) {
	for _, id := range []string{
		"req_acme/4711",
		"req_user@acme.example",
		"req_acme/orders/2026-05-03",
		"req_/x",
		"req_acme//x",
		"req_acme/...",
		"req_acme/.well-known",
		"req_acme/..x",
		"req_" + strings.Repeat("a", 200),
		"req_" + strings.Repeat("a", requestid.MaxLegacyLen-4),
	} {
		r := fixtureRequest(t)
		r.RequestID = id
		if err := r.Validate(); err != nil {
			t.Errorf("request_id %.40q (valid before issue 15) refused: %v", id, err)
		}
	}
}

func TestRequestIDHostile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, id string
		rule     Code
	}{
		{"empty", "", CodeRequired},
		{"too long", strings.Repeat("a", MaxRequestIDLen+1), CodeFormat},
		{"far too long", "req_" + strings.Repeat("9", 1<<16), CodeFormat},
		{"space", "req 1", CodeFormat},
		{"leading space", " req_1", CodeFormat},
		{"trailing newline", "req_1\n", CodeFormat},
		{"NUL", "req_\x001", CodeFormat},
		{"escape sequence", "req_\x1b[31m", CodeFormat},
		{"DEL", "req_\x7f", CodeFormat},
		{"tab", "req\t1", CodeFormat},
		{"unicode letter", "req_é", CodeFormat},
		{"unicode digit", "req_١٢٣", CodeFormat},
		{"bidi override", "req_\u202e1", CodeFormat},
		{"zero width space", "req_\u200b1", CodeFormat},
		{"invalid UTF-8", "req_\xff", CodeFormat},
		{"slash", "req/1", CodeFormat},
		{"path traversal", "../../etc/passwd", CodeFormat},
		{"backslash", "req\\1", CodeFormat},
		{"url-ish", "req_1?x=1#y", CodeFormat},
		{"percent escape", "req_%2e%2e", CodeFormat},
		{"at sign", "req@1", CodeFormat},
		{"leading dot", ".hidden", CodeFormat},
		{"leading dash", "-rf", CodeFormat},
		{"leading underscore", "_req", CodeFormat},
		{"quote", `req_"1`, CodeFormat},
		{"legacy dot-dot segment", "req_acme/../etc/passwd", CodeFormat},
		{"legacy trailing dot-dot", "req_acme/..", CodeFormat},
		{"legacy dot segment", "req_acme/./x", CodeFormat},
		{"legacy backslash", "req_acme\\..\\x", CodeFormat},
		{"legacy space", "req_acme/ x", CodeFormat},
		{"legacy query", "req_acme/x?y", CodeFormat},
		{"legacy unicode", "req_acme/é", CodeFormat},
		{"legacy too long", "req_" + strings.Repeat("a", requestid.MaxLegacyLen-3), CodeFormat},
		{"at sign without req_", "user@acme.example", CodeFormat},
		{"slash without req_", "acme/4711", CodeFormat},
		{"long without req_", strings.Repeat("a", MaxRequestIDLen+1), CodeFormat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := fixtureRequest(t)
			r.RequestID = tt.id
			err := r.Validate()
			var ve *ValidationError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &ve) {
				t.Fatalf("request_id %q: err = %v, want a *ValidationError", problem.Clip(tt.id), err)
			}
			if len(ve.Problems) != 1 || ve.Problems[0].Path != "request_id" || ve.Problems[0].Code != tt.rule {
				t.Fatalf("problems = %+v, want one %s problem naming request_id", ve.Problems, tt.rule)
			}
			if tt.id != "" && strings.Contains(err.Error(), tt.id) {
				t.Errorf("the error echoes the hostile id: %v", err)
			}
		})
	}
}

// A request's runtime hints beyond 2^53−1 are refused, each by its path:
// the budget they become has no exact canonical form.
func TestRuntimeHintsWithinSafeIntegers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		set  func(h *RuntimeHints)
		path string
	}{
		{"total tokens", func(h *RuntimeHints) { h.TotalTokens = new(math.MaxInt) }, "runtime.total_tokens"},
		{"tool calls", func(h *RuntimeHints) { h.MaxToolCalls = new(1 << 53) }, "runtime.max_tool_calls"},
		{"wall clock", func(h *RuntimeHints) { h.WallClockMS = new(int64(math.MaxInt64)) }, "runtime.wall_clock_ms"},
		{"payload", func(h *RuntimeHints) { h.MaxPayloadBytes = new(int64(1 << 53)) }, "runtime.max_payload_bytes"},
		{"cost", func(h *RuntimeHints) { h.MaxCostCents = new(1e300) }, "runtime.max_cost_cents"},
		{"bucket", func(h *RuntimeHints) { h.BucketTokens = map[Bucket]int{BucketEvidence: math.MaxInt} }, "runtime.bucket_tokens.evidence"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := fixtureRequest(t)
			tc.set(&req.Runtime)
			if ps := problemsOf(t, req.Validate()); !hasProblem(ps, tc.path, CodeRange) {
				t.Errorf("Validate() problems = %v, want one at %s", ps, tc.path)
			}
		})
	}
}

// A well-formed trace is checked without writing its members' paths (a
// problem's path is made when there is one): no allocation.
func TestCheckTraceWellFormedAllocatesNothing(t *testing.T) {
	tr := Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", TraceFlags: "01"}
	if a := testing.AllocsPerRun(20, func() {
		var ps problems
		checkTrace(&ps, "trace", tr)
		if len(ps.list) > 0 {
			t.Fatalf("problems: %v", ps.list)
		}
	}); a != 0 {
		t.Errorf("checking a well-formed trace allocates %v times", a)
	}
}

// A well-formed request is validated without an allocation: no member's
// path is written unless it has a problem (at), and the plain forms of
// agent versions, SPIFFE ids, pack refs and token refs are read without
// the parsers' allocations. (An attachment's URI and media type are still
// read by url.Parse and mime.ParseMediaType, which allocate.)
func TestValidateWellFormedAllocatesNothing(t *testing.T) {
	r := fixtureRequest(t)
	r.Agent.TokenRef = "tok_agent_92"
	r.Agent.PrincipalChain = []Principal{{Kind: PrincipalUser, ID: "usr_771", TenantID: r.TenantID}}
	r.Runtime.BucketTokens = map[Bucket]int{BucketSession: 2000, BucketPolicy: 1000}
	if a := testing.AllocsPerRun(20, func() {
		if err := r.Validate(); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("validating a well-formed request allocates %v times", a)
	}
}
