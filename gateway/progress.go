package gateway

import (
	"context"
	"math"
	"strings"

	"github.com/contextos/contextos/internal/sensitive"
)

// Progress is a progress report of a call in flight, relayed by its adapter
// (an MCP server's progress notifications, for one).
type Progress struct {
	ToolCallID   string `json:"tool_call_id"`
	CapabilityID string `json:"capability_id"`
	Attempt      int    `json:"attempt"`
	// Progress increases with every report; Total is 0 when unknown.
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	// Message is the tool's own words, redacted by every built-in rule and
	// by the run's active redaction rules (a pack's own among them), and at
	// most 200 bytes (a longer one is cut and ends in "…").
	Message string `json:"message,omitempty"`
}

// maxProgressMessage bounds a progress message, in bytes.
const maxProgressMessage = 200

type progressKey struct{}

// progressRulesKey carries the run's active redaction rules to
// ReportProgress: the gateway installs them in the context of every
// attempt whose caller listens for progress.
type progressRulesKey struct{}

// withProgressRules returns ctx carrying rules for ReportProgress, when
// ctx has a progress receiver.
func withProgressRules(ctx context.Context, rules []Redactor) context.Context {
	if len(rules) == 0 || !ProgressWanted(ctx) {
		return ctx
	}
	return context.WithValue(ctx, progressRulesKey{}, rules)
}

// WithProgress returns ctx with f as the receiver of the progress reports
// of the calls made under it (pass it to Run.Call). f is called on the
// goroutine that runs the adapter's Call while that call runs, never after
// the attempt's context is done; the runtime's Stream turns each report
// into a progress event.
func WithProgress(ctx context.Context, f func(Progress)) context.Context {
	if f == nil {
		return ctx
	}
	return context.WithValue(ctx, progressKey{}, f)
}

// ProgressWanted reports whether ctx has a progress receiver: an adapter
// asks its tool for progress only then.
func ProgressWanted(ctx context.Context) bool {
	f, _ := ctx.Value(progressKey{}).(func(Progress))
	return f != nil
}

// ReportProgress relays one progress report of call to ctx's receiver, if
// any: the call's ids and attempt are set from call, the message is
// redacted (every built-in rule, then the run's active rules when the
// gateway made the call) and bounded, and a report with a number that is not finite, or
// made once ctx is done, is dropped. Adapters call it on the goroutine
// running their Call, before Call returns.
func ReportProgress(ctx context.Context, call *Call, p Progress) {
	f, _ := ctx.Value(progressKey{}).(func(Progress))
	if f == nil || call == nil || call.Envelope == nil || ctx.Err() != nil || !finite(p.Progress) || !finite(p.Total) {
		return
	}
	p.ToolCallID, p.CapabilityID, p.Attempt = call.Envelope.ToolCallID, call.Envelope.CapabilityID, call.Attempt
	if p.Message != "" {
		// Redact before the clip, which could cut a match in half.
		msg, _ := sensitive.Redact(strings.ToValidUTF8(p.Message, ""), sensitive.All)
		if rules, _ := ctx.Value(progressRulesKey{}).([]Redactor); len(rules) > 0 {
			msg, _ = redactString(msg, rules)
		}
		if len(msg) > maxProgressMessage {
			msg = clip(msg, maxProgressMessage-len("…")) // marked, and within the bound
		}
		p.Message = msg
	}
	f(p)
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
