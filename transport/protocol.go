package transport

import "github.com/contextos/contextos/gateway"

var _ gateway.ProtocolReporter = (*Adapter)(nil)

// Protocol implements gateway.ProtocolReporter: the endpoint's transport
// as Tool Contract v1 names its runtime mode (http, external,
// webhook-callback) and the contract version, which the gateway records
// on every call envelope (metadata.protocol, metadata.version).
func (a *Adapter) Protocol() (protocol, version string) {
	return wireMode(a.ep.Transport), ContractVersion
}
