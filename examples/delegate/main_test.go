package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

var update = flag.Bool("update", false, "rewrite testdata/output.golden")

// TestOutput runs the example and checks its whole output: the pause
// before the agent ran, the approval, the one agent run with the trace
// context, the DECIDED record and the replay that does not run the agent.
// Run with -update after an intended change.
func TestOutput(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
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
		"tool     adp_coder.run  paused approval_pending",
		"paused   awaiting GATE_CODE_REVIEW by a tech_lead",
		"agent runs so far: 0",
		"tool     adp_coder.run  completed",
		`"tool_names":["command_execution","file_change"]`,
		"(cost 4.2 cents)",
		"decision DECIDED applied",
		"agent runs: 1; it got TRACEPARENT=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"result   replay_equal, 0 differences; agent runs during the replay: 0",
	} {
		if !bytes.Contains(buf.Bytes(), []byte(must)) {
			t.Errorf("output lacks %q", must)
		}
	}
}

// The example's output is the same on every run.
func TestOutputIsDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	if err := run(context.Background(), &a); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two runs print different output")
	}
}

// TestAgentTestdataMatches keeps the agent package's copies of this
// example's pack, request and run context equal to the example's.
func TestAgentTestdataMatches(t *testing.T) {
	for _, name := range []string{"pack", "invoke", "run-context"} {
		want, err := os.ReadFile(name + ".json")
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("..", "..", "agent", "testdata", name+".coder.json"))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("agent/testdata/%s.coder.json differs from examples/delegate/%s.json (-example +agent):\n%s", name, name, diff)
		}
	}
}
