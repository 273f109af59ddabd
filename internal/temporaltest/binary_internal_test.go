package temporaltest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The server binary comes from CONTEXTOS_TEMPORAL_SERVER: none is a skip
// outside CI and a failure in CI; one that is not an executable file is
// always a failure, never a skip.
func TestLookBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exe := filepath.Join(dir, "temporal-server")
	plain := filepath.Join(dir, "plain")
	for name, mode := range map[string]os.FileMode{exe: 0o755, plain: 0o644} {
		if err := os.WriteFile(name, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    string
		wantErr string // "" for none; errNoServer's text for a skip
	}{
		{name: "unset outside CI skips", env: nil, wantErr: errNoServer.Error()},
		{name: "unset in CI fails", env: map[string]string{"CI": "1"}, wantErr: "CONTEXTOS_TEMPORAL_SERVER is not set, and CI is"},
		{name: "set", env: map[string]string{EnvServer: exe}, want: exe},
		{name: "set in CI", env: map[string]string{EnvServer: exe, "CI": "true"}, want: exe},
		{name: "missing file", env: map[string]string{EnvServer: filepath.Join(dir, "absent")}, wantErr: "no such file"},
		{name: "directory", env: map[string]string{EnvServer: dir}, wantErr: "is not an executable file"},
		{name: "not executable", env: map[string]string{EnvServer: plain}, wantErr: "is not an executable file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := lookBinary(func(k string) string { return tc.env[k] })
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("lookBinary = %v", err)
			case tc.wantErr == errNoServer.Error():
				if !errors.Is(err, errNoServer) {
					t.Fatalf("lookBinary = %v, want errNoServer (a skip)", err)
				}
			case tc.wantErr != "":
				if err == nil || errors.Is(err, errNoServer) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("lookBinary = %v, want a failure containing %q", err, tc.wantErr)
				}
			}
			if got != tc.want {
				t.Errorf("lookBinary = %q, want %q", got, tc.want)
			}
		})
	}
}
