package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/contextos/contextos/internal/fixture"
)

// fixtureDir is the directory TestMain writes the shared support fixtures
// (internal/fixture) into: the CLI takes file paths, so its tests hand it
// files, never the bytes.
var fixtureDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "contextos-cli-fixtures-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := fixture.WriteFiles(dir); err != nil {
		os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fixtureDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	if builtDir != "" {
		os.RemoveAll(builtDir) // serve_proc_test.go
	}
	os.Exit(code)
}

// testFile returns the path of a CLI test input: one of the shared support
// fixtures (fixture.PackFile, InvokeFile, RunContextFile, EvidenceFile,
// MemoryFile) in fixtureDir, any other name (the CLI's own plan and tool
// scripts) in testdata.
func testFile(name string) string {
	switch name {
	case fixture.PackFile, fixture.InvokeFile, fixture.RunContextFile, fixture.EvidenceFile, fixture.MemoryFile:
		return filepath.Join(fixtureDir, name)
	}
	return filepath.Join("testdata", name)
}
