package temporaltest_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/contextos/contextos/internal/temporaltest"
)

// approvalTTL is how long waitForApproval waits: three days.
const approvalTTL = 72 * time.Hour

// errNotApprover is the validator's refusal of an approver without the
// role.
var errNotApprover = errors.New("approver lacks the role")

// waitForApproval waits up to ttl (a durable timer) for an "approve"
// update from a finance lead; the validator refuses anyone else before
// the update is accepted.
func waitForApproval(ctx workflow.Context, ttl time.Duration) (string, error) {
	approver := ""
	err := workflow.SetUpdateHandlerWithOptions(ctx, "approve",
		func(_ workflow.Context, role string) error {
			approver = role
			return nil
		},
		workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, role string) error {
			if role != "finance_lead" {
				return fmt.Errorf("%w: %q", errNotApprover, role)
			}
			return nil
		}})
	if err != nil {
		return "", err
	}
	ok, err := workflow.AwaitWithTimeout(ctx, ttl, func() bool { return approver != "" })
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "expired", nil
	}
	return "approved by " + approver, nil
}

// A three-day wait for an approval runs in the test environment with
// time skipping, without a server: an approval on the third day ends it,
// none lets the timer expire it, and an update the validator refuses
// changes nothing.
func TestTimeSkippingApprovalWait(t *testing.T) {
	t.Parallel()
	type update struct {
		after time.Duration // workflow time since the start
		role  string
	}
	for _, tc := range []struct {
		name     string
		updates  []update
		want     string
		accepted []string // roles whose update was accepted
		rejected []string // roles whose update the validator refused
		elapsed  time.Duration
	}{
		{
			name:     "approved on the third day",
			updates:  []update{{time.Hour, "intern"}, {71 * time.Hour, "finance_lead"}},
			want:     "approved by finance_lead",
			accepted: []string{"finance_lead"},
			rejected: []string{"intern"},
			elapsed:  71 * time.Hour,
		},
		{
			name:     "expired",
			updates:  []update{{time.Hour, "intern"}},
			want:     "expired",
			rejected: []string{"intern"},
			elapsed:  approvalTTL,
		},
		{
			name:    "approval after the TTL is too late",
			updates: []update{{approvalTTL + time.Hour, "finance_lead"}},
			want:    "expired",
			elapsed: approvalTTL,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var s testsuite.WorkflowTestSuite
			s.SetLogger(temporaltest.Logger())
			env := s.NewTestWorkflowEnvironment()
			env.RegisterWorkflow(waitForApproval)
			start := env.Now()
			var accepted, rejected []string
			for i, u := range tc.updates {
				env.RegisterDelayedCallback(func() {
					env.UpdateWorkflow("approve", fmt.Sprint("approval-", i), &testsuite.TestUpdateCallback{
						OnAccept: func() { accepted = append(accepted, u.role) },
						OnReject: func(err error) {
							if !strings.Contains(err.Error(), fmt.Sprintf("%v: %q", errNotApprover, u.role)) {
								t.Errorf("update by %s rejected with %v", u.role, err)
							}
							rejected = append(rejected, u.role)
						},
					}, u.role)
				}, u.after)
			}
			wall := time.Now()
			env.ExecuteWorkflow(waitForApproval, approvalTTL)
			if !env.IsWorkflowCompleted() {
				t.Fatal("the workflow did not complete")
			}
			var got string
			if err := env.GetWorkflowResult(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("result = %q, want %q", got, tc.want)
			}
			if diff := cmp.Diff(tc.accepted, accepted); diff != "" {
				t.Errorf("accepted updates (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.rejected, rejected); diff != "" {
				t.Errorf("rejected updates (-want +got):\n%s", diff)
			}
			if elapsed := env.Now().Sub(start); elapsed != tc.elapsed {
				t.Errorf("workflow time elapsed = %v, want %v", elapsed, tc.elapsed)
			}
			// Days of workflow time pass in moments of the test's.
			if took := time.Since(wall); took > time.Minute {
				t.Errorf("the test environment took %v: time was not skipped", took)
			}
		})
	}
}
