//go:build unix

package eval

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A named pipe is refused before it is opened (opening it would block).
func TestLoadRefusesNamedPipe(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "a.json"), 0o644); err != nil {
		t.Skip(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Fatalf("Load = %v, want a refused named pipe", err)
	}
	c, err := DecodeCase(filepath.Join(dir, "c.json"), []byte(`{"packet":"a.json","expect":{"status":"DECIDED"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readPacket(c); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Fatalf("readPacket = %v, want a refused named pipe", err)
	}
}

// A golden file swapped for a named pipe after its check opens without
// blocking (openFlags), so the check after the open refuses it rather
// than the read hanging for a writer.
func TestOpenFlagsDoNotBlockOnANamedPipe(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "a.json"), 0o644); err != nil {
		t.Skip(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	f, err := root.OpenFile("a.json", openFlags, 0) // blocks for a writer without O_NONBLOCK
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Mode().IsRegular() {
		t.Errorf("stat of the opened pipe = %v, %v", fi, err)
	}
}
