package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/internal/canon"
)

// reporter is an adapter that reports its protocol.
type reporter struct {
	gateway.Adapter
	protocol, version string
}

func (r reporter) Protocol() (string, string) { return r.protocol, r.version }

func digestOf(t *testing.T, schema string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(schema), &v); err != nil {
		t.Fatal(err)
	}
	d, err := canon.Digest(v)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Every call envelope carries the capability's arg_schema_ref and the
// adapter's protocol and contract version in its metadata (seed 000
// ToolCallEnvelope), deterministically.
func TestCallEnvelopeMetadata(t *testing.T) {
	t.Parallel()
	lookupDigest := digestOf(t, string(lookupSchema))
	ok := func() *gatewaytest.ScriptedAdapter {
		a := gatewaytest.NewScriptedAdapter()
		a.On("lookup").ReturnOutput(map[string]any{"order_id": "ord_881"})
		return a
	}
	cases := []struct {
		name string
		reg  func(a gateway.Adapter) gateway.Registration
		opts gateway.Options
		want map[string]any
	}{
		{"in process: the schema's digest", func(a gateway.Adapter) gateway.Registration {
			return gateway.Registration{AdapterID: "adp_orders", Adapter: a, Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: lookupSchema}}}
		}, gateway.Options{}, map[string]any{"arg_schema_ref": lookupDigest, "protocol": "in-process", "version": "contextos.tool_call.v1"}},
		{"the digest is of the canonical form (key order and spacing do not matter)", func(a gateway.Adapter) gateway.Registration {
			s := `{ "additionalProperties": false, "properties": {"order_id": {"type": "string"}}, "required": ["order_id"], "type": "object" }`
			return gateway.Registration{AdapterID: "adp_orders", Adapter: a, Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: json.RawMessage(s)}}}
		}, gateway.Options{}, map[string]any{"arg_schema_ref": lookupDigest, "protocol": "in-process", "version": "contextos.tool_call.v1"}},
		{"no schema: any object", func(a gateway.Adapter) gateway.Registration {
			return gateway.Registration{AdapterID: "adp_orders", Adapter: a, Capabilities: map[string]gateway.Capability{"lookup": {}}}
		}, gateway.Options{}, map[string]any{"arg_schema_ref": digestOf(t, `{"type":"object"}`), "protocol": "in-process", "version": "contextos.tool_call.v1"}},
		{"the schema's $id", func(a gateway.Adapter) gateway.Registration {
			s := `{"$id":"schema://adp_orders.lookup.v2","type":"object"}`
			return gateway.Registration{AdapterID: "adp_orders", Adapter: a, Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: json.RawMessage(s)}}}
		}, gateway.Options{}, map[string]any{"arg_schema_ref": "schema://adp_orders.lookup.v2", "protocol": "in-process", "version": "contextos.tool_call.v1"}},
		{"a declared ref wins", func(a gateway.Adapter) gateway.Registration {
			s := `{"$id":"schema://adp_orders.lookup.v2","type":"object"}`
			return gateway.Registration{AdapterID: "adp_orders", Adapter: a, Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: json.RawMessage(s), ArgSchemaRef: "schema://orders.lookup.v3"}}}
		}, gateway.Options{}, map[string]any{"arg_schema_ref": "schema://orders.lookup.v3", "protocol": "in-process", "version": "contextos.tool_call.v1"}},
		{"the adapter reports its protocol", func(a gateway.Adapter) gateway.Registration {
			return gateway.Registration{AdapterID: "adp_orders", Adapter: reporter{a, "grpc", "v1"}, Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: lookupSchema}}}
		}, gateway.Options{}, map[string]any{"arg_schema_ref": lookupDigest, "protocol": "grpc", "version": "v1"}},
		{"a reported protocol without a version", func(a gateway.Adapter) gateway.Registration {
			return gateway.Registration{AdapterID: "adp_orders", Adapter: reporter{a, "mcp", ""}, Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: lookupSchema}}}
		}, gateway.Options{}, map[string]any{"arg_schema_ref": lookupDigest, "protocol": "mcp"}},
		{"the registration's protocol wins", func(a gateway.Adapter) gateway.Registration {
			return gateway.Registration{AdapterID: "adp_orders", Adapter: reporter{a, "grpc", "v1"}, Protocol: "openapi", Version: "2026-04-15",
				Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: lookupSchema}}}
		}, gateway.Options{}, map[string]any{"arg_schema_ref": lookupDigest, "protocol": "openapi", "version": "2026-04-15"}},
		{"a stand-in keeps the original's protocol", func(a gateway.Adapter) gateway.Registration {
			reg := gateway.Registration{AdapterID: "adp_orders", Adapter: reporter{a, "http", "v1"}, Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: lookupSchema}}}
			return reg.WithAdapter(a)
		}, gateway.Options{}, map[string]any{"arg_schema_ref": lookupDigest, "protocol": "http", "version": "v1"}},
		{"left out for a replay of an older recording", func(a gateway.Adapter) gateway.Registration {
			return gateway.Registration{AdapterID: "adp_orders", Adapter: a, Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: lookupSchema}}}
		}, gateway.Options{OmitContractMetadata: true}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, lowValue)
			// Twice, on two gateways: the same metadata each time.
			for range 2 {
				rec := &gatewaytest.Recorder{}
				opts := tc.opts
				opts.Transcript = canonChecked{t, rec}
				gw, err := gateway.New([]gateway.Registration{tc.reg(ok())}, &opts)
				if err != nil {
					t.Fatal(err)
				}
				res, err := rebind(t, f, gw).Call(ctx, lookupCall())
				if err != nil || !res.Status.Succeeded() {
					t.Fatalf("Call = %+v, %v", res, err)
				}
				calls := rec.Calls()
				if len(calls) != 1 {
					t.Fatalf("%d calls recorded", len(calls))
				}
				if diff := cmp.Diff(tc.want, calls[0].Metadata); diff != "" {
					t.Errorf("metadata (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// The approval gate a permission requires stays in the metadata beside the
// contract members.
func TestCallEnvelopeMetadataKeepsTheGate(t *testing.T) {
	f := newFixture(t, lowValue)
	if _, err := f.run.Call(ctx, refundCall(1200)); err != nil {
		t.Fatal(err)
	}
	calls := f.recorder.Calls()
	got := calls[len(calls)-1].Metadata
	want := map[string]any{"arg_schema_ref": digestOf(t, string(refundSchema)), "protocol": "in-process", "version": "contextos.tool_call.v1",
		"requires_approval_gate": "GATE_FINANCE_APPROVAL"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
}

func TestArgSchemaThatIsNotJSONIsAConfigError(t *testing.T) {
	a := gatewaytest.NewScriptedAdapter()
	_, err := gateway.New([]gateway.Registration{{AdapterID: "adp_orders", Adapter: a,
		Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: json.RawMessage(`{"type":`)}}}}, nil)
	if !errors.Is(err, gateway.ErrConfig) {
		t.Fatalf("New = %v, want ErrConfig", err)
	}
}

// A schema's "$id" comes from wherever the schema does (an MCP server's
// tool list): it is the arg_schema_ref only when it is a short URI with no
// credentials, query or sensitive data; otherwise the schema's digest is.
func TestArgSchemaRefTakesOnlyASafeID(t *testing.T) {
	t.Parallel()
	const tok = "tok_mcp_8c7b6a5f4e3d2c1b"
	cases := []struct {
		name, id string
		kept     bool
	}{
		{"a schema URL", "https://schemas.example.com/orders/lookup.v2.json", true},
		{"a urn", "urn:contextos:schema:orders.lookup:2", true},
		{"an empty fragment", "schema://orders.lookup.v2#", true},
		{"exactly the bound", "urn:x:" + strings.Repeat("a", 256-6), true},
		{"past the bound", "urn:x:" + strings.Repeat("a", 256-5), false},
		{"unbounded, with a token", "urn:leak:" + tok + ":" + strings.Repeat("A", 100000), false},
		{"user info", "https://u:" + tok + "@schemas.example.com/lookup.json", false},
		{"an @ in an opaque uri", "urn:" + tok + "@x", false},
		{"a query", "https://schemas.example.com/lookup.json?token=" + tok, false},
		{"an empty query", "https://schemas.example.com/lookup.json?", false},
		{"a card number", "urn:card:4111111111111111", false},
		{"an API key", "urn:key:AKIAIOSFODNN7EXAMPLE", false},
		{"a space", "urn:a b", false},
		{"non-ASCII", "urn:schéma", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			doc := map[string]any{"$id": tc.id, "type": "object"}
			schema, _ := json.Marshal(doc)
			a := gatewaytest.NewScriptedAdapter()
			a.On("lookup").ReturnOutput(map[string]any{"order_id": "ord_881"})
			rec := &gatewaytest.Recorder{}
			f := newFixture(t, lowValue)
			gw, err := gateway.New([]gateway.Registration{{AdapterID: "adp_orders", Adapter: a, Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: schema}}}},
				&gateway.Options{Transcript: canonChecked{t, rec}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rebind(t, f, gw).Call(ctx, lookupCall()); err != nil {
				t.Fatal(err)
			}
			want := tc.id
			if !tc.kept {
				want = digestOf(t, string(schema))
			}
			if got := rec.Calls()[0].Metadata["arg_schema_ref"]; got != want {
				t.Errorf("arg_schema_ref = %.80q, want %.80q", got, want)
			}
		})
	}
}

// A host's declared arg_schema_ref, protocol or version that could not be
// recorded safely is a configuration error naming the rule, never the
// value; one an adapter reports likewise.
func TestUnsafeContractMetadataIsAConfigError(t *testing.T) {
	t.Parallel()
	const tok = "tok_mcp_8c7b6a5f4e3d2c1b"
	a := gatewaytest.NewScriptedAdapter()
	cases := []struct {
		name string
		reg  gateway.Registration
		says string
	}{
		{"a declared ref with a query", gateway.Registration{AdapterID: "adp_orders", Adapter: a,
			Capabilities: map[string]gateway.Capability{"lookup": {ArgSchemaRef: "https://x.example/s?k=" + tok}}}, "arg_schema_ref carries a query"},
		{"a declared ref past the bound", gateway.Registration{AdapterID: "adp_orders", Adapter: a,
			Capabilities: map[string]gateway.Capability{"lookup": {ArgSchemaRef: "urn:" + tok + strings.Repeat("x", 300)}}}, "longer than 256"},
		{"a protocol with a space", gateway.Registration{AdapterID: "adp_orders", Adapter: a, Protocol: "http " + tok}, "protocol may hold only"},
		{"a long protocol", gateway.Registration{AdapterID: "adp_orders", Adapter: a, Protocol: strings.Repeat("p", 65)}, "protocol must be 1 to 64"},
		{"a version with a slash", gateway.Registration{AdapterID: "adp_orders", Adapter: a, Protocol: "http", Version: "v1/" + tok}, "version may hold only"},
		{"a reported version with a newline", gateway.Registration{AdapterID: "adp_orders", Adapter: reporter{a, "mcp", "2025-06-18\n" + tok}}, "version may hold only"},
		{"a reported protocol past the bound", gateway.Registration{AdapterID: "adp_orders", Adapter: reporter{a, strings.Repeat("m", 65) + tok, "v1"}}, "protocol must be"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := gateway.New([]gateway.Registration{tc.reg}, nil)
			if !errors.Is(err, gateway.ErrConfig) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("New = %v, want ErrConfig saying %q", err, tc.says)
			}
			if strings.Contains(err.Error(), tok) {
				t.Errorf("the error echoes the value: %v", err)
			}
		})
	}
}

// An argument schema the compiler rejects is a configuration error that
// does not quote the schema at length, nor anything sensitive in it.
func TestBadSchemaErrorIsBounded(t *testing.T) {
	schema, _ := json.Marshal(map[string]any{"$id": "urn:x:4111111111111111#frag" + strings.Repeat("A", 5000), "type": "object"})
	_, err := gateway.New([]gateway.Registration{{AdapterID: "adp_orders", Adapter: gatewaytest.NewScriptedAdapter(),
		Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: schema}}}}, nil)
	if !errors.Is(err, gateway.ErrConfig) {
		t.Fatalf("New = %v, want ErrConfig", err)
	}
	if msg := err.Error(); len(msg) > 600 || strings.Contains(msg, "4111111111111111") {
		t.Errorf("the error says %d bytes: %.200s", len(msg), msg)
	}
}

// metaWriter is an adapter that writes into its envelope's metadata.
type metaWriter struct{}

func (metaWriter) Call(_ context.Context, c *gateway.Call) (*gateway.Outcome, error) {
	c.Envelope.Metadata["note"] = "set by the attempt of " + c.Envelope.ToolCallID
	c.Envelope.Metadata[gateway.MetaArgSchemaRef] = "changed"
	return &gateway.Outcome{Output: map[string]any{"order_id": "ord_881", "status": "delivered"}}, nil
}

// Every call envelope owns its metadata: an adapter that writes into its
// envelope's metadata changes neither a later envelope of the capability
// nor what the transcript recorded, whose entry hashes stay those of the
// recorded envelopes; concurrent calls of one capability do not share a
// map (run with -race).
func TestEnvelopeMetadataIsPerCall(t *testing.T) {
	f := newFixture(t)
	rec := &gatewaytest.Recorder{}
	opts := f.opts
	opts.Transcript = canonChecked{t, rec}
	run := ordersRun(t, f, metaWriter{}, gateway.Capability{ArgsSchema: lookupSchema}, &opts)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := lookupCall()
			c.Step = gateway.StepID{Index: i + 1}
			if _, err := run.Call(ctx, c); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	want := map[string]any{"arg_schema_ref": digestOf(t, string(lookupSchema)), "protocol": "in-process", "version": "contextos.tool_call.v1"}
	calls := 0
	for _, e := range rec.Entries() {
		if e.Call == nil {
			continue
		}
		calls++
		if diff := cmp.Diff(want, e.Call.Metadata); diff != "" {
			t.Errorf("recorded envelope %s metadata (-want +got):\n%s", e.Call.ToolCallID, diff)
		}
		// The entry hash is the recorded envelope's, after the adapter ran.
		if h, err := canon.Digest(e.Call); err != nil || h != e.EntryHash {
			t.Errorf("entry %d: hash %s, the recorded envelope's %s (%v)", e.Seq, e.EntryHash, h, err)
		}
	}
	if calls != 8 {
		t.Errorf("%d calls recorded, want 8", calls)
	}
}

// metaEditingSink checks every call entry it is given (its metadata and
// entry hash, kept in seen) and then writes into its metadata.
type metaEditingSink struct {
	t    *testing.T
	seen *[]map[string]any
}

func (s metaEditingSink) Append(_ context.Context, e gateway.TranscriptEntry) error {
	if e.Call == nil {
		return nil
	}
	if h, err := canon.Digest(e.Call); err != nil || h != e.EntryHash {
		s.t.Errorf("entry %d: hash %s, the envelope's %s (%v)", e.Seq, e.EntryHash, h, err)
	}
	*s.seen = append(*s.seen, maps.Clone(e.Call.Metadata))
	e.Call.Metadata["note"] = "set by the sink"
	e.Call.Metadata[gateway.MetaProtocol] = "changed"
	return nil
}

// A gateway builds a capability's call metadata once and shares it
// across the runs bound to it: an adapter and a transcript sink that
// write into the metadata they are given in one run change no envelope
// of another run (nor its entry hash).
func TestEnvelopeMetadataIsPerCallAcrossRuns(t *testing.T) {
	f := newFixture(t)
	var seen []map[string]any
	opts := f.opts
	opts.Transcript = metaEditingSink{t, &seen}
	gw, err := gateway.New([]gateway.Registration{{AdapterID: "adp_orders", Adapter: metaWriter{}, Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: lookupSchema}}}}, &opts)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := rebind(t, f, gw).Call(ctx, lookupCall()); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]any{"arg_schema_ref": digestOf(t, string(lookupSchema)), "protocol": "in-process", "version": "contextos.tool_call.v1"}
	if len(seen) != 3 {
		t.Fatalf("%d call entries, want 3", len(seen))
	}
	for i, m := range seen {
		if diff := cmp.Diff(want, m); diff != "" {
			t.Errorf("run %d: recorded envelope metadata (-want +got):\n%s", i, diff)
		}
	}
}
