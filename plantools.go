package contextos

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// ToolSpec is one surfaced capability as a planner sees it: what the
// compiled tool manifest says of it and, when the runtime has an adapter
// registered for it, the JSON Schema its arguments must pass.
type ToolSpec struct {
	// Name is the capability id, "adapter_id.capability"
	// ("adp_coder.run"): a plan step's CapabilityID.
	Name string `json:"name"`
	// Kind is "read" or "write"; RiskLevel the manifest's risk level
	// (read_only, write_reversible, network, write_delegated,
	// write_irreversible).
	Kind      string `json:"kind,omitempty"`
	RiskLevel string `json:"risk_level,omitempty"`
	// ApprovalMode is the capability's effective approval mode.
	ApprovalMode runcontext.ApprovalMode `json:"approval_mode,omitempty"`
	// ApprovalGate is the gate its permission requires ("" when none);
	// GateActive says the gate is active for this run (a call pauses for
	// an approval).
	ApprovalGate string `json:"approval_gate,omitempty"`
	GateActive   bool   `json:"approval_gate_active,omitempty"`
	// ArgsSchema is the JSON Schema (draft 2020-12) the gateway checks the
	// arguments against, compact; nil when the registration declares none
	// (any object) or no adapter is registered for the capability (a
	// PlanRequest a host built itself).
	ArgsSchema json.RawMessage `json:"args_schema,omitempty"`
}

// argSchemas indexes the registered capabilities' argument schemas by
// capability id, compacted once when the runtime is built.
func argSchemas(regs []gateway.Registration) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, reg := range regs {
		for name, c := range reg.Capabilities {
			if len(c.ArgsSchema) == 0 {
				continue
			}
			var buf bytes.Buffer
			if err := json.Compact(&buf, c.ArgsSchema); err != nil {
				continue // gateway.New refuses a schema that does not compile
			}
			out[reg.AdapterID+"."+name] = buf.Bytes()
		}
	}
	return out
}

// Tools lists the capabilities the run's compiled context surfaces, sorted
// by name, each with its manifest metadata and argument schema: what a
// model planner renders into its prompt. The specs are the caller's own
// copy. A capability outside this list is refused by the critic and the
// gateway, whatever a planner proposes.
func (r *PlanRequest) Tools() []ToolSpec {
	if r == nil || r.Compiled == nil {
		return nil
	}
	var out []ToolSpec
	for _, e := range r.Compiled.Manifests.ToolManifest {
		for _, c := range e.Capabilities {
			md := e.CapabilityMetadata[c]
			id := e.AdapterID + "." + c
			out = append(out, ToolSpec{Name: id, Kind: md.Kind, RiskLevel: md.RiskLevel, ApprovalMode: md.ApprovalMode,
				ApprovalGate: md.ApprovalGate, GateActive: md.GateActive, ArgsSchema: slices.Clone(r.schemas[id])})
		}
	}
	slices.SortFunc(out, func(a, b ToolSpec) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}
