package planner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// The schema cache gives each caller its own copy, stays within its
// bound, leaves out schemas over the size bound, and is safe for
// concurrent use (run with -race).
func TestSchemaCache(t *testing.T) {
	var c schemaCache
	calls := 0
	rewrite := func(b []byte) json.RawMessage { calls++; return rewriteSchema(b) }
	schema := []byte(`{"$id":"x","type":"object","properties":{"a":{"type":"string"}}}`)
	want := `{"properties":{"a":{"type":"string"}},"type":"object"}`
	first := c.rewrite(schema, rewrite)
	first[0] = 'X' // the caller's own copy
	if got := c.rewrite(schema, rewrite); string(got) != want || calls != 1 {
		t.Errorf("cached rewrite = %s after %d rewrites, want %s after 1", got, calls, want)
	}
	big := []byte(`{"description":"` + strings.Repeat("d", maxCachedSchemaBytes) + `"}`)
	c.rewrite(big, rewrite)
	c.rewrite(big, rewrite)
	if calls != 3 {
		t.Errorf("a schema over the size bound was rewritten %d times for 2 turns, want 2 (not cached)", calls-1)
	}
	for i := range 3 * maxCachedSchemas {
		c.rewrite(fmt.Appendf(nil, `{"title":"s%d"}`, i), rewriteSchema)
		if n := c.len(); n > maxCachedSchemas {
			t.Fatalf("the cache holds %d schemas, bound %d", n, maxCachedSchemas)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				s := fmt.Appendf(nil, `{"$schema":"y","title":"g%d-%d"}`, g, i%50)
				if got := c.rewrite(s, rewriteSchema); !bytes.Equal(got, rewriteSchema(s)) {
					t.Errorf("concurrent rewrite of %s = %s", s, got)
					return
				}
			}
		})
	}
	wg.Wait()
}
