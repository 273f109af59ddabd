package schemas_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/schemas"
	"github.com/contextos/contextos/schemas/internal/build"
)

// The committed files are exactly what the generator writes.
func TestCommittedSchemasAreGenerated(t *testing.T) {
	gen, err := build.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := schemas.Names(), slices.Sorted(maps.Keys(gen)); !slices.Equal(got, want) {
		t.Fatalf("embedded files %v, generator writes %v", got, want)
	}
	for name, want := range gen {
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator's output; run `go generate ./schemas`", name)
		}
	}
	again, _ := build.Generate()
	for name := range gen {
		if !bytes.Equal(gen[name], again[name]) {
			t.Errorf("%s: generator output is not deterministic", name)
		}
	}
}

// upstream holds what the upstream ContextOS schema openings show (the
// schemas seed 001 publishes, abbreviated upstream): our files must include every required
// field, enum value, const and closedness they show.
var upstream = []struct {
	file, def string // def "" is the top level
	required  []string
	closed    *bool
	enum      []string
	enumProp  string // property holding the enum ("" when the def is the enum)
}{
	{file: "run-context.v1.schema.json", required: []string{"run_id", "trace_id", "tenant_id", "user", "agent", "safety_mode", "run_budget"}},
	{file: "run-context.v1.schema.json", def: "ApprovalMode", enum: []string{"read_only", "local_write", "network", "delegated", "destructive"}},
	{file: "run-context.v1.schema.json", def: "Principal", required: []string{"kind", "id"}, closed: ptr(true), enumProp: "kind", enum: []string{"user", "service", "agent", "automation"}},
	{file: "run-context.v1.schema.json", def: "UserDelegation", required: []string{"auth_type", "scopes", "subject"}, closed: ptr(true), enumProp: "auth_type", enum: []string{"oauth2", "saml", "oidc", "service"}},
	{file: "run-context.v1.schema.json", def: "UserClaims", required: []string{"user_id"}, closed: ptr(false)},
	{file: "run-context.v1.schema.json", def: "IdentityClaim", required: []string{"version", "iss", "sub", "run_id", "tenant_id", "principal_chain", "scopes", "nbf", "exp", "kid", "claim_hash"}},
	{file: "compiled-context.v1.schema.json", required: []string{"compiled_prompt", "manifests", "runtime_controls", "budget_report", "context_ledger"}},
	{file: "compiled-context.v1.schema.json", def: "ContextBucket", enum: []string{"business", "policy", "tool", "evidence", "memory", "session"}},
	{file: "compiled-context.v1.schema.json", def: "ContextBlock", required: []string{"block_id", "bucket", "content", "priority"}, closed: ptr(true)},
	{file: "compiled-context.v1.schema.json", def: "PolicyManifestEntry", required: []string{"bundle_id", "rule_ids"}, closed: ptr(true)},
	{file: "compiled-context.v1.schema.json", def: "ToolManifestEntry", required: []string{"adapter_id", "capabilities"}, closed: ptr(true)},
	{file: "compiled-context.v1.schema.json", def: "EvidenceManifestEntry", required: []string{"evidence_ref"}, closed: ptr(true)},
	{file: "compiled-context.v1.schema.json", def: "CapabilityMetadata", closed: ptr(false)},
	{file: "tool-envelope.v1.schema.json", def: "ToolCallEnvelope", closed: ptr(true), required: []string{"envelope_version", "tool_call_id", "run_id", "trace_id", "capability_id", "args", "principal_chain", "approval_mode_requested", "approval_mode_effective", "approval_mode_highest", "evidence_refs"}},
	{file: "tool-envelope.v1.schema.json", def: "ToolResultEnvelope", required: []string{"envelope_version", "tool_call_id", "run_id", "trace_id", "capability_id"}},
	{file: "tool-envelope.v1.schema.json", def: "ApprovalMode", enum: []string{"read_only", "local_write", "network", "delegated", "destructive"}},
	{file: "tool-envelope.v1.schema.json", def: "ToolResultStatus", enum: []string{"ok", "completed", "paused", "blocked", "rejected", "failed", "error"}},
	{file: "decision-record.v1.schema.json", def: "DecisionStatus", enum: []string{"DECIDED", "DEFERRED", "REJECTED", "ESCALATED", "IN_FLIGHT", "CLOSED"}},
	{file: "decision-record.v1.schema.json", required: []string{"record_id", "decision_key", "decision_version", "timestamp", "status", "actor", "agent_identity", "evidence_refs", "policy_decisions", "approvals", "controls_active", "trace_id"}},
	{file: "replay-packet.v1.schema.json", required: []string{"replay_packet_id", "trace_id", "source_kind", "source_ref", "context_pack_ref", "compiled_context_hash", "side_effect_policy", "expected"}},
	{file: "replay-packet.v1.schema.json", enumProp: "source_kind", enum: []string{"decision_record", "quality_replay_case", "environment_episode", "operator_correction", "golden_case"}},
	{file: "replay-packet.v1.schema.json", enumProp: "side_effect_policy", enum: []string{"transcript_only", "sandbox", "live_disallowed"}},
	{file: "replay-packet.v1.schema.json", def: "Expected", required: []string{"status"}, closed: ptr(true)},
	{file: "replay-packet.v1.schema.json", def: "LatestResult", enumProp: "status", enum: []string{"not_run", "replay_equal", "replay_mismatch", "fixed", "still_failing", "invalid", "superseded"}},
	{file: "context-pack.v2.schema.json", required: []string{"contract_meta", "pack_meta", "intelligence_refs", "business_context", "policy_layer", "tooling_layer", "decision_layer", "memory_layer", "evaluation_layer", "tone_and_comms"}},
	{file: "context-pack.v2.schema.json", def: "ApprovalMode", enum: []string{"read_only", "local_write", "network", "delegated", "destructive"}},
	{file: "context-pack.v2.schema.json", def: "DataClassification", enum: []string{"PUBLIC", "INTERNAL", "CONFIDENTIAL", "RESTRICTED"}},
	{file: "context-pack.v2.schema.json", def: "WriteClass", enum: []string{"evidence_link", "preference", "decision_outcome", "correction"}},
	{file: "context-pack.v2.schema.json", def: "ContractMeta", required: []string{"contract_name", "contract_version", "issuer", "created_at", "compatibility"}},
	{file: "context-pack.v2.schema.json", def: "Compatibility", required: []string{"requires"}},
	{file: "context-pack.v2.schema.json", def: "PackMeta", required: []string{"pack_id", "pack_version", "tenant", "environment_defaults", "ttl_seconds", "data_classification"}},
	{file: "invoke-agent.v1.schema.json", required: []string{"request_id", "tenant_id", "user", "agent", "context_pack_refs", "input", "mode", "runtime", "trace"}},
	{file: "invoke-agent.v1.schema.json", def: "InvokeMode", enum: []string{"stream", "batch", "long_running"}},
	{file: "invoke-agent.v1.schema.json", def: "InvokeTrace", required: []string{"trace_id", "span_id"}, closed: ptr(true)},
	{file: "invoke-agent.v1.schema.json", def: "Attachment", required: []string{"artifact_id", "media_type", "sha256", "uri"}, closed: ptr(true)},
	{file: "invoke-agent.v1.schema.json", def: "InvokeInput", required: []string{"intent", "message"}},
}

func ptr[T any](v T) *T { return &v }

func TestMatchesUpstreamOpenings(t *testing.T) {
	for _, u := range upstream {
		b, err := schemas.File(u.file)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		node := doc
		if u.def != "" {
			node, _ = doc["$defs"].(map[string]any)[u.def].(map[string]any)
			if node == nil {
				t.Errorf("%s: no $defs/%s", u.file, u.def)
				continue
			}
		}
		req := toStrings(node["required"])
		for _, r := range u.required {
			if !slices.Contains(req, r) {
				t.Errorf("%s %s: required lacks %q (has %v)", u.file, u.def, r, req)
			}
		}
		if u.closed != nil {
			if got, _ := node["additionalProperties"].(bool); got == *u.closed {
				t.Errorf("%s %s: additionalProperties = %v, want closed=%v", u.file, u.def, node["additionalProperties"], *u.closed)
			}
		}
		if u.enum != nil {
			en := node
			if u.enumProp != "" {
				en = node["properties"].(map[string]any)[u.enumProp].(map[string]any)
			}
			if got := toStrings(en["enum"]); !slices.Equal(got, u.enum) {
				t.Errorf("%s %s: enum = %v, want %v", u.file, u.def, got, u.enum)
			}
		}
	}
	te, _ := schemas.File("tool-envelope.v1")
	for _, want := range []string{`"const": "contextos.tool_call.v1"`, `"const": "contextos.tool_result.v1"`, `"anyOf"`, `"null"`} {
		if !bytes.Contains(te, []byte(want)) {
			t.Errorf("tool-envelope lacks %s", want)
		}
	}
	cp, _ := schemas.File("context-pack.v2")
	if !bytes.Contains(cp, []byte(`"title": "ContextPack"`)) || !bytes.Contains(cp, []byte(`"format": "date-time"`)) {
		t.Error("context-pack lacks its title or created_at date-time format")
	}
	// Constants and patterns the openings show.
	rc, _ := schemas.File("run-context.v1")
	ia, _ := schemas.File("invoke-agent.v1")
	for _, want := range []string{`"const": "ctxid/1"`, `"$id": "https://contextosai.com/schemas/run-context.v1.schema.json"`, `"$schema": "https://json-schema.org/draft/2020-12/schema"`} {
		if !bytes.Contains(rc, []byte(want)) {
			t.Errorf("run-context lacks %s", want)
		}
	}
	for _, want := range []string{`"minItems": 1`, `"pattern": "^[A-Za-z0-9_.:-]+@[0-9]+\\.[0-9]+\\.[0-9]+$"`, `"$ref": "https://contextosai.com/schemas/run-context.v1.schema.json#/$defs/UserClaims"`, `"$ref": "https://contextosai.com/schemas/run-context.v1.schema.json#/$defs/AgentIdentity"`} {
		if !bytes.Contains(ia, []byte(want)) {
			t.Errorf("invoke-agent lacks %s", want)
		}
	}
}

func toStrings(v any) []string {
	var out []string
	arr, _ := v.([]any)
	for _, x := range arr {
		out = append(out, x.(string))
	}
	return out
}

func TestSeedDocumentsValidate(t *testing.T) {
	for name, file := range map[string]string{"invoke-agent": "invoke.support-refund.json", "run-context": "run-context.support.json", "context-pack": "ctxpack.support-1.0.0.json"} {
		b := fixture.Read(t, file)
		if err := schemas.Validate(name, b); err != nil {
			t.Errorf("Validate(%s, %s) = %v", name, file, err)
		}
	}
}

func TestValidateReportsPointers(t *testing.T) {
	b := fixture.Invoke()
	var doc map[string]any
	json.Unmarshal(b, &doc)
	delete(doc, "tenant_id")
	doc["context_pack_refs"] = []any{"ctxpack.support@1.0.0", "ctxpack.support@latest"}
	doc["mode"] = "fast"
	doc["trace"].(map[string]any)["extra"] = 1
	doc["user"].(map[string]any)["delegation"].(map[string]any)["auth_type"] = "kerberos"
	doc["input"].(map[string]any)["context"] = map[string]any{"free": "form"}
	bad, _ := json.Marshal(doc)
	err := schemas.Validate("invoke-agent.v1.schema.json", bad)
	var ve *schemas.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, schemas.ErrInvalid) {
		t.Fatalf("Validate = %v, want *ValidationError", err)
	}
	want := []string{"", "/context_pack_refs/1", "/mode", "/trace", "/user/delegation/auth_type"}
	var got []string
	for _, p := range ve.Problems {
		if len(got) == 0 || got[len(got)-1] != p.Path {
			got = append(got, p.Path)
		}
		if p.Message == "" {
			t.Errorf("empty message at %s", p.Path)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("problem pointers = %v, want %v\n%v", got, want, ve)
	}
}

func TestResolveAndErrors(t *testing.T) {
	for _, in := range []string{"run-context", "run-context.v1", "run-context.v1.schema.json"} {
		if got, err := schemas.Resolve(in); err != nil || got != "run-context.v1.schema.json" {
			t.Errorf("Resolve(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := schemas.Resolve("session-packet"); !errors.Is(err, schemas.ErrUnknownSchema) {
		t.Errorf("unknown schema: %v", err)
	}
	if err := schemas.Validate("nope", []byte(`{}`)); !errors.Is(err, schemas.ErrUnknownSchema) {
		t.Errorf("Validate unknown: %v", err)
	}
	if err := schemas.Validate("run-context", []byte(`{`)); !errors.Is(err, schemas.ErrInvalid) {
		t.Errorf("Validate not JSON: %v", err)
	}
	if err := schemas.Validate("run-context", []byte(`[]`)); !errors.Is(err, schemas.ErrInvalid) {
		t.Errorf("Validate array: %v", err)
	}
}

func ExampleValidate() {
	err := schemas.Validate("invoke-agent", []byte(`{"request_id":"req_1","mode":"fast"}`))
	var ve *schemas.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			fmt.Println(p)
		}
	}
	// Output:
	// (document): missing properties 'tenant_id', 'user', 'agent', 'context_pack_refs', 'input', 'runtime', 'trace'
	// /mode: value must be one of 'stream', 'batch', 'long_running'
}

// Problems carry the failing keyword as their code; a document that is
// not JSON has CodeSyntax and wraps the parser's error.
func TestValidateCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		doc  string
		code schemas.Code
		path string
	}{
		{"not JSON", `{"run_id":`, schemas.CodeSyntax, ""},
		{"missing member", `{}`, "required", ""},
		{"wrong type", `{"run_id": 1}`, "type", "/run_id"},
		{"not in the enum", `{"safety_mode": "root"}`, "enum", "/safety_mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := schemas.Validate("run-context.v1", []byte(tt.doc))
			var ve *schemas.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, schemas.ErrInvalid) || !ve.HasAt(tt.code, tt.path) {
				t.Fatalf("Validate = %v, want a %s problem at %q", err, tt.code, tt.path)
			}
			if wraps := len(ve.Unwrap()) > 0; wraps != (tt.code == schemas.CodeSyntax) {
				t.Errorf("causes = %v", ve.Unwrap())
			}
		})
	}
}

// A value the schema refuses is the caller's text: a key in it (a pack
// ref, a trace id that does not match its pattern) is not quoted in the
// problem's message.
func TestValidateQuotesNoKey(t *testing.T) {
	const key = "sk-live-0123456789abcdef"
	var doc map[string]any
	if err := json.Unmarshal(fixture.Invoke(), &doc); err != nil {
		t.Fatal(err)
	}
	doc["context_pack_refs"] = []any{"ctxpack.support@1.0.0", key}
	doc["trace"].(map[string]any)["trace_id"] = key + "XYZ"
	bad, _ := json.Marshal(doc)
	err := schemas.Validate("invoke-agent.v1.schema.json", bad)
	var ve *schemas.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) < 2 {
		t.Fatalf("Validate = %v, want two problems", err)
	}
	if bytes.Contains([]byte(err.Error()), []byte(key)) {
		t.Errorf("the problems quote the key: %v", err)
	}
}
