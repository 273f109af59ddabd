package decision

import "github.com/contextos/contextos/internal/decisionhook"

func init() {
	decisionhook.OutputsRedacted = func(in any) { in.(*BuildInput).outputsRedacted = true }
}
