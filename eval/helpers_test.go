package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
)

var update = flag.Bool("update", false, "rewrite golden files and the golden packets")

const (
	goldenDir = "testdata/golden"
	// baselineFile is the baseline pack, ctxpack.support@1.0.0: the
	// module's shared support pack, which readTestFile reads from
	// internal/fixture.
	baselineFile = fixture.PackFile
	// cliBaselineFile is the same pack as a file, for what takes a path:
	// `contextos pack test --baseline` in docs/pack-ci.md and cmd/contextos's
	// tests. This package's tests do not read it.
	cliBaselineFile = "testdata/packs/support-1.0.0.json"
)

// TestCLIBaselineIsTheSharedPack checks the baseline pack file kept for
// the CLI is the shared support pack, byte for byte: a change to the
// fixture is made there too.
func TestCLIBaselineIsTheSharedPack(t *testing.T) {
	got, err := os.ReadFile(cliBaselineFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, fixture.SupportPack()) {
		t.Errorf("%s differs from internal/fixture's %s; copy it there", cliBaselineFile, fixture.PackFile)
	}
}

// readTestFile returns the file at name, or for the file name of a shared
// fixture (such as baselineFile) a fresh copy of that fixture.
func readTestFile(t testing.TB, name string) []byte {
	t.Helper()
	if b, err := fixture.Bytes(name); err == nil {
		return b
	}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func loadTestPack(t testing.TB, name string) *pack.Pack {
	t.Helper()
	p, err := pack.DecodeAndValidate(readTestFile(t, name), nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

func loadCase(t testing.TB, name string) *Case {
	t.Helper()
	path := filepath.Join(goldenDir, name+".json")
	c, err := DecodeCase(path, readTestFile(t, path))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// golden compares got with the golden file (rewriting it under -update).
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := readTestFile(t, path)
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output (run go test ./eval -update after checking):\n%s", path, got)
	}
}

// TestGoldenPackets captures the golden cases' packets with
// Runtime.Capture: flow 1 as a golden case (flow 4 replays it) and flow 3
// as an operator correction. The stored files must be what a capture
// gives today.
func TestGoldenPackets(t *testing.T) {
	r, err := NewRunner(RunnerOptions{Pack: loadTestPack(t, baselineFile)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		caseName, file string
		kind           replay.SourceKind
	}{
		{"flow1-high-value-approved", "flow1.packet.json", replay.SourceGoldenCase},
		{"flow3-low-value-decided", "flow3-correction.packet.json", replay.SourceOperatorCorrection},
		{"refund-tool-fails", "incident-refund-failed.packet.json", replay.SourceQualityReplayCase},
	} {
		t.Run(tc.file, func(t *testing.T) {
			s, _, err := loadCase(t, tc.caseName).script()
			if err != nil {
				t.Fatal(err)
			}
			l, err := r.execute(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			p, err := l.rt.Capture(context.Background(), l.res.RunID, tc.kind)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.MarshalIndent(p, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join(goldenDir, "packets", tc.file), append(b, '\n'))
		})
	}
}
