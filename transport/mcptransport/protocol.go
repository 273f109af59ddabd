package mcptransport

import (
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport"
)

var _ gateway.ProtocolReporter = (*Adapter)(nil)

// Protocol implements gateway.ProtocolReporter: mcp, and the MCP protocol
// version the session negotiated when it connected (metadata.protocol and
// metadata.version of every call envelope).
func (a *Adapter) Protocol() (protocol, version string) {
	if res := a.session.InitializeResult(); res != nil {
		version = res.ProtocolVersion
	}
	return transport.TransportMCP, version
}
