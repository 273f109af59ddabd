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
