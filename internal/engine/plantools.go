package engine

import (
	"bytes"
	"encoding/json"
	"slices"
	"sync"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/decisionspec"
	"github.com/contextos/contextos/pack"
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
	// GatePerCall, for a gate inactive for the run that reads the tool
	// call, says when it applies to a call (a call it applies to pauses
	// for an approval): its when and the rules that name it.
	GatePerCall string `json:"approval_gate_per_call,omitempty"`
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
				ApprovalGate: md.ApprovalGate, GateActive: md.GateActive, GatePerCall: md.GatePerCall, ArgsSchema: slices.Clone(r.schemas[id])})
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

// DecisionOption is one decision of the pack as a planner sees it: the
// key a DecisionProposal names and the outcomes it may take. An outcome
// outside AllowedOutcomes is refused by the critic.
type DecisionOption struct {
	DecisionKey     string   `json:"decision_key"`
	AllowedOutcomes []string `json:"allowed_outcomes"`
	// RefusalOutcomes and EscalationOutcomes are the allowed outcomes
	// that refuse or escalate (the pack's lists, or its defaults: denied,
	// rejected, refused; escalated). A refusal or escalation can be
	// decided when a write did not complete; the others cannot.
	RefusalOutcomes    []string `json:"refusal_outcomes,omitempty"`
	EscalationOutcomes []string `json:"escalation_outcomes,omitempty"`
	// RequiredEvidence must be established before the decision is taken.
	RequiredEvidence []string `json:"required_evidence,omitempty"`
}

// decisionOptions lists p's decision specs, sorted by key.
func decisionOptions(p *pack.Pack) []DecisionOption {
	if p == nil {
		return nil
	}
	var out []DecisionOption
	for _, s := range p.DecisionLayer.DecisionSpecs {
		o := DecisionOption{DecisionKey: s.DecisionKey, AllowedOutcomes: slices.Clone(s.AllowedOutcomes), RequiredEvidence: slices.Clone(s.RequiredEvidence)}
		for _, oc := range s.AllowedOutcomes {
			if decisionspec.IsRefusal(s, oc) {
				o.RefusalOutcomes = append(o.RefusalOutcomes, oc)
			}
			if decisionspec.IsEscalation(s, oc) {
				o.EscalationOutcomes = append(o.EscalationOutcomes, oc)
			}
		}
		out = append(out, o)
	}
	slices.SortStableFunc(out, func(a, b DecisionOption) int {
		switch {
		case a.DecisionKey < b.DecisionKey:
			return -1
		case a.DecisionKey > b.DecisionKey:
			return 1
		}
		return 0
	})
	return out
}

// Decisions lists the decisions the run's pack declares, sorted by key:
// what a model planner offers as its propose_decision tool. The options
// are the caller's own copy; nil for a PlanRequest a host built itself.
func (r *PlanRequest) Decisions() []DecisionOption {
	if r == nil || len(r.decisions) == 0 {
		return nil
	}
	out := make([]DecisionOption, len(r.decisions))
	for i, d := range r.decisions {
		out[i] = DecisionOption{DecisionKey: d.DecisionKey, AllowedOutcomes: slices.Clone(d.AllowedOutcomes), RefusalOutcomes: slices.Clone(d.RefusalOutcomes),
			EscalationOutcomes: slices.Clone(d.EscalationOutcomes), RequiredEvidence: slices.Clone(d.RequiredEvidence)}
	}
	return out
}

// PlanDelta is a piece of a planner turn while the model produces it: a
// fragment of its text, or of one of its tool calls. Deltas are a view for
// a live consumer only: the plan the turn returns is what the runtime
// judges, runs and records, and a replay has none.
type PlanDelta struct {
	// Text is a fragment of the model's text.
	Text string `json:"text,omitempty"`
	// ToolIndex is the position of the tool call the fragment belongs to
	// among the turn's calls (from 0); ToolName its capability id
	// ("adp_orders.lookup") or "propose_decision", sent with its first
	// fragment; ToolArgs a fragment of its arguments' JSON text.
	ToolIndex int    `json:"tool_index,omitempty"`
	ToolName  string `json:"tool_name,omitempty"`
	ToolArgs  string `json:"tool_args,omitempty"`
}

// Streaming reports whether the run is streamed (Runtime.Stream or
// Runtime.ResumeStream), so Emit reaches a consumer. A planner may stream
// from its model either way; its plan must not depend on this.
func (r *PlanRequest) Streaming() bool { return r != nil && r.deltas != nil }

// Emit sends d to the run's stream as a plan_delta event, in the order of
// the calls. It is safe from any goroutine; it blocks while the consumer
// reads, returns at once when the run is not streamed, and drops d once
// the turn is over (the planner answered or its deadline passed).
func (r *PlanRequest) Emit(d PlanDelta) {
	if r == nil || r.deltas == nil {
		return
	}
	r.deltas.send(d)
}

// deltaSink hands a planner's deltas to the run's goroutine, which emits
// them, until the turn is over.
type deltaSink struct {
	ch    chan PlanDelta
	over  chan struct{}
	close func() // ends the turn: every later send returns at once
}

func newDeltaSink() *deltaSink {
	s := &deltaSink{ch: make(chan PlanDelta), over: make(chan struct{})}
	s.close = sync.OnceFunc(func() { close(s.over) })
	return s
}

// send delivers d to the run, or drops it once the turn is over.
func (s *deltaSink) send(d PlanDelta) {
	select {
	case <-s.over:
	case s.ch <- d:
	}
}
