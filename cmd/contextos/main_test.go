package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/schemas"
)

func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestValidateSeedDocuments(t *testing.T) {
	for kind, file := range map[string]string{"invoke-agent": "invoke.support-refund.json", "run-context": "run-context.support.json"} {
		code, out, errs := runCLI(t, "", "validate", "--kind", kind, testFile(file))
		if code != exitOK || out != "" || errs != "" {
			t.Errorf("validate %s: code %d, stdout %q, stderr %q", file, code, out, errs)
		}
	}
}

func TestValidateInvalid(t *testing.T) {
	doc := `{"request_id":"req x","tenant_id":"t","mode":"fast","context_pack_refs":["a@latest"],"trace":{"trace_id":"00000000000000000000000000000000","span_id":"00f067aa0ba902b7"},"user":{"user_id":"u","delegation":{"auth_type":"oauth2","scopes":["s"],"subject":"u:1","token_ref":"tok_secret_value"}},"agent":{"agent_urn":"agent:a/b@1.0.0","workload_identity":"spiffe://a/b"},"input":{"intent":"i","message":"m"},"runtime":{}}`
	code, out, errs := runCLI(t, doc, "validate", "--kind", "invoke-agent", "-")
	if code != exitInvalid || errs != "" {
		t.Fatalf("code %d, stderr %q", code, errs)
	}
	want := []string{
		"context_pack_refs[0]: ",
		"mode: ",
		"request_id: ",
		"trace.trace_id: must not be all zeros",
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], w)
		}
	}
	if strings.Contains(out, "tok_secret_value") {
		t.Error("output echoes a token reference")
	}
	code, out, _ = runCLI(t, `{"run_id":"run_1"}`, "validate", "--kind", "run-context", "-")
	if code != exitInvalid || !strings.Contains(out, "safety_mode: is required") {
		t.Errorf("run-context: code %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, `not json`, "validate", "--kind", "run-context", "-")
	if code != exitInvalid || !strings.HasPrefix(out, "(document): ") {
		t.Errorf("not json: code %d\n%s", code, out)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args     []string
		code     int
		inStderr string
	}{
		{nil, exitUsage, "Usage: contextos"},
		{[]string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{[]string{"validate", "x.json"}, exitUsage, "--kind must be"},
		{[]string{"validate", "--kind", "decision-record", "x.json"}, exitUsage, "--kind must be"},
		{[]string{"validate", "--kind", "run-context"}, exitUsage, "exactly one FILE"},
		{[]string{"validate", "--kind", "run-context", "testdata/does-not-exist.json"}, exitUsage, "no such file"},
		{[]string{"validate", "--bogus"}, exitUsage, "flag provided but not defined"},
		{[]string{"version", "extra"}, exitUsage, "takes no arguments"},
		{[]string{"schemas", "extra"}, exitUsage, "unexpected arguments"},
		{[]string{"validate", "-h"}, exitOK, "Usage: contextos validate"},
		{[]string{"schemas", "-h"}, exitOK, "Usage: contextos schemas"},
	}
	for _, tc := range tests {
		code, _, errs := runCLI(t, "", tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.inStderr) {
			t.Errorf("contextos %v: code %d, stderr %q; want %d containing %q", tc.args, code, errs, tc.code, tc.inStderr)
		}
	}
	code, out, _ := runCLI(t, "", "-h")
	if code != exitOK || !strings.Contains(out, "validate") {
		t.Errorf("-h: code %d, %q", code, out)
	}
}

func TestVersionAndSchemas(t *testing.T) {
	code, out, _ := runCLI(t, "", "version")
	if code != exitOK || out != "contextos "+contextos.Version+"\n" {
		t.Errorf("version: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "", "schemas")
	if code != exitOK || !slices.Equal(strings.Fields(out), schemas.Names()) {
		t.Errorf("schemas: %d %q", code, out)
	}
	dir := filepath.Join(t.TempDir(), "nested", "out")
	code, out, errs := runCLI(t, "", "schemas", "--out", dir)
	if code != exitOK || errs != "" || len(strings.Fields(out)) != len(schemas.Names()) {
		t.Fatalf("schemas --out: %d %q %q", code, out, errs)
	}
	for _, n := range schemas.Names() {
		got, err := os.ReadFile(filepath.Join(dir, n))
		want, _ := schemas.File(n)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s not written correctly: %v", n, err)
		}
	}
}

func TestDotted(t *testing.T) {
	doc := map[string]any{"a": []any{map[string]any{"b/c": 1}}, "m": map[string]any{"0": 1}}
	for ptr, want := range map[string]string{"": "", "/a/0/b~1c": "a[0].b/c", "/m/0": "m.0", "/x/1": "x.1"} {
		if got := dotted(ptr, doc); got != want {
			t.Errorf("dotted(%q) = %q, want %q", ptr, got, want)
		}
	}
}
