package gateway_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/gateway"
)

// Every Tool Contract v1 code has its reason; other codes have none.
func TestReasonFor(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		gateway.CodeInvalidInput: "tool_invalid_input", gateway.CodeUnsupportedTool: "tool_unsupported",
		gateway.CodeRuntimePolicyInvalid: "tool_runtime_policy_invalid", gateway.CodeIsolationUnavailable: "tool_isolation_unavailable",
		gateway.CodePermissionDenied: "tool_permission_denied", gateway.CodeSecretResolutionFailed: "tool_secret_resolution_failed",
		gateway.CodeTimeout: "tool_execution_timeout", gateway.CodeCanceled: "tool_execution_canceled", gateway.CodeExecutionFailed: "tool_backend_failure",
		gateway.CodeAuthInvalid: "tool_auth_invalid", gateway.CodeAuthForbidden: "tool_auth_forbidden", gateway.CodeAuthExpired: "tool_auth_expired",
		gateway.CodeApprovalPending: "tool_approval_pending", gateway.CodeApprovalDenied: "tool_approval_denied", gateway.CodeApprovalTimeout: "tool_approval_timeout",
		"": "", "quota": "", "tool_invalid_input": "",
	}
	got := map[string]string{}
	for code := range want {
		got[code] = gateway.ReasonFor(code)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReasonFor (-want +got):\n%s", diff)
	}
}
