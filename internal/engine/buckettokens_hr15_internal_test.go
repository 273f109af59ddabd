package engine

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/contextos/contextos/runcontext"
)

// FuzzBucketTokensMatchesJSON: the hand-written bucket_tokens is the map
// encoding/json writes, byte for byte, whatever the bucket names (HTML
// characters, U+2028, invalid UTF-8, names sorting apart as bytes and as
// escaped text) and counts.
func FuzzBucketTokensMatchesJSON(f *testing.F) {
	f.Add("session", "a<&>\u2028\"", "\xff", -3, 7)
	f.Add("", "\x7f", "\xc3(", 1<<40, -1<<40)
	f.Add("é", "e\u0301", "\U0001F600", 0, 1)
	f.Fuzz(func(t *testing.T, a, b, c string, n, m int) {
		for _, mp := range []map[runcontext.Bucket]int{
			{runcontext.Bucket(a): n, runcontext.Bucket(b): m, runcontext.Bucket(c): n - m},
			{runcontext.Bucket(a + b): m},
			{},
		} {
			var w objectWriter
			w.keys = append(w.keys, "scratch")
			w.bucketTokens(mp)
			want, err := json.Marshal(mp)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(w.b, want) {
				t.Fatalf("bucketTokens(%v) wrote\n%s\njson.Marshal writes\n%s", mp, w.b, want)
			}
			if len(w.keys) != 1 || w.keys[0] != "scratch" {
				t.Fatalf("scratch keys left as %q", w.keys)
			}
		}
	})
}
