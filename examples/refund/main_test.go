package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/output.golden")

// TestOutput checks the example's whole output: the four flows, the
// record and the replay verdict. Run with -update after an intended change.
func TestOutput(t *testing.T) {
	var buf bytes.Buffer
	if err := run(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "output.golden")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), buf.String()); diff != "" {
		t.Errorf("output differs from %s (-want +got):\n%s", golden, diff)
	}
	for _, must := range []string{
		"paused   awaiting GATE_FINANCE_APPROVAL by a finance_lead",
		"decision DECIDED approved (payments called 1 time)",
		"decision DECIDED denied",
		"result   replay_equal, 0 differences; live payments calls during replay: 0",
	} {
		if !bytes.Contains(buf.Bytes(), []byte(must)) {
			t.Errorf("output lacks %q", must)
		}
	}
}
