package canon

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzJSON: canonicalization never panics, accepts exactly what
// encoding/json accepts as one value (less non-finite numbers), is
// idempotent, and produces valid JSON equal in meaning to its input.
func FuzzJSON(f *testing.F) {
	seeds := []string{`{"b":1,"a":[true,null,"x"]}`, `1E30`, `"\u20ac\u000f"`, `{"\ud83d\ude00":1,"\ufb33":2}`, `-0`, `[]`, `{"a":{"b":{"c":0.000001}}}`}
	if b, err := os.ReadFile(filepath.Join("testdata", "vector.input.json")); err == nil {
		seeds = append(seeds, string(b))
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := JSON(json.RawMessage(in))
		if err != nil {
			return
		}
		if !json.Valid(c) {
			t.Fatalf("canonical output is not valid JSON: %q", c)
		}
		again, err := JSON(json.RawMessage(c))
		if err != nil {
			t.Fatalf("canonical output does not re-canonicalize: %v", err)
		}
		if !bytes.Equal(c, again) {
			t.Fatalf("not idempotent:\n%s\n%s", c, again)
		}
		var a, b any
		if json.Unmarshal(in, &a) != nil || json.Unmarshal(c, &b) != nil {
			t.Fatalf("input or output does not decode")
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("meaning changed:\n%s\n%s", in, c)
		}
	})
}
