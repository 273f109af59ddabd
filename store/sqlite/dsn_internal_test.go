package sqlite

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzBuildDSN: any DSN a host passes either is refused with ErrConfig or
// comes back with immediate write transactions, exactly once, and the
// host's own name before the query.
func FuzzBuildDSN(f *testing.F) {
	for _, s := range []string{"x.db", ":memory:", "file::memory:", "file:x.db?cache=shared", "file:x?_txlock=deferred", "x?%zz", "a?_pragma=foo&_txlock=immediate", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		full, _, err := buildDSN(dsn, 10*time.Second)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("buildDSN(%q) = %v, want ErrConfig", dsn, err)
			}
			return
		}
		name, query, _ := strings.Cut(full, "?")
		wantName, _, _ := strings.Cut(dsn, "?")
		if name != wantName {
			t.Fatalf("buildDSN(%q) names %q", dsn, name)
		}
		q, err := url.ParseQuery(query)
		if err != nil || len(q["_txlock"]) != 1 || q.Get("_txlock") != "immediate" {
			t.Fatalf("buildDSN(%q) = %q: _txlock %v (%v)", dsn, full, q["_txlock"], err)
		}
	})
}
