package gateway

import "github.com/contextos/contextos/internal/gatewayhook"

func init() {
	gatewayhook.RunPolicy = func(run any) any { return run.(*Run).base }
	gatewayhook.VerifyChain = func(entries any, seq int, prev string) (string, error) {
		return verifyChain(entries.([]TranscriptEntry), seq, prev)
	}
}
