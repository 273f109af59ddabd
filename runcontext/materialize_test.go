package runcontext

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMaterializeFromRequestOnly(t *testing.T) {
	req := fixtureRequest(t)
	rc, err := Materialize(req, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Materialize(fixtureRequest(t), nil, nil)
	if rc.RunID != again.RunID || !HasRunPrefix(rc.RunID) {
		t.Errorf("derived run id not deterministic or unprefixed: %s vs %s", rc.RunID, again.RunID)
	}
	if rc.SafetyMode != ReadOnly {
		t.Errorf("default safety mode = %s, want read_only", rc.SafetyMode)
	}
	if rc.TraceID != req.Trace.TraceID || rc.TraceContext.TraceParent != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Errorf("trace not carried: %s %+v", rc.TraceID, rc.TraceContext)
	}
	want := DefaultRunBudget()
	want.PlanTimeoutMS = 15000
	want.MaxToolCalls = 8
	want.MaxPayloadBytes = 1048576
	want.MaxCostCents = 25
	if diff := cmp.Diff(want, rc.RunBudget); diff != "" {
		t.Errorf("budget (-want +got):\n%s", diff)
	}
	if rc.Intent != "support.refund" || rc.Locale != "en-IN" || rc.User.UserID != "usr_771" || rc.Agent.AgentURN != req.Agent.AgentURN {
		t.Errorf("fields not carried: %+v", rc)
	}
	// The request is not modified and the result does not alias it.
	rc.User.Delegation.Scopes[0] = "changed"
	if req.User.Delegation.Scopes[0] != "orders.read" {
		t.Error("Materialize result aliases the request")
	}
}

func HasRunPrefix(id string) bool { return len(id) == len("run_")+16 && id[:4] == "run_" }

func TestMaterializeHintsOverDefaults(t *testing.T) {
	req := fixtureRequest(t)
	req.Runtime.MaxToolCalls = ptr(20)
	req.Runtime.TotalTokens = ptr(20000)
	req.Runtime.BucketTokens = map[Bucket]int{BucketEvidence: 9000}
	req.Runtime.WallClockMS = ptr[int64](60000)
	req.Runtime.MaxReplanAttempts = ptr(0)
	rc, err := Materialize(req, nil, &MaterializeOptions{DefaultSafetyMode: Network})
	if err != nil {
		t.Fatal(err)
	}
	b := rc.RunBudget
	if b.MaxToolCalls != 20 || b.TotalTokens != 20000 || b.BucketTokens[BucketEvidence] != 9000 || b.WallClockMS != 60000 || b.MaxReplanAttempts != 0 {
		t.Errorf("hints not applied over defaults: %+v", b)
	}
	if rc.SafetyMode != Network {
		t.Errorf("DefaultSafetyMode ignored: %s", rc.SafetyMode)
	}
}

func TestMaterializeHintsOnlyTightenHostBudget(t *testing.T) {
	host := fixtureRunContext(t)
	req := fixtureRequest(t)
	req.Runtime.MaxToolCalls = ptr(100) // looser than host's 8: ignored
	req.Runtime.MaxCostCents = ptr(5.0) // tighter than 25: applied
	req.Runtime.BucketTokens = map[Bucket]int{BucketEvidence: 4000, BucketPolicy: 100}
	rc, err := Materialize(req, host, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := rc.RunBudget
	if b.MaxToolCalls != 8 || b.MaxCostCents != 5 || b.BucketTokens[BucketEvidence] != 400 || b.BucketTokens[BucketPolicy] != 100 {
		t.Errorf("hints over host budget wrong: %+v", b)
	}
	if rc.RunID != host.RunID || rc.SafetyMode != Destructive {
		t.Errorf("host values not kept: %s %s", rc.RunID, rc.SafetyMode)
	}
	if host.RunBudget.BucketTokens[BucketPolicy] != 1800 {
		t.Error("Materialize modified the host run context")
	}
}

func TestMaterializeConflicts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		host func(rc *RunContext)
		path string
	}{
		{"tenant", func(rc *RunContext) { rc.TenantID = "tenant_other" }, "tenant_id"},
		{"session", func(rc *RunContext) { rc.SessionID = "sess_other" }, "session_id"},
		{"trace", func(rc *RunContext) { rc.TraceID = "5bf92f3577b34da6a3ce929d0e0e4736" }, "trace_id"},
		{"user", func(rc *RunContext) { rc.User.UserID = "usr_other" }, "user.user_id"},
		{"agent", func(rc *RunContext) { rc.Agent.AgentURN = "agent:contextos/other@1.0.0" }, "agent.agent_urn"},
		{"intent", func(rc *RunContext) { rc.Intent = "support.cancel" }, "intent"},
		{"locale", func(rc *RunContext) { rc.Locale = "fr-FR" }, "locale"},
		{"agent id", func(rc *RunContext) { rc.Agent.AgentID = "agt_other" }, "agent.agent_id"},
		{"workload identity", func(rc *RunContext) { rc.Agent.WorkloadIdentity = "spiffe://contextos/agents/other" }, "agent.workload_identity"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			host := fixtureRunContext(t)
			tc.host(host)
			_, err := Materialize(fixtureRequest(t), host, nil)
			if !errors.Is(err, ErrConflict) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Materialize = %v, want ErrConflict", err)
			}
			if !hasProblem(problemsOf(t, err), tc.path, CodeConflict) {
				t.Errorf("problems = %v, want conflict at %s", problemsOf(t, err), tc.path)
			}
			// CheckAgreement is the check Materialize makes (the compiler
			// makes it too): the same problems.
			cerr := CheckAgreement(fixtureRequest(t), host)
			if !errors.Is(cerr, ErrConflict) || cerr.Error() != err.Error() {
				t.Errorf("CheckAgreement = %v, Materialize = %v; want the same conflict", cerr, err)
			}
		})
	}
	// A member set on one side only is no disagreement.
	host := fixtureRunContext(t)
	host.SessionID, host.Intent, host.Locale = "", "", ""
	if err := CheckAgreement(fixtureRequest(t), host); err != nil {
		t.Errorf("run context leaving members to the request: %v", err)
	}
	if err := CheckAgreement(nil, host); !errors.Is(err, ErrInvalid) {
		t.Errorf("CheckAgreement(nil, rc) = %v, want ErrInvalid", err)
	}
	// The same values on both sides are not a conflict.
	if _, err := Materialize(fixtureRequest(t), fixtureRunContext(t), nil); err != nil {
		t.Errorf("agreeing host context: %v", err)
	}
}

func TestMaterializeRefusesInvalid(t *testing.T) {
	req := fixtureRequest(t)
	req.ContextPackRefs = []string{"ctxpack.support"}
	if _, err := Materialize(req, nil, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid request: %v", err)
	}
	// destructive safety mode without delegation fails in the result.
	req = fixtureRequest(t)
	req.User.Delegation = nil
	_, err := Materialize(req, nil, &MaterializeOptions{DefaultSafetyMode: Destructive})
	if !hasProblem(problemsOf(t, err), "user.delegation", CodeRequired) {
		t.Errorf("destructive without delegation: %v", err)
	}
	// A bad run id source is refused.
	_, err = Materialize(fixtureRequest(t), nil, &MaterializeOptions{NewRunID: func(*InvokeRequest) (string, error) { return "123", nil }})
	if !hasProblem(problemsOf(t, err), "run_id", CodeFormat) {
		t.Errorf("unprefixed run id: %v", err)
	}
	boom := errors.New("boom")
	if _, err := Materialize(fixtureRequest(t), nil, &MaterializeOptions{NewRunID: func(*InvokeRequest) (string, error) { return "", boom }}); !errors.Is(err, boom) {
		t.Errorf("id source error: %v", err)
	}
}

func TestPrincipalChainDefault(t *testing.T) {
	rc, _ := Materialize(fixtureRequest(t), nil, nil)
	got := rc.PrincipalChain()
	want := []Principal{{Kind: PrincipalUser, ID: "usr_771", TenantID: "tenant_acme_prod"}, {Kind: PrincipalAgent, ID: "agent:contextos/support-refund@1.2.0", TenantID: "tenant_acme_prod"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PrincipalChain (-want +got):\n%s", diff)
	}
}

// Clone is deep: changing anything reachable from the copy leaves the
// original alone.
func TestClone(t *testing.T) {
	rc := fixtureRunContext(t)
	rc.Agent.IdentityClaim = validClaim(rc)
	rc.Metadata = map[string]any{"a": []any{map[string]any{"b": 1.0}}}
	rc.Extensions = map[string]json.RawMessage{"x": json.RawMessage(`1`)}
	rc.User.Claims = map[string]json.RawMessage{"tier": json.RawMessage(`"gold"`)}
	rc.User.TenureDays = ptr(5)
	before, _ := json.Marshal(rc)
	c := rc.Clone()
	c.User.Delegation.Scopes[0] = "x"
	*c.User.TenureDays = 9
	c.User.Claims["tier"][1] = 'X'
	c.Agent.PrincipalChain[0].ID = "x"
	c.Agent.IdentityClaim.Scopes[0] = "x"
	c.RunBudget.BucketTokens[BucketPolicy] = 1
	c.TraceContext = &TraceContext{TraceParent: "x"}
	c.Metadata["a"].([]any)[0].(map[string]any)["b"] = 2.0
	c.Extensions["x"][0] = '2'
	after, _ := json.Marshal(rc)
	if string(before) != string(after) {
		t.Errorf("Clone is shallow:\n%s\n%s", before, after)
	}
	if (*RunContext)(nil).Clone() != nil || (*InvokeRequest)(nil).Clone() != nil {
		t.Error("Clone(nil) != nil")
	}
	req := fixtureRequest(t)
	req.Runtime.TotalTokens = ptr(5)
	rb, _ := json.Marshal(req)
	rq := req.Clone()
	rq.ContextPackRefs[0] = "x"
	rq.Input.Context["refund_amount"] = 1
	*rq.Runtime.MaxToolCalls = 99
	*rq.Runtime.TotalTokens = 99
	ra, _ := json.Marshal(req)
	if string(rb) != string(ra) {
		t.Errorf("InvokeRequest.Clone is shallow")
	}
}

// A partial host run context (no safety mode, no budget) is completed
// from the request and defaults.
func TestMaterializePartialHost(t *testing.T) {
	host := &RunContext{TenantID: "tenant_acme_prod", Metadata: map[string]any{"host": "svc"}}
	rc, err := Materialize(fixtureRequest(t), host, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rc.SafetyMode != ReadOnly || rc.RunBudget.TotalTokens != defaultTotalTokens || rc.Metadata["host"] != "svc" {
		t.Errorf("partial host not completed: %+v", rc)
	}
}
