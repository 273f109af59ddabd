package gateway

import "github.com/contextos/contextos/internal/gatewayhook"

func init() {
	gatewayhook.RunPolicy = func(run any) any { return run.(*Run).base }
}
