package server_test

import (
	"net/http"
	"testing"

	"github.com/contextos/contextos/server"
)

// TestHostEditingInvokeRolesAfterNewLiftsNoRoleCheck: the roles that may
// start runs are the handler's from New on. A host that edits the
// InvokeRoles slice it handed to New (a shared config value, say) does
// not let a principal without one of the roles start a run.
func TestHostEditingInvokeRolesAfterNewLiftsNoRoleCheck(t *testing.T) {
	roles := []string{"support_agent"}
	e := newEnv(t, &envOptions{handler: server.Options{InvokeRoles: roles}})
	roles[0] = "finance_lead" // the host edits its own slice after New
	m := e.do("POST", "/v1/runs", e.token(lead), refundBody(t, "req_roles_edit_1", 1200)).problem(t, http.StatusForbidden, server.CodeForbidden)
	if m["rule"] != server.RuleInvokeRole {
		t.Errorf("rule %v, want %s", m["rule"], server.RuleInvokeRole)
	}
	if keys, _ := e.payments.Counts(); len(keys) != 0 {
		t.Errorf("payments called %d times: editing InvokeRoles after New lifted the invoke-role check", len(keys))
	}
}
