package transport

import (
	"fmt"
	"slices"
	"strings"

	"github.com/contextos/contextos/runcontext"
)

// labelModes is the lowest approval mode that may carry each capability
// label: reads need none; local writes local_write; anything that acts
// over the network or outside the process network.
var labelModes = map[string]runcontext.ApprovalMode{
	"data.read": runcontext.ReadOnly, "network.read": runcontext.ReadOnly, "filesystem.read": runcontext.ReadOnly,
	"data.write": runcontext.LocalWrite, "filesystem.write": runcontext.LocalWrite,
	"network.write": runcontext.Network, "exec.command": runcontext.Network, "external.side_effect": runcontext.Network,
}

// riskModes is the lowest approval mode for each risk level.
var riskModes = map[string]runcontext.ApprovalMode{
	"low": runcontext.ReadOnly, "medium": runcontext.ReadOnly, "high": runcontext.Network, "critical": runcontext.Delegated,
}

// CheckToolInfo checks a capability's contract labels against the approval
// mode its pack declares for the adapter: every label and the risk level
// must be known, and none may need a higher mode (a read_only adapter
// cannot front a tool that writes; a critical tool needs delegated or
// destructive). Errors match ErrConfig and name the label.
func CheckToolInfo(capability string, info ToolInfo, mode runcontext.ApprovalMode) error {
	for _, l := range labels(info.Capabilities) {
		need, ok := labelModes[l]
		if !ok {
			return fmt.Errorf("%w: %s: capability label %q is not one of %s", ErrConfig, capability, clip(l), strings.Join(capabilityLabels, ", "))
		}
		if !need.AtMost(mode) {
			return fmt.Errorf("%w: %s: capability label %s needs approval mode %s or higher; the pack declares %s", ErrConfig, capability, l, need, mode)
		}
	}
	if r := strings.ToLower(strings.TrimSpace(info.RiskLevel)); r != "" {
		need, ok := riskModes[r]
		if !ok || !slices.Contains(riskLevels, r) {
			return fmt.Errorf("%w: %s: risk level %q is not one of %s", ErrConfig, capability, clip(r), strings.Join(riskLevels, ", "))
		}
		if !need.AtMost(mode) {
			return fmt.Errorf("%w: %s: risk level %s needs approval mode %s or higher; the pack declares %s", ErrConfig, capability, r, need, mode)
		}
	}
	return nil
}
