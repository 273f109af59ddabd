package transport

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

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

// maxToolName bounds a wire tool name, in bytes.
const maxToolName = 256

// checkTools refuses an endpoint's tools entry whose wire name cannot be
// sent (a *ConfigError naming tools.<capability>.name): a name with
// surrounding space, more than maxToolName bytes, invalid UTF-8, or a
// control or format character (it travels in a header, a log line and a
// span), and a name two capabilities share, which would send two
// governed capabilities to one tool. Capabilities are checked in name
// order, so the error is the same on every run.
func checkTools(ep *Endpoint) error {
	owner := map[string]string{}
	for _, c := range slices.Sorted(maps.Keys(ep.Tools)) {
		name := ep.Tools[c].Name
		if name == "" {
			continue
		}
		field := "tools." + clip(c) + ".name"
		switch {
		case strings.TrimSpace(name) != name:
			return &ConfigError{Field: field, Problem: "has surrounding space"}
		case len(name) > maxToolName:
			return &ConfigError{Field: field, Problem: fmt.Sprintf("is longer than %d bytes", maxToolName)}
		case !utf8.ValidString(name):
			return &ConfigError{Field: field, Problem: "is not valid UTF-8"}
		case strings.IndexFunc(name, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) >= 0:
			return &ConfigError{Field: field, Problem: "has a control or format character"}
		}
		if other, ok := owner[name]; ok {
			return &ConfigError{Field: field, Problem: fmt.Sprintf("%q is also the name of capability %s; each capability needs its own tool", clip(name), clip(other))}
		}
		owner[name] = c
	}
	return nil
}
