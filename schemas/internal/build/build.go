// Package build generates the published JSON Schemas (draft 2020-12) from
// the Go contract types with github.com/invopop/jsonschema. It is the one
// source of the files in schemas/: the generator writes them and a test
// fails when the committed files differ from what Generate returns.
package build

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"

	"github.com/invopop/jsonschema"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/enums"
	"github.com/contextos/contextos/internal/requestid"
	"github.com/contextos/contextos/internal/wire"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// BaseURL is where ContextOS publishes its schemas; every $id is
// BaseURL + file name.
const BaseURL = "https://contextosai.com/schemas/"

// Draft is the JSON Schema dialect of every generated file.
const Draft = "https://json-schema.org/draft/2020-12/schema"

// PackRefPattern is the grammar of a pinned pack ref (internal/packref).
const PackRefPattern = `^[A-Za-z0-9_.:-]+@[0-9]+\.[0-9]+\.[0-9]+$`

// LedgerRequired are the members compiled-context.v1 requires of a
// context ledger: those of the ledger in seed 000's compiled output.
var LedgerRequired = []string{"pack_ref", "request_id", "policy_bundles", "tools", "evidence_refs", "memory_refs", "budget", "compiled_context_hash"}

// Doc describes one published schema file.
type Doc struct {
	File  string // e.g. "run-context.v1.schema.json"
	Title string
	Root  reflect.Type
	// External maps a Go type to the absolute $ref it gets in this file
	// because another published file defines it.
	External map[reflect.Type]string
	// Finish applies the constraints Go types cannot express (patterns,
	// consts, minItems) to the reflected schema.
	Finish func(s *jsonschema.Schema)
}

// defNames are the $defs names of the upstream schemas, where they differ
// from the Go type name.
var defNames = map[reflect.Type]string{
	reflect.TypeFor[runcontext.Delegation]():   "UserDelegation",
	reflect.TypeFor[runcontext.Trace]():        "InvokeTrace",
	reflect.TypeFor[runcontext.Input]():        "InvokeInput",
	reflect.TypeFor[runcontext.RuntimeHints](): "InvokeRuntime",
	reflect.TypeFor[decision.Record]():         "DecisionRecord",
}

// envelopes reflects both tool envelopes into one document; Finish turns
// its root into their anyOf.
type envelopes struct {
	Call   gateway.ToolCallEnvelope   `json:"call"`
	Result gateway.ToolResultEnvelope `json:"result"`
}

// planAnswer is what a model planner answers a turn with (plan.v1): the
// steps and the decision of a contextos.Plan. Usage is not the model's to
// claim (the planner reads it from its backend), nor are memory proposals
// part of the answer.
type planAnswer struct {
	Steps    []contextos.Step            `json:"steps,omitempty"`
	Decision *contextos.DecisionProposal `json:"decision,omitempty"`
}

// MaxPlanSteps bounds a plan's steps: the gateway keys a call by its
// step index, which is below 1000.
const MaxPlanSteps = 1000

// enumDefs are string enums published as $defs (name, values).
var enumDefs = map[reflect.Type]struct {
	name   string
	values []string
	desc   string
}{
	reflect.TypeFor[runcontext.ApprovalMode](): {"ApprovalMode", enums.ApprovalModes(), "Canonical risk taxonomy, ordered read_only < local_write < network < delegated < destructive. Tools declare the highest mode they can produce; policy may downgrade within bundle priority but cannot upgrade outside it."},
	reflect.TypeFor[runcontext.Mode]():         {"InvokeMode", enums.Modes(), ""},
	reflect.TypeFor[runcontext.Bucket]():       {"ContextBucket", strs(runcontext.Buckets()), ""},
	reflect.TypeFor[pack.DataClassification](): {"DataClassification", strs(pack.DataClassifications()), ""},
	reflect.TypeFor[pack.WriteClass]():         {"WriteClass", strs(pack.WriteClasses()), ""},
	reflect.TypeFor[gateway.Status]():          {"ToolResultStatus", strs(gateway.Statuses()), ""},
	reflect.TypeFor[decision.Status]():         {"DecisionStatus", enums.DecisionStatuses(), ""},
}

// inlineEnums are string enums written in place.
var inlineEnums = map[reflect.Type][]string{
	reflect.TypeFor[runcontext.PrincipalKind]():   enums.PrincipalKinds(),
	reflect.TypeFor[runcontext.AuthType]():        enums.AuthTypes(),
	reflect.TypeFor[runcontext.Lifecycle]():       enums.Lifecycles(),
	reflect.TypeFor[replay.SourceKind]():          strs(replay.SourceKinds()),
	reflect.TypeFor[replay.SideEffectPolicy]():    strs(replay.SideEffectPolicies()),
	reflect.TypeFor[replay.Status]():              strs(replay.Statuses()),
	reflect.TypeFor[decision.ClaimVerification](): enums.ClaimVerifications(),
}

func strs[T ~string](v []T) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = string(x)
	}
	return out
}

// Docs returns the published documents, in file-name order.
func Docs() []Doc {
	rc := BaseURL + "run-context.v1.schema.json#/$defs/"
	docs := []Doc{
		{
			File: "run-context.v1.schema.json", Title: "RunContext v1",
			Root: reflect.TypeFor[runcontext.RunContext](),
			Finish: func(s *jsonschema.Schema) {
				claim := s.Definitions["IdentityClaim"]
				prop(claim, "version").Const = runcontext.ClaimVersion
				prop(claim, "version").Type = ""
				prop(claim, "claim_hash").Pattern = "^sha256:[0-9a-f]{64}$"
				prop(s, "run_id").Pattern = "^run_"
				prop(s, "trace_id").Pattern = "^[0-9a-f]{32}$"
				prop(s.Definitions["AgentIdentity"], "agent_urn").Pattern = `^agent:[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*@[0-9]+\.[0-9]+\.[0-9]+`
				prop(s.Definitions["AgentIdentity"], "workload_identity").Pattern = "^spiffe://"
				prop(s.Definitions["UserClaims"], "tenure_days").Minimum = "0"
			},
		},
		{
			File: "compiled-context.v1.schema.json", Title: "CompiledContext v1",
			Root: reflect.TypeFor[compiler.CompiledContext](),
			Finish: func(s *jsonschema.Schema) {
				ledger := s.Definitions["ContextLedger"]
				prop(ledger, "compiled_context_hash").Pattern = "^sha256:[0-9a-f]{64}$"
				// The upstream opening does not show ContextLedger, so
				// it requires none of our ledger's further members; the
				// published ledger requires what seed 000's compiled
				// output carries (our compiler writes every member).
				for _, m := range LedgerRequired {
					prop(ledger, m)
				}
				ledger.Required = slices.Clone(LedgerRequired)
			},
		},
		{
			File: "decision-record.v1.schema.json", Title: "DecisionRecord v1",
			Root: reflect.TypeFor[decision.Record](),
			External: map[reflect.Type]string{
				reflect.TypeFor[runcontext.Principal](): rc + "Principal",
			},
			Finish: func(s *jsonschema.Schema) {
				s.Description = "Replayable audit receipt emitted by governed decision checkpoints."
				prop(s, "timestamp").Format = "date-time"
				prop(s, "record_hash").Pattern = "^sha256:[0-9a-f]{64}$"
				prop(s, "prev_record_hash").Pattern = "^sha256:[0-9a-f]{64}$"
			},
		},
		{
			File: "replay-packet.v1.schema.json", Title: "ReplayPacket v1",
			Root: reflect.TypeFor[replay.Packet](),
			External: map[reflect.Type]string{
				reflect.TypeFor[runcontext.Principal]():       rc + "Principal",
				reflect.TypeFor[gateway.ToolCallEnvelope]():   BaseURL + "tool-envelope.v1.schema.json#/$defs/ToolCallEnvelope",
				reflect.TypeFor[gateway.ToolResultEnvelope](): BaseURL + "tool-envelope.v1.schema.json#/$defs/ToolResultEnvelope",
				reflect.TypeFor[compiler.ContextLedger]():     BaseURL + "compiled-context.v1.schema.json#/$defs/ContextLedger",
			},
			Finish: func(s *jsonschema.Schema) {
				s.Description = "Portable replay contract for audit replay, regression replay, environment replay, and source-pressure closure."
				prop(s.Definitions["LatestResult"], "updated_at").Format = "date-time"
				prop(s, "compiled_context_hash").Pattern = "^sha256:[0-9a-f]{64}$"
				prop(s, "invoke_hash").Pattern = "^sha256:[0-9a-f]{64}$"
				prop(s, "packet_hash").Pattern = "^sha256:[0-9a-f]{64}$"
			},
		},
		{
			File: "tool-envelope.v1.schema.json", Title: "ToolEnvelope v1",
			Root: reflect.TypeFor[envelopes](),
			External: map[reflect.Type]string{
				reflect.TypeFor[runcontext.Principal](): rc + "Principal",
			},
			Finish: func(s *jsonschema.Schema) {
				s.Properties, s.Required, s.Type, s.AdditionalProperties = nil, nil, "", nil
				s.AnyOf = []*jsonschema.Schema{{Ref: "#/$defs/ToolCallEnvelope"}, {Ref: "#/$defs/ToolResultEnvelope"}}
				call := s.Definitions["ToolCallEnvelope"]
				prop(call, "envelope_version").Const, prop(call, "envelope_version").Type = gateway.CallEnvelopeVersion, ""
				for _, name := range []string{"policy_decision_id", "idempotency_key", "auth_ref"} {
					p := prop(call, name)
					p.Type, p.Extras = "", map[string]any{"type": []string{"string", "null"}}
				}
				res := s.Definitions["ToolResultEnvelope"]
				prop(res, "envelope_version").Const, prop(res, "envelope_version").Type = gateway.ResultEnvelopeVersion, ""
				p := prop(res, "policy_decision_id")
				p.Type, p.Extras = "", map[string]any{"type": []string{"string", "null"}}
				out := prop(res, "output")
				out.Type, out.Extras = "", map[string]any{"type": []string{"object", "null"}}
				res.Properties.Set("error", &jsonschema.Schema{AnyOf: []*jsonschema.Schema{{Ref: "#/$defs/ToolError"}, {Type: "null"}}})
			},
		},
		{
			File: "context-pack.v2.schema.json", Title: "ContextPack",
			Root: reflect.TypeFor[pack.Pack](),
			Finish: func(s *jsonschema.Schema) {
				s.Description = "Versioned, signed, immutable Context Pack — the unit of deployment for the Context plane."
				prop(s.Definitions["ContractMeta"], "created_at").Format = "date-time"
				pm := s.Definitions["PackMeta"]
				prop(pm, "pack_id").Pattern = `^[A-Za-z0-9_.:-]+$`
				prop(pm, "pack_version").Pattern = `^[0-9]+\.[0-9]+\.[0-9]+$`
				prop(pm, "ttl_seconds").Minimum = "1"
				rule := s.Definitions["Rule"]
				prop(rule, "if").Description = "JsonLogic expression over the policy data document"
				prop(s.Definitions["ApprovalGate"], "when").Description = "JsonLogic expression over the policy data document"
				prop(s.Definitions["PolicyDSL"], "language").Enum = []any{"jsonlogic"}
				prop(s.Definitions["Adapter"], "endpoint_ref").Pattern = `^(internal|registry)://`
				dsp := s.Definitions["DecisionSpec"]
				one := uint64(1)
				prop(dsp, "allowed_outcomes").MinItems = &one
			},
		},
		{
			File: "plan.v1.schema.json", Title: "Plan v1",
			Root: reflect.TypeFor[planAnswer](),
			Finish: func(s *jsonschema.Schema) {
				s.Description = "A planner's answer for one turn: tool calls (steps) the gateway will check and run, and at most one decision proposal. The planner proposes; the gateway decides."
				steps := prop(s, "steps")
				one, most := uint64(1), uint64(MaxPlanSteps)
				steps.MinItems, steps.MaxItems = &one, &most
				steps.Description = "Tool calls, in order. Each names a surfaced capability (adapter_id.capability) and arguments that pass its schema."
				prop(s, "decision").Description = "The decision the plan commits to, when it has one."
				s.AnyOf = []*jsonschema.Schema{{Required: []string{"steps"}}, {Required: []string{"decision"}}}
				step := s.Definitions["Step"]
				step.Required = []string{"capability_id", "args"}
				prop(step, "capability_id").Pattern = `^[A-Za-z0-9_-]+\.[A-Za-z0-9_.-]+$`
				dp := s.Definitions["DecisionProposal"]
				dp.Required = []string{"decision_key", "outcome"}
				prop(dp, "decision_key").MinLength = &one
				prop(dp, "outcome").MinLength = &one
				c := prop(dp, "confidence")
				c.Minimum, c.Maximum = "0", "1"
			},
		},
		{
			File: "invoke-agent.v1.schema.json", Title: "invokeAgent request envelope v1",
			Root: reflect.TypeFor[runcontext.InvokeRequest](),
			External: map[reflect.Type]string{
				reflect.TypeFor[runcontext.UserClaims]():    rc + "UserClaims",
				reflect.TypeFor[runcontext.AgentIdentity](): rc + "AgentIdentity",
				reflect.TypeFor[runcontext.Principal]():     rc + "Principal",
			},
			Finish: func(s *jsonschema.Schema) {
				refs := prop(s, "context_pack_refs")
				one := uint64(1)
				refs.MinItems = &one
				refs.Items.Pattern = PackRefPattern
				rid := prop(s, "request_id")
				rid.Pattern = requestid.Pattern // runcontext.InvokeRequest.Validate: any unique id, or a pre-issue-15 req_ id
				maxRID := uint64(requestid.MaxLegacyLen)
				rid.MaxLength = &maxRID
				trace := s.Definitions["InvokeTrace"]
				prop(trace, "trace_id").Pattern = "^[0-9a-f]{32}$"
				prop(trace, "span_id").Pattern = "^[0-9a-f]{16}$"
				prop(trace, "trace_flags").Pattern = "^[0-9a-f]{2}$"
			},
		},
	}
	sort.Slice(docs, func(i, j int) bool { return docs[i].File < docs[j].File })
	return docs
}

func prop(s *jsonschema.Schema, name string) *jsonschema.Schema {
	p, ok := s.Properties.Get(name)
	if !ok {
		panic("build: schema has no property " + name) // a programming error in Docs
	}
	return p
}

// Generate returns every published schema file by name, formatted with
// two-space indentation and a trailing newline. Output is deterministic.
func Generate() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, d := range Docs() {
		b, err := generate(d)
		if err != nil {
			return nil, fmt.Errorf("build %s: %w", d.File, err)
		}
		out[d.File] = b
	}
	return out, nil
}

func generate(d Doc) ([]byte, error) {
	usedEnums := map[string]*jsonschema.Schema{}
	// Two Go types with one $defs name would silently share a definition;
	// the generator refuses instead (give one a defNames entry).
	named := map[string]reflect.Type{}
	var clash error
	r := &jsonschema.Reflector{
		Anonymous:                  true,
		RequiredFromJSONSchemaTags: true,
		ExpandedStruct:             true,
		Namer: func(t reflect.Type) string {
			n, ok := defNames[t]
			if !ok {
				n = t.Name()
			}
			if prev, seen := named[n]; n != "" && seen && prev != t && clash == nil {
				clash = fmt.Errorf("$defs name %q is used by both %v and %v", n, prev, t)
			}
			named[n] = t
			return n
		},
		Mapper: func(t reflect.Type) *jsonschema.Schema {
			if ref, ok := d.External[t]; ok {
				return &jsonschema.Schema{Ref: ref}
			}
			if e, ok := enumDefs[t]; ok {
				usedEnums[e.name] = &jsonschema.Schema{Type: "string", Enum: anys(e.values), Description: e.desc}
				return &jsonschema.Schema{Ref: "#/$defs/" + e.name}
			}
			if vals, ok := inlineEnums[t]; ok {
				return &jsonschema.Schema{Type: "string", Enum: anys(vals)}
			}
			if t.Kind() == reflect.Map && t.Key() == reflect.TypeFor[runcontext.Bucket]() {
				e := enumDefs[t.Key()]
				usedEnums[e.name] = &jsonschema.Schema{Type: "string", Enum: anys(e.values)}
				var value *jsonschema.Schema
				switch el := t.Elem(); el.Kind() {
				case reflect.Int:
					value = &jsonschema.Schema{Type: "integer", Minimum: "0"}
				case reflect.Bool:
					value = &jsonschema.Schema{Type: "boolean"}
				case reflect.Slice:
					value = &jsonschema.Schema{Type: "array", Items: &jsonschema.Schema{Type: "string"}}
				default:
					panic("build: no schema for bucket map of " + el.String()) // a programming error in the types
				}
				return &jsonschema.Schema{
					Type:                 "object",
					PropertyNames:        &jsonschema.Schema{Ref: "#/$defs/" + e.name},
					AdditionalProperties: value,
				}
			}
			return nil
		},
	}
	s := r.ReflectFromType(d.Root)
	if clash != nil {
		return nil, clash
	}
	s.Version = Draft
	s.ID = jsonschema.ID(BaseURL + d.File)
	s.Title = d.Title
	if s.Definitions == nil {
		s.Definitions = jsonschema.Definitions{}
	}
	for name, e := range usedEnums {
		s.Definitions[name] = e
	}
	// Closed and open objects follow the Go types (internal/wire): a type
	// with an extension slot accepts additional members.
	types := map[string]reflect.Type{}
	collectStructs(d.Root, types, map[reflect.Type]bool{})
	setOpen := func(sch *jsonschema.Schema, t reflect.Type) {
		if wire.IsOpen(t) {
			sch.AdditionalProperties = jsonschema.TrueSchema
		} else {
			sch.AdditionalProperties = jsonschema.FalseSchema
		}
	}
	setOpen(s, d.Root)
	for name, def := range s.Definitions {
		if t, ok := types[name]; ok && def.Type == "object" {
			setOpen(def, t)
		}
	}
	if d.Finish != nil {
		d.Finish(s)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

func anys(v []string) []any {
	out := make([]any, len(v))
	for i, s := range v {
		out[i] = s
	}
	return out
}

func collectStructs(t reflect.Type, out map[string]reflect.Type, seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	name := t.Name()
	if n, ok := defNames[t]; ok {
		name = n
	}
	out[name] = t
	for i := 0; i < t.NumField(); i++ {
		collectStructs(t.Field(i).Type, out, seen)
	}
}
