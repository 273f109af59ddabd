//go:build unix

package eval

import (
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
