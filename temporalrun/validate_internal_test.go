package temporalrun

import (
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/contextos/contextos/gateway"
)

// The validator on workflow time: an approval for a request whose TTL
// has passed is refused (decided_at), one just within it is accepted.
// (The workflow's own timer ends the wait at the TTL, so a run never
// waits past it; the validator still refuses an approval that arrives
// at that instant.)
func TestValidateTTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		age  time.Duration // of the request when the approval arrives
		want string        // "" accepted, else the refused field
	}{
		{"within the TTL", 2*time.Hour - time.Second, ""},
		{"at the TTL", 2 * time.Hour, "decided_at"},
		{"past the TTL", 3 * time.Hour, "decided_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.ExecuteWorkflow(func(ctx workflow.Context) (string, error) {
				p := &gateway.ApprovalRequest{GateID: "GATE_F", ApproverRole: "finance_lead", TTLSeconds: 7200, ActionDigest: "sha256:aa",
					ToolCallID: "tc_1", RequestedAt: workflow.Now(ctx).Add(-tc.age)}
				st := &state{tenant: "tenant_a", pending: p}
				err := st.validate(ctx, Approval{ApprovalID: "apr_1", GateID: "GATE_F", ActionDigest: "sha256:aa", Approver: "u_fin", ApproverRole: "finance_lead", TenantID: "tenant_a"})
				if err != nil {
					return err.Error(), nil
				}
				return "", nil
			})
			var got string
			if err := env.GetWorkflowResult(&got); err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && got != "":
				t.Fatalf("validate = %s, want accepted", got)
			case tc.want != "" && !strings.Contains(got, "approval refused: "+tc.want+":"):
				t.Fatalf("validate = %q, want a refusal naming %s", got, tc.want)
			}
		})
	}
}

// The gate's self-approval rule, as the gateway applies it on resume:
// the run's requesting user (or a user of its principal chain) may not
// decide unless the gate allows self-approval; anyone else with the role
// may.
func TestValidateSelfApproval(t *testing.T) {
	for _, tc := range []struct {
		name     string
		approver string
		allow    bool
		want     string // "" accepted, else the refused field
	}{
		{"the requester", "usr_771", false, "approver"},
		{"the requester, other case and spaces", " USR_771 ", false, "approver"},
		{"a user of the principal chain", "usr_chain", false, "approver"},
		{"the requester, self-approval allowed", "usr_771", true, ""},
		{"someone else", "u_fin", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.ExecuteWorkflow(func(ctx workflow.Context) (string, error) {
				p := &gateway.ApprovalRequest{GateID: "GATE_F", ApproverRole: "finance_lead", TTLSeconds: 7200, ActionDigest: "sha256:aa",
					ToolCallID: "tc_1", RequestedAt: workflow.Now(ctx), AllowSelfApproval: tc.allow}
				st := &state{tenant: "tenant_a", pending: p, requesters: []string{"usr_771", "", "usr_chain"}}
				err := st.validate(ctx, Approval{ApprovalID: "apr_1", GateID: "GATE_F", ActionDigest: "sha256:aa", Approver: tc.approver, ApproverRole: "finance_lead", TenantID: "tenant_a"})
				if err != nil {
					return err.Error(), nil
				}
				return "", nil
			})
			var got string
			if err := env.GetWorkflowResult(&got); err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && got != "":
				t.Fatalf("validate = %s, want accepted", got)
			case tc.want != "" && !strings.Contains(got, "approval refused: "+tc.want+":"):
				t.Fatalf("validate = %q, want a refusal naming %s", got, tc.want)
			}
		})
	}
}

// An approval id the run accepted for one pause is refused for the next
// (the gateway would refuse it as used, blocking the call): each is
// used once.
func TestValidateApprovalIDOnce(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.ExecuteWorkflow(func(ctx workflow.Context) ([]string, error) {
		st := &state{tenant: "tenant_a"}
		var got []string
		for i, digest := range []string{"sha256:aa", "sha256:bb", "sha256:bb"} {
			st.pending = &gateway.ApprovalRequest{GateID: "GATE_F", ApproverRole: "finance_lead", TTLSeconds: 7200, ActionDigest: digest,
				ToolCallID: "tc_1", RequestedAt: workflow.Now(ctx)}
			st.answer = nil
			id := "apr_1"
			if i == 2 {
				id = "apr_2"
			}
			err := st.accept(ctx, Approval{ApprovalID: id, GateID: "GATE_F", ActionDigest: digest, Approver: "u_fin", ApproverRole: "finance_lead", TenantID: "tenant_a"})
			if err != nil {
				got = append(got, err.Error())
			} else {
				got = append(got, "")
			}
		}
		return got, nil
	})
	var got []string
	if err := env.GetWorkflowResult(&got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != "" || !strings.Contains(got[1], "approval refused: approval_id: the approval was already used") || got[2] != "" {
		t.Fatalf("accept = %q, want accepted, refused as used, accepted", got)
	}
}
