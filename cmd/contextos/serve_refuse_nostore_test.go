package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A flag serve refuses is refused before the store is opened: a bad
// --webhook leaves no store behind (before, the default
// sqlite:contextos.db was created in the working directory, and then the
// URL refused).
func TestServeRefusesABadWebhookBeforeOpeningTheStore(t *testing.T) {
	dir := t.TempDir()
	_, flags := serveFiles(t, dir)
	for i, f := range flags {
		if strings.HasPrefix(f, "testdata") || strings.HasPrefix(f, "..") {
			abs, err := filepath.Abs(f)
			if err != nil {
				t.Fatal(err)
			}
			flags[i] = abs
		}
	}
	whsec := writeFile(t, dir, "wh.secret", []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
	cwd := t.TempDir()
	t.Chdir(cwd)
	args := append(append([]string{"serve"}, flags...), "--webhook", "ftp://hooks.example/x", "--webhook-secret", whsec)
	code, _, errs := runCLI(t, "", args...)
	if code != exitUsage || !strings.Contains(errs, "http or https") {
		t.Fatalf("exit %d, stderr %q; want 2 and the --webhook refusal", code, errs)
	}
	ents, err := os.ReadDir(cwd)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("serve refused its flags and left %s in the working directory", e.Name())
	}
}
