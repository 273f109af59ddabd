package grpctransport

import (
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport"
)

var _ gateway.ProtocolReporter = (*Adapter)(nil)

// Protocol implements gateway.ProtocolReporter: grpc, and the Tool
// Contract version (metadata.protocol and metadata.version of every call
// envelope).
func (a *Adapter) Protocol() (protocol, version string) {
	return transport.TransportGRPC, transport.ContractVersion
}
