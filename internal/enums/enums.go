// Package enums lists the values of the closed string enumerations of the
// wire types, for the schema generator and the tests that check the
// published enums. The typed constants stay in their packages
// (runcontext, decision); each of those packages tests that its constants
// and these lists agree.
package enums

// ApprovalModes are runcontext.ApprovalMode's values, least to most risky.
func ApprovalModes() []string {
	return []string{"read_only", "local_write", "network", "delegated", "destructive"}
}

// Modes are runcontext.Mode's values.
func Modes() []string { return []string{"stream", "batch", "long_running"} }

// PrincipalKinds are runcontext.PrincipalKind's values.
func PrincipalKinds() []string { return []string{"user", "service", "agent", "automation"} }

// AuthTypes are runcontext.AuthType's values.
func AuthTypes() []string { return []string{"oauth2", "saml", "oidc", "service"} }

// Lifecycles are runcontext.Lifecycle's values.
func Lifecycles() []string { return []string{"draft", "active", "suspended", "deprecated", "retired"} }

// DecisionStatuses are decision.Status's values.
func DecisionStatuses() []string {
	return []string{"DECIDED", "DEFERRED", "REJECTED", "ESCALATED", "IN_FLIGHT", "CLOSED"}
}

// ClaimVerifications are decision.ClaimVerification's values.
func ClaimVerifications() []string { return []string{"verified", "waived"} }
