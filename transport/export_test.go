package transport

import (
	"context"
	"net/netip"

	"github.com/contextos/contextos/transport/internal/netguard"
)

// SetLookup makes the transports' dialer resolve host names with f until
// the returned restore is called (tests play rebinding resolvers with
// it; not for parallel tests).
func SetLookup(f func(ctx context.Context, host string) ([]netip.Addr, error)) (restore func()) {
	old := netguard.Lookup
	netguard.Lookup = f
	return func() { netguard.Lookup = old }
}
