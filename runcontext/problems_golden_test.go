package runcontext

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
)

var updateProblems = flag.Bool("update-problems", false, "rewrite testdata/problems.golden")

// problemCase is one invalid document: a request, a run context, or a
// request materialized over a host run context (host may be nil).
type problemCase struct {
	name string
	req  func(r *InvokeRequest)
	rc   func(rc *RunContext)
	host func(h *RunContext)
}

// problemCases break every member the validation checks, alone and all at
// once, at every depth of path: top-level members, members of members,
// array elements and their members, map keys, and the identity claim's
// principal chain under the agent.
func problemCases() []problemCase {
	claim := func(rc *RunContext) *IdentityClaim { return validClaim(rc) }
	reqClaim := func(r *InvokeRequest) *IdentityClaim {
		rc := &RunContext{RunID: "run_x", SessionID: r.SessionID, TenantID: r.TenantID, User: r.User, Agent: r.Agent}
		return validClaim(rc)
	}
	chain := func() []Principal {
		return []Principal{{Kind: "robot", ID: " ", TenantID: "tenant_other"}, {Kind: "", ID: "x"}, {Kind: PrincipalUser, ID: "u", TenantID: "tenant_acme_prod"}}
	}
	badClaim := func(c *IdentityClaim) {
		c.Version = "ctxid/9"
		c.Iss, c.Kid, c.RunID = " ", "", ""
		c.Sub = "agent:other/x@1.0.0"
		c.TenantID = "tenant_other"
		c.PrincipalChain = chain()
		c.Scopes = nil
		c.Nbf, c.Exp = math.MaxInt64, 5
		c.ClaimHash = "sha256:XYZ"
	}
	agent := func(a *AgentIdentity) {
		a.AgentID = "agt bad"
		a.AgentURN = "agent:Bad/x@1"
		a.WorkloadIdentity = "spiffe://Bad/a"
		a.Lifecycle = "paused"
		a.TokenRef = "Bearer abcdefghijklmnopqrstuvwxyz0123456789"
		a.PrincipalChain = chain()
	}
	user := func(u *UserClaims) {
		u.UserID = ""
		u.TenureDays = ptr(-3)
		u.Delegation = &Delegation{AuthType: "kerberos", Scopes: []string{"a", " ", ""}, Subject: "", TokenRef: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"}
	}
	hints := func(h *RuntimeHints) {
		h.PlanTimeoutMS = ptr(int64(0))
		h.MaxSessionDurationMS = ptr(int64(math.MaxInt64))
		h.MaxPayloadBytes = ptr(int64(-1))
		h.WallClockMS = ptr(int64(1 << 60))
		h.MaxToolCalls = ptr(-1)
		h.MaxReplanAttempts = ptr(1 << 60)
		h.TotalTokens = ptr(0)
		h.MaxCostCents = ptr(math.NaN())
		h.BucketTokens = map[Bucket]int{"zeta": 1, BucketPolicy: -1, BucketTool: 1 << 60, BucketSession: 5, "alpha": -2}
	}
	budget := func(b *RunBudget) {
		b.TotalTokens = 10
		b.BucketTokens = map[Bucket]int{"zeta": 1, BucketPolicy: -1, BucketTool: 1 << 60, BucketMemory: 40, BucketSession: 0}
		b.MaxToolCalls = -1
		b.MaxReplanAttempts = 1 << 60
		b.WallClockMS = 0
		b.MaxCostCents = math.Inf(1)
		b.PlanTimeoutMS = -1
		b.MaxPayloadBytes = 1 << 60
		b.MaxSessionDurationMS = -5
	}
	att := []Attachment{
		{ArtifactID: "art_1", MediaType: "application/pdf", SHA256: strings.Repeat("a", 64), URI: "s3://bucket/a.pdf"},
		{ArtifactID: " ", MediaType: "", SHA256: "", URI: ""},
		{ArtifactID: "token=ghp_abcdefghijklmnopqrstuvwxyz0123456789", MediaType: "pdf", SHA256: "XYZ", URI: "relative/path"},
		{ArtifactID: "a", MediaType: "text/plain", SHA256: "sha256:" + strings.Repeat("b", 64), URI: "https://u:p@example.com/x"},
		{ArtifactID: "a", MediaType: "text/plain", SHA256: strings.Repeat("b", 64), URI: "https://example.com/x?X-Amz-Signature=abcdef0123456789"},
	}
	return []problemCase{
		{name: "request nil fields", req: func(r *InvokeRequest) { *r = InvokeRequest{} }},
		{name: "request ids", req: func(r *InvokeRequest) {
			r.RequestID, r.SessionID, r.TenantID = "req 1", "sess 1", strings.Repeat("t", 300)
		}},
		{name: "request user", req: func(r *InvokeRequest) { user(&r.User) }},
		{name: "request user empty delegation scopes", req: func(r *InvokeRequest) { r.User.Delegation.Scopes, r.User.Delegation.AuthType = nil, "" }},
		{name: "request agent", req: func(r *InvokeRequest) { agent(&r.Agent) }},
		{name: "request agent required", req: func(r *InvokeRequest) { r.Agent = AgentIdentity{AgentID: "", Lifecycle: LifecycleRetired} }},
		{name: "request agent urn semver", req: func(r *InvokeRequest) { r.Agent.AgentURN = "agent:contextos/x@1.2" }},
		{name: "request agent spiffe", req: func(r *InvokeRequest) { r.Agent.WorkloadIdentity = "spiffe://contextos:80/a" }},
		{name: "request agent spiffe segment", req: func(r *InvokeRequest) { r.Agent.WorkloadIdentity = "spiffe://contextos/a//b" }},
		{name: "request agent spiffe no path", req: func(r *InvokeRequest) { r.Agent.WorkloadIdentity = "spiffe://contextos/" }},
		{name: "request agent opaque token", req: func(r *InvokeRequest) { r.Agent.TokenRef = "Ab3dE9fG1hJ2kL4mN5pQ7rS8tU0vW6xYz2A4b" }},
		{name: "request claim", req: func(r *InvokeRequest) {
			r.Agent.IdentityClaim = reqClaim(r)
			badClaim(r.Agent.IdentityClaim)
		}},
		{name: "request claim empty", req: func(r *InvokeRequest) { r.Agent.IdentityClaim = &IdentityClaim{SessionID: "sess_other"} }},
		{name: "request claim only session", req: func(r *InvokeRequest) {
			r.Agent.IdentityClaim = reqClaim(r)
			r.Agent.IdentityClaim.SessionID = "sess_other"
		}},
		{name: "request pack refs", req: func(r *InvokeRequest) {
			r.ContextPackRefs = []string{"a@1.0.0", "b", "a@2.0.0", "c@^1", "b@1.0.0"}
		}},
		{name: "request no pack refs", req: func(r *InvokeRequest) { r.ContextPackRefs = nil }},
		{name: "request input mode", req: func(r *InvokeRequest) { r.Input.Intent, r.Input.Message, r.Mode = " ", "", "fast" }},
		{name: "request mode required", req: func(r *InvokeRequest) { r.Mode = "" }},
		{name: "request hints", req: func(r *InvokeRequest) { hints(&r.Runtime) }},
		{name: "request hints cost range", req: func(r *InvokeRequest) { r.Runtime.MaxCostCents = ptr(float64(1 << 60)) }},
		{name: "request attachments", req: func(r *InvokeRequest) { r.Attachments = att }},
		{name: "request trace", req: func(r *InvokeRequest) {
			r.Trace = Trace{TraceID: strings.Repeat("0", 32), SpanID: "XYZ", TraceFlags: "1", TraceState: "=bad", Baggage: "=;"}
		}},
		{name: "request everything", req: func(r *InvokeRequest) {
			r.RequestID, r.SessionID, r.TenantID = "", "s s", ""
			user(&r.User)
			agent(&r.Agent)
			r.Agent.IdentityClaim = &IdentityClaim{}
			badClaim(r.Agent.IdentityClaim)
			r.ContextPackRefs = []string{"x"}
			r.Input = Input{}
			r.Mode = "x"
			hints(&r.Runtime)
			r.Attachments = att
			r.Trace = Trace{}
		}},
		{name: "run context nil fields", rc: func(rc *RunContext) { *rc = RunContext{} }},
		{name: "run context ids", rc: func(rc *RunContext) { rc.RunID, rc.TraceID, rc.SessionID = "job_1", "XYZ", "s s" }},
		{name: "run context run id", rc: func(rc *RunContext) { rc.RunID = "run 1" }},
		{name: "run context user", rc: func(rc *RunContext) { user(&rc.User) }},
		{name: "run context agent", rc: func(rc *RunContext) { agent(&rc.Agent) }},
		{name: "run context claim", rc: func(rc *RunContext) {
			rc.Agent.IdentityClaim = claim(rc)
			badClaim(rc.Agent.IdentityClaim)
			rc.Agent.IdentityClaim.SessionID = "sess_other"
			rc.Agent.IdentityClaim.RunID = "run_other"
		}},
		{name: "run context safety mode", rc: func(rc *RunContext) { rc.SafetyMode = "reckless" }},
		{name: "run context safety mode required", rc: func(rc *RunContext) { rc.SafetyMode = "" }},
		{name: "run context delegation required", rc: func(rc *RunContext) { rc.User.Delegation = nil }},
		{name: "run context budget", rc: func(rc *RunContext) { budget(&rc.RunBudget) }},
		{name: "run context budget no buckets", rc: func(rc *RunContext) { rc.RunBudget.BucketTokens = nil }},
		{name: "run context budget sum", rc: func(rc *RunContext) { rc.RunBudget.TotalTokens = 100 }},
		{name: "run context trace context", rc: func(rc *RunContext) {
			rc.TraceContext = &TraceContext{TraceParent: "00-xyz", TraceState: "=bad", Baggage: "=;"}
		}},
		{name: "run context trace context other trace", rc: func(rc *RunContext) {
			rc.TraceContext = &TraceContext{TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
		}},
		{name: "materialize conflict", host: func(h *RunContext) {
			h.TenantID, h.SessionID, h.TraceID, h.Intent, h.Locale = "tenant_other", "sess_other", "0af7651916cd43dd8448eb211c80319c", "other", "fr-FR"
			h.User.UserID = "usr_other"
			h.Agent.AgentURN, h.Agent.AgentID, h.Agent.WorkloadIdentity = "agent:other/x@1.0.0", "agt_other", "spiffe://other/a"
		}},
		{name: "materialize host agent", host: func(h *RunContext) {
			h.Agent.Lifecycle, h.Agent.TokenRef = LifecycleSuspended, "Bearer abcdefghijklmnopqrstuvwxyz0123456789"
		}},
		{name: "materialize host agent chain", host: func(h *RunContext) { h.Agent.PrincipalChain = chain() }},
		{name: "materialize host budget", host: func(h *RunContext) { budget(&h.RunBudget) }},
		{name: "materialize host user", host: func(h *RunContext) { user(&h.User); h.User.UserID = "usr_771" }},
		{name: "materialize host agent no tenant", host: func(h *RunContext) { h.TenantID = ""; h.Agent.PrincipalChain = chain() }},
		{name: "materialize host agent claim", host: func(h *RunContext) {
			h.Agent.IdentityClaim = claim(h)
			badClaim(h.Agent.IdentityClaim)
		}},
		{name: "materialize bad request", req: func(r *InvokeRequest) { agent(&r.Agent) }, host: func(h *RunContext) {}},
		{name: "materialize request agent hints", req: func(r *InvokeRequest) {
			r.Runtime.BucketTokens = map[Bucket]int{BucketSession: 0}
		}, host: func(h *RunContext) { h.Agent = AgentIdentity{}; h.RunBudget = RunBudget{} }},
	}
}

// describe writes everything a caller can read of err: its text, the
// sentinels it matches, its claim error, and every problem.
func describe(err error) string {
	if err == nil {
		return "no error\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "error: %s\n", err)
	for _, s := range []struct {
		name string
		err  error
	}{{"ErrInvalid", ErrInvalid}, {"ErrConflict", ErrConflict}, {"ErrClaim", ErrClaim}, {"ErrRawToken", ErrRawToken}} {
		if errors.Is(err, s.err) {
			fmt.Fprintf(&b, "is %s\n", s.name)
		}
	}
	var ce *ClaimError
	if errors.As(err, &ce) {
		fmt.Fprintf(&b, "claim error: field %q reason %q\n", ce.Field, ce.Reason)
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			fmt.Fprintf(&b, "problem %q %s %q\n", p.Path, p.Code, p.Message)
		}
	}
	return b.String()
}

// TestProblemsGolden holds every problem of problemCases — path, code,
// message, and the error's text and sentinels — byte for byte: the paths
// are written only when a problem is found, and must be the paths they
// always were.
func TestProblemsGolden(t *testing.T) {
	var b strings.Builder
	for _, tc := range problemCases() {
		req, rc := fixtureRequest(t), fixtureRunContext(t)
		var err error
		switch {
		case tc.host != nil:
			if tc.req != nil {
				tc.req(req)
			}
			tc.host(rc)
			_, err = Materialize(req, rc, nil)
		case tc.req != nil:
			tc.req(req)
			err = req.Validate()
		default:
			tc.rc(rc)
			err = rc.Validate()
		}
		if err == nil {
			t.Errorf("%s: no error", tc.name)
		}
		fmt.Fprintf(&b, "== %s\n%s\n", tc.name, describe(err))
	}
	const golden = "testdata/problems.golden"
	if *updateProblems {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run TestProblemsGolden -update-problems ./runcontext writes it)", err)
	}
	if got := b.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s: line %d is\n%s\nwant\n%s", golden, i+1, g, w)
			}
		}
	}
}
