package schemas_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/contextos/schemas"
	"github.com/contextos/contextos/schemas/internal/build"
)

// deviation is one member of a seed example that our published schema
// refuses, and why: the schema is right and the seed's example is
// abbreviated (see docs/conformance.md, which lists these).
type deviation struct {
	// member is the JSON pointer of the refused member, in the document
	// validated; a "*" segment stands for every index of an array.
	member string
	// rule is what refuses it: required, pattern, additionalProperties,
	// enum, or json (the example is not JSON at all).
	rule string
	why  string
}

// seedExamples are every JSON example of seeds 000, 001 and 003, copied
// into testdata/seeds (testdata/seeds/README.md says where each came
// from). Each is a document of one published schema (or of one of its
// definitions) and validates, except for exactly the members in fail;
// the few that are no contract document name why in none.
var seedExamples = []struct {
	file string
	// schema is the schema (with a fragment for a definition) the example
	// is a document of.
	schema string
	// member, when set, is the JSON pointer of the example's one member
	// that is validated (the example is a fragment of an envelope).
	member string
	fail   []deviation
	// none says why no published schema applies (schema is "").
	none string
}{
	{file: "000-run-context.json", schema: "run-context.v1", fail: []deviation{
		{"/agent/identity_claim/iss", "required", "upstream IdentityClaim requires iss; the seed's claim is abbreviated"},
		{"/agent/identity_claim/principal_chain", "required", "upstream IdentityClaim requires principal_chain"},
		{"/agent/identity_claim/nbf", "required", "upstream IdentityClaim requires nbf"},
		{"/agent/identity_claim/exp", "required", "upstream IdentityClaim requires exp"},
		{"/agent/identity_claim/claim_hash", "pattern", `the seed elides the digest ("sha256:..."); ours are sha256 and 64 hex digits (DESIGN wire rules)`},
	}},
	{file: "000-invoke-agent-builder.json", schema: "invoke-agent.v1", fail: []deviation{
		{"/agent/agent_urn", "required", `the live builder's output omits it; seed 000's own field reference marks agent.agent_urn "yes"`},
	}},
	{file: "000-invoke-agent.json", schema: "invoke-agent.v1", fail: []deviation{
		{"/agent/identity_claim/version", "required", "upstream IdentityClaim requires version (ctxid/1); the seed's claim is abbreviated"},
		{"/agent/identity_claim/iss", "required", "upstream IdentityClaim requires iss"},
		{"/agent/identity_claim/principal_chain", "required", "upstream IdentityClaim requires principal_chain"},
		{"/agent/identity_claim/nbf", "required", "upstream IdentityClaim requires nbf"},
		{"/agent/identity_claim/exp", "required", "upstream IdentityClaim requires exp"},
		{"/agent/identity_claim/kid", "required", "upstream IdentityClaim requires kid"},
		{"/agent/identity_claim/claim_hash", "pattern", `the seed elides the digest ("sha256:...")`},
	}},
	{file: "000-tool-call-envelope.json", schema: "tool-envelope.v1"},
	{file: "000-tool-result-envelope.verbatim.txt", schema: "tool-envelope.v1", fail: []deviation{
		{"", "json", "the seed's example has a trailing comma after metadata; without it (000-tool-result-envelope.json) it validates"},
	}},
	{file: "000-tool-result-envelope.json", schema: "tool-envelope.v1"},
	{file: "000-decision-record.json", schema: "decision-record.v1"},
	{file: "000-trace-context.json", none: "W3C trace context headers as the runtime keeps them for replay; no published schema has a trace_context document (the invoke envelope carries them as trace, InvokeTrace)"},
	{file: "000-context-pack-refs.json", schema: "invoke-agent.v1#/properties/context_pack_refs", member: "/context_pack_refs"},
	{file: "000-compiled-context.json", schema: "compiled-context.v1", fail: []deviation{
		{"/context_ledger/compiled_context_hash", "pattern", `the seed elides the digest ("sha256:9f0b...")`},
	}},
	{file: "000-decision-output.json", none: "a decision output snippet of the Decision Catalog (decision_id, outcome, evidence_refs); no published schema describes it"},
	{file: "003-contract-meta.json", schema: "context-pack.v2#/$defs/ContractMeta"},
	{file: "003-pack-meta.json", schema: "context-pack.v2#/$defs/PackMeta"},
	{file: "003-intelligence-refs.json", schema: "context-pack.v2#/$defs/IntelligenceRefs"},
	{file: "003-business-context.json", schema: "context-pack.v2#/$defs/BusinessContext"},
	{file: "003-policy-layer.json", schema: "context-pack.v2#/$defs/PolicyLayer"},
	{file: "003-tooling-layer.json", schema: "context-pack.v2#/$defs/ToolingLayer"},
	{file: "003-decision-layer.json", schema: "context-pack.v2#/$defs/DecisionLayer"},
	{file: "003-memory-layer.json", schema: "context-pack.v2#/$defs/MemoryLayer"},
	{file: "003-evaluation-layer.json", schema: "context-pack.v2#/$defs/EvaluationLayer"},
	{file: "003-tone-and-comms.json", schema: "context-pack.v2#/$defs/ToneAndComms"},
	{file: "003-compiled-context.json", schema: "compiled-context.v1", fail: []deviation{
		{"/context_ledger", "required", "upstream CompiledContext requires context_ledger; the seed shows the compiler's output without it"},
		{"/compiled_prompt/context_blocks/*/content", "required", "upstream ContextBlock requires content; the seed lists the blocks without it"},
	}},
	{file: "003-context-pack.json", schema: "context-pack.v2"},
}

// TestSeedExamples validates every example of the seeds against its
// schema: each either validates or is refused at exactly its listed
// members, for exactly its listed rules.
func TestSeedExamples(t *testing.T) {
	t.Parallel()
	listed := map[string]bool{"README.md": true}
	for _, ex := range seedExamples {
		listed[ex.file] = true
		t.Run(ex.file, func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(filepath.Join("testdata", "seeds", ex.file))
			if err != nil {
				t.Fatal(err)
			}
			if ex.schema == "" {
				if ex.none == "" || !json.Valid(b) {
					t.Fatal("an example without a schema says why, and is JSON")
				}
				return
			}
			if ex.member != "" {
				var doc map[string]json.RawMessage
				if err := json.Unmarshal(b, &doc); err != nil {
					t.Fatal(err)
				}
				b = doc[strings.TrimPrefix(ex.member, "/")]
				if b == nil {
					t.Fatalf("the example has no %s", ex.member)
				}
			}
			err = schemas.Validate(ex.schema, b)
			if len(ex.fail) == 0 {
				if err != nil {
					t.Fatalf("the seed's example does not validate: %v", err)
				}
				return
			}
			var ve *schemas.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate = %v, want it refused at %v", err, ex.fail)
			}
			checkDeviations(t, ve, ex.fail)
		})
	}
	// Every file in testdata/seeds is in the table.
	entries, err := os.ReadDir(filepath.Join("testdata", "seeds"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !listed[e.Name()] {
			t.Errorf("testdata/seeds/%s is not in seedExamples", e.Name())
		}
	}
}

// checkDeviations requires the problems to be exactly the deviations (see
// mismatches).
func checkDeviations(t *testing.T, ve *schemas.ValidationError, want []deviation) {
	t.Helper()
	if bad := mismatches(ve, want); len(bad) > 0 {
		t.Errorf("%s\nproblems: %v", strings.Join(bad, "\n"), ve)
	}
}

// mismatches lists how the problems differ from the deviations: each
// problem must be one listed member refused by its listed rule, and each
// listed member must be refused.
func mismatches(ve *schemas.ValidationError, want []deviation) []string {
	var out []string
	hit := make([]bool, len(want))
	for _, g := range refusals(ve) {
		i := slices.IndexFunc(want, func(d deviation) bool { return d.rule == g.rule && memberMatch(d.member, g.member) })
		if i < 0 {
			out = append(out, fmt.Sprintf("refused at %q (%s), which is not a listed deviation", g.member, g.rule))
			continue
		}
		hit[i] = true
	}
	for i, d := range want {
		if !hit[i] {
			out = append(out, fmt.Sprintf("listed deviation %q (%s) is not refused: %s", d.member, d.rule, d.why))
		}
	}
	return out
}

type refusal struct{ member, rule string }

var (
	missingRe    = regexp.MustCompile(`^missing propert(?:y|ies) (.+)$`)
	additionalRe = regexp.MustCompile(`^additional propert(?:y|ies) (.+) not allowed$`)
	quotedRe     = regexp.MustCompile(`'([^']*)'`)
)

// refusals turns a validation error into the members it refuses: a
// missing (or additional) property is the member it names under the
// problem's pointer; any other problem is its pointer's member.
func refusals(ve *schemas.ValidationError) []refusal {
	var out []refusal
	for _, p := range ve.Problems {
		switch {
		case p.Message == "not a JSON document":
			out = append(out, refusal{p.Path, "json"})
		case missingRe.MatchString(p.Message):
			for _, m := range quotedRe.FindAllStringSubmatch(missingRe.FindStringSubmatch(p.Message)[1], -1) {
				out = append(out, refusal{p.Path + "/" + m[1], "required"})
			}
		case additionalRe.MatchString(p.Message):
			for _, m := range quotedRe.FindAllStringSubmatch(additionalRe.FindStringSubmatch(p.Message)[1], -1) {
				out = append(out, refusal{p.Path + "/" + m[1], "additionalProperties"})
			}
		case strings.Contains(p.Message, "does not match pattern"):
			out = append(out, refusal{p.Path, "pattern"})
		case strings.HasPrefix(p.Message, "value must be one of"):
			out = append(out, refusal{p.Path, "enum"})
		default:
			out = append(out, refusal{p.Path, "other: " + p.Message})
		}
	}
	return out
}

// memberMatch matches a member pointer against a listed one, where a "*"
// segment matches an array index.
func memberMatch(pattern, member string) bool {
	ps, ms := strings.Split(pattern, "/"), strings.Split(member, "/")
	if len(ps) != len(ms) {
		return false
	}
	for i := range ps {
		if ps[i] == "*" && ms[i] != "" && strings.Trim(ms[i], "0123456789") == "" {
			continue
		}
		if ps[i] != ms[i] {
			return false
		}
	}
	return true
}

// The deviation matcher is exact: a problem that is not listed, and a
// listed member that is not refused, both fail.
func TestCheckDeviationsIsExact(t *testing.T) {
	ve := &schemas.ValidationError{Problems: []schemas.Problem{
		{Path: "/a", Message: "missing properties 'x', 'y'"},
		{Path: "/b/0", Message: "missing property 'content'"},
		{Path: "/b/1", Message: "missing property 'content'"},
		{Path: "/h", Message: "'sha256:...' does not match pattern '^sha256:[0-9a-f]{64}$'"},
		{Path: "/c", Message: "additional properties 'z' not allowed"},
	}}
	all := []deviation{{"/a/x", "required", ""}, {"/a/y", "required", ""}, {"/b/*/content", "required", ""}, {"/h", "pattern", ""}, {"/c/z", "additionalProperties", ""}}
	for name, tc := range map[string]struct {
		want []deviation
		ok   bool
	}{
		"exact":        {all, true},
		"one unlisted": {all[1:], false},
		"one extra":    {append(slices.Clone(all), deviation{"/d", "required", ""}), false},
		"wrong rule":   {append(slices.Clone(all[:3]), deviation{"/h", "required", ""}, all[4]), false},
		"not an index": {append([]deviation{{"/a/*", "required", ""}}, all[2:]...), false},
	} {
		if bad := mismatches(ve, tc.want); (len(bad) == 0) != tc.ok {
			t.Errorf("%s: mismatches %q", name, bad)
		}
	}
}

// The seed's ToolResultEnvelope is not JSON as published: its only fault
// is the trailing comma after metadata, which the repaired copy drops.
func TestSeedToolResultEnvelopeRepair(t *testing.T) {
	verbatim, err := os.ReadFile(filepath.Join("testdata", "seeds", "000-tool-result-envelope.verbatim.txt"))
	if err != nil {
		t.Fatal(err)
	}
	repaired, err := os.ReadFile(filepath.Join("testdata", "seeds", "000-tool-result-envelope.json"))
	if err != nil {
		t.Fatal(err)
	}
	if json.Valid(verbatim) || bytes.Count(verbatim, []byte("},\n}")) != 1 {
		t.Fatal("the verbatim copy should be invalid JSON by one trailing comma")
	}
	if want := bytes.Replace(verbatim, []byte("},\n}"), []byte("}\n}"), 1); !bytes.Equal(want, repaired) {
		t.Error("the repaired copy differs from the verbatim one by more than the trailing comma")
	}
}

// decision-record.v1 publishes the replay member of seed 001 and the
// relaxed required lists; seed 000's record with a replay handle added
// validates, and the record stays closed.
func TestDecisionRecordReplayMember(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "seeds", "000-decision-record.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	hash := "sha256:" + strings.Repeat("a", 64)
	rec["replay"] = map[string]any{"replay_packet_id": "rp_1", "compiled_context_hash": hash, "tool_transcript_chain_hash": hash, "record_hash": hash}
	rec["lineage"].(map[string]any)["replay_packet_id"] = "rp_1"
	with, _ := json.Marshal(rec)
	if err := schemas.Validate("decision-record", with); err != nil {
		t.Errorf("seed 000's record with a replay handle: %v", err)
	}
	for name, edit := range map[string]func(m map[string]any){
		"an unknown replay member": func(m map[string]any) { m["replay"].(map[string]any)["packet"] = "rp_1" },
		"a replay without compiled_context_hash": func(m map[string]any) {
			delete(m["replay"].(map[string]any), "compiled_context_hash")
		},
		"an unknown record member": func(m map[string]any) { m["replay_handle"] = "rp_1" },
	} {
		var c map[string]any
		json.Unmarshal(with, &c)
		edit(c)
		bad, _ := json.Marshal(c)
		if err := schemas.Validate("decision-record", bad); !errors.Is(err, schemas.ErrInvalid) {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
	doc, _ := schemas.File("decision-record.v1")
	var s struct {
		Required []string `json:"required"`
		Defs     map[string]struct {
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(doc, &s); err != nil {
		t.Fatal(err)
	}
	replay := s.Defs["Replay"]
	for _, m := range []string{"replay_packet_id", "compiled_context_hash", "tool_transcript_chain_hash", "record_hash"} {
		if replay.Properties[m] == nil {
			t.Errorf("$defs/Replay has no %s", m)
		}
	}
	for _, relaxed := range []string{"run_id", "tenant_id"} {
		if slices.Contains(s.Required, relaxed) {
			t.Errorf("decision-record.v1 requires %s, which seed 000's record lacks", relaxed)
		}
	}
	if slices.Contains(s.Defs["Lineage"].Required, "compiled_context_hash") {
		t.Error("decision-record.v1 requires lineage.compiled_context_hash, which seed 000's record lacks")
	}
}

// compiled-context.v1 requires of a context ledger exactly what seed 000's
// ledger carries.
func TestContextLedgerRequired(t *testing.T) {
	doc, _ := schemas.File("compiled-context.v1")
	var s struct {
		Defs map[string]struct {
			Required []string `json:"required"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(doc, &s); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join("testdata", "seeds", "000-compiled-context.json"))
	var ex struct {
		Ledger map[string]any `json:"context_ledger"`
	}
	if err := json.Unmarshal(b, &ex); err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(slices.Values(s.Defs["ContextLedger"].Required))
	want := make([]string, 0, len(ex.Ledger))
	for k := range ex.Ledger {
		want = append(want, k)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) || !slices.Equal(slices.Sorted(slices.Values(build.LedgerRequired)), want) {
		t.Errorf("ContextLedger requires %v, seed 000's ledger has %v", got, want)
	}
}

func ExampleValidate_definition() {
	err := schemas.Validate("context-pack.v2#/$defs/PackMeta", []byte(`{"pack_id":"ctxpack.support","pack_version":"1.0"}`))
	var ve *schemas.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			fmt.Println(p)
		}
	}
	// Output:
	// (document): missing properties 'tenant', 'environment_defaults', 'ttl_seconds', 'data_classification'
	// /pack_version: '1.0' does not match pattern '^[0-9]+\\.[0-9]+\\.[0-9]+$'
}

// A fragment that points at no subschema is an unknown schema; fragments
// compile once and are safe to validate against concurrently.
func TestValidateFragments(t *testing.T) {
	for _, name := range []string{"context-pack.v2#/$defs/Nope", "context-pack.v2#PackMeta", "context-pack.v2#/properties/nope", "nope.v1#/$defs/PackMeta"} {
		if err := schemas.Validate(name, []byte(`{}`)); !errors.Is(err, schemas.ErrUnknownSchema) {
			t.Errorf("Validate(%q) = %v, want ErrUnknownSchema", name, err)
		}
	}
	b, _ := os.ReadFile(filepath.Join("testdata", "seeds", "003-pack-meta.json"))
	errs := make(chan error, 8)
	for range 8 {
		go func() { errs <- schemas.Validate("context-pack.v2.schema.json#/$defs/PackMeta", b) }()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	var ve *schemas.ValidationError
	if err := schemas.Validate("context-pack.v2#/$defs/PackMeta", []byte(`{}`)); !errors.As(err, &ve) || !strings.HasPrefix(err.Error(), "schemas: document does not conform to context-pack.v2.schema.json#/$defs/PackMeta:") {
		t.Errorf("Validate = %v, want a *ValidationError naming the definition", err)
	}
}
