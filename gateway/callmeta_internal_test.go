package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextos/contextos/internal/sensitive"
)

// FuzzArgSchemaRef: whatever a schema's "$id" (it can come from an MCP
// server), the arg_schema_ref is at most maxArgSchemaRef bytes, holds
// nothing of the sensitive catalogue, no user info and no query, and is
// the $id itself or the schema's digest.
func FuzzArgSchemaRef(f *testing.F) {
	for _, s := range []string{"https://schemas.example.com/a.json", "urn:x:4111111111111111", "https://u:p@x/y", "https://x/y?token=abc",
		"schema://orders.lookup.v2#", strings.Repeat("A", 300), "urn:key:AKIAIOSFODNN7EXAMPLE", "", "a b", "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		schema, err := json.Marshal(map[string]any{"$id": id, "type": "object"})
		if err != nil {
			return
		}
		ref, err := argSchemaRef(&Capability{ArgsSchema: schema})
		if err != nil {
			t.Fatalf("argSchemaRef: %v", err)
		}
		if ref == id {
			if len(ref) > maxArgSchemaRef || strings.ContainsAny(ref, "@? \n") {
				t.Fatalf("the $id %q was taken", id)
			}
			if _, found := sensitive.Detect(ref, sensitive.All); found {
				t.Fatalf("the $id %q, holding sensitive data, was taken", id)
			}
			return
		}
		if !strings.HasPrefix(ref, "sha256:") || len(ref) > maxArgSchemaRef {
			t.Fatalf("ref %q is neither the $id nor a digest", ref)
		}
	})
}
