package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// refundSchemaAs registers issue_refund with schema (nil: none).
func refundSchemaAs(schema string) fixtureOption {
	return func(_ *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, caps map[string]gateway.Capability) {
		c := caps["adp_payments.issue_refund"]
		c.ArgsSchema = nil
		if schema != "" {
			c.ArgsSchema = json.RawMessage(schema)
		}
		caps["adp_payments.issue_refund"] = c
	}
}

// keyConstraint replaces the permission's arg_constraints.idempotency_key.
func keyConstraint(c map[string]any) fixtureOption {
	return func(f *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		f.editPack = func(p *pack.Pack) {
			for i := range p.ToolingLayer.Permissions {
				q := &p.ToolingLayer.Permissions[i]
				if q.Capability != "issue_refund" {
					continue
				}
				q.ArgConstraints["idempotency_key"] = c
			}
		}
	}
}

const refundProps = `"properties":{"order_id":{"type":"string"},"amount_inr":{"type":"number"},"currency":{"enum":["INR"]}}`

// A write's derived key is always on the envelope and the adapter's call;
// it is injected as args.idempotency_key only when the capability's schema
// declares that argument, or when the permission names it and the schema
// admits members it does not declare. A strict schema that does not
// declare it (the default of MCP go-sdk servers) gets a call without it,
// and the call runs instead of being refused for the gateway's own
// argument. The permission's constraints on idempotency_key hold either
// way, against the key the call carries.
func TestIdempotencyKeyArgument(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		schema   string
		named    map[string]any // the permission's idempotency_key constraint (a valid pack names it on every write)
		injected bool
		refused  string // a problem the call is refused with ("" when it runs)
	}{
		{name: "strict schema declaring it", schema: `{"type":"object",` + refundProps[:len(refundProps)-1] + `,"idempotency_key":{"type":"string"}},"additionalProperties":false}`, named: map[string]any{"required": true}, injected: true},
		{name: "strict schema not declaring it (additionalProperties false)", schema: `{"type":"object",` + refundProps + `,"additionalProperties":false}`, named: map[string]any{"required": true}},
		{name: "strict schema not declaring it (unevaluatedProperties false)", schema: `{"type":"object",` + refundProps + `,"unevaluatedProperties":false}`, named: map[string]any{"required": true}},
		{name: "additionalProperties a schema the key may not meet", schema: `{"type":"object",` + refundProps + `,"additionalProperties":{"type":"number"}}`, named: map[string]any{"required": true}},
		{name: "strict schema through $ref", schema: `{"$ref":"#/$defs/a","$defs":{"a":{"type":"object",` + refundProps + `,"additionalProperties":false}}}`, named: map[string]any{"required": true}},
		{name: "declared in allOf", schema: `{"allOf":[{"type":"object",` + refundProps + `},{"properties":{"idempotency_key":{"type":"string"}}}],"unevaluatedProperties":false}`, named: map[string]any{"required": true}, injected: true},
		{name: "open schema, named", schema: `{"type":"object",` + refundProps + `}`, named: map[string]any{"required": true}, injected: true},
		{name: "no schema, named", named: map[string]any{"required": true}, injected: true},
		{name: "strict schema, the constraint's pattern checked against the envelope key", schema: `{"type":"object",` + refundProps + `,"additionalProperties":false}`,
			named: map[string]any{"required": true, "pattern": "^nope_"}, refused: "idempotency_key does not match the pattern ^nope_"},
		{name: "strict schema, the constraint's pattern met by the envelope key", schema: `{"type":"object",` + refundProps + `,"additionalProperties":false}`,
			named: map[string]any{"required": true, "pattern": "^ik_"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, lowValue, refundSchemaAs(tc.schema), keyConstraint(tc.named))
			res, err := f.run.Call(ctx, refundCall(1200))
			if err != nil {
				t.Fatal(err)
			}
			if tc.refused != "" {
				if res.Status != gateway.StatusRejected || res.Error == nil || !strings.Contains(res.Error.Message, tc.refused) || f.payments.CallCount("issue_refund") != 0 {
					t.Fatalf("%s %+v, want refused with %q", res.Status, res.Error, tc.refused)
				}
				return
			}
			if res.Status != gateway.StatusCompleted {
				t.Fatalf("%s %+v", res.Status, res.Error)
			}
			key := res.Metadata.IdempotencyKey
			call := f.payments.Calls()[0]
			if !strings.HasPrefix(key, "ik_") || call.IdempotencyKey != key || call.Envelope.IdempotencyKey == nil || *call.Envelope.IdempotencyKey != key {
				t.Fatalf("key %q; call %q, envelope %v", key, call.IdempotencyKey, call.Envelope.IdempotencyKey)
			}
			got, has := call.Envelope.Args["idempotency_key"]
			if has != tc.injected || has && got != key {
				t.Errorf("args %v: injected %v, want %v", call.Envelope.Args, has, tc.injected)
			}
			// A retry within the run is deduplicated the same way.
			again, err := f.run.Call(ctx, refundCall(1200))
			if err != nil || !again.Metadata.Duplicate || again.Metadata.IdempotencyKey != key || f.payments.CallCount("issue_refund") != 1 {
				t.Errorf("retry: duplicate %v key %s (%v), adapter ran %d times", again.Metadata.Duplicate, again.Metadata.IdempotencyKey, err, f.payments.CallCount("issue_refund"))
			}
		})
	}
}
