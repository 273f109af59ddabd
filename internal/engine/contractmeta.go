package engine

import (
	"maps"
	"strings"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
)

// recordedWithoutContractMetadata reports whether a packet's call
// envelopes were recorded before the gateway wrote arg_schema_ref,
// protocol and version into their metadata: it has call entries and none
// carries a protocol. Its replay leaves them out too (the envelopes, the
// transcript chain and the record's chain hash are then the recorded
// ones).
func recordedWithoutContractMetadata(p *replay.Packet) bool {
	calls := 0
	for _, e := range p.Transcript {
		if e.Call == nil {
			continue
		}
		calls++
		if _, ok := e.Call.Metadata[gateway.MetaProtocol]; ok {
			return false
		}
	}
	return calls > 0
}

// replayRegistration is reg with the playback adapter in place of its own,
// speaking the protocol and version the packet's envelopes recorded for
// reg's adapter (or, when the packet has no call of it, those of the
// original adapter): a replay reproduces the recorded envelopes whatever
// transports the replaying host has. A capability the replaying host
// registers without an argument schema of its own (neither ArgsSchema nor
// ArgSchemaRef: `contextos replay`, which has no live servers to list
// tools from) takes the arg_schema_ref its recorded envelopes carry; one
// the host registers a schema for keeps its own ref, so a changed schema
// is a mismatch.
func replayRegistration(p *replay.Packet, reg gateway.Registration, playback gateway.Adapter) gateway.Registration {
	out := reg.WithAdapter(playback)
	protocolSet := false
	cloned := false
	for _, e := range p.Transcript {
		if e.Call == nil {
			continue
		}
		adapter, capName, _ := strings.Cut(e.Call.CapabilityID, ".")
		if adapter != reg.AdapterID {
			continue
		}
		if proto, ok := e.Call.Metadata[gateway.MetaProtocol].(string); ok && proto != "" && !protocolSet {
			version, _ := e.Call.Metadata[gateway.MetaVersion].(string)
			out.Protocol, out.Version = proto, version
			protocolSet = true
		}
		ref, ok := e.Call.Metadata[gateway.MetaArgSchemaRef].(string)
		c, registered := out.Capabilities[capName]
		if !ok || ref == "" || !registered || len(c.ArgsSchema) > 0 || c.ArgSchemaRef != "" {
			continue
		}
		if !cloned {
			out.Capabilities = maps.Clone(out.Capabilities) // the host's map stays its own
			cloned = true
		}
		c.ArgSchemaRef = ref
		out.Capabilities[capName] = c
	}
	return out
}
