package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/contextos/schemas"
)

func compileArgs(extra ...string) []string {
	td := testFile
	return append([]string{"compile", "--pack", td("ctxpack.support-1.0.0.json"), "--request", td("invoke.support-refund.json"),
		"--run-context", td("run-context.support.json"), "--evidence", td("evidence.support.json"), "--memory", td("memory.support.json"),
		"--ontology", "ont.support@1.0.0"}, extra...)
}

func TestCompileCommand(t *testing.T) {
	code, out, errs := runCLI(t, "", compileArgs()...)
	if code != exitOK || errs != "" {
		t.Fatalf("compile: %d %s", code, errs)
	}
	if err := schemas.Validate("compiled-context", []byte(out)); err != nil {
		t.Errorf("output does not validate: %v", err)
	}
	var cc struct {
		ContextLedger struct {
			Hash string   `json:"compiled_context_hash"`
			Refs []string `json:"evidence_refs"`
		} `json:"context_ledger"`
	}
	if err := json.Unmarshal([]byte(out), &cc); err != nil || len(cc.ContextLedger.Refs) != 5 || !strings.HasPrefix(cc.ContextLedger.Hash, "sha256:") {
		t.Errorf("output = %+v, %v", cc, err)
	}
	// The same compile gives the same bytes.
	if _, again, _ := runCLI(t, "", compileArgs()...); again != out {
		t.Error("compile output is not deterministic")
	}
}

func TestCompileCommandSignedPacks(t *testing.T) {
	dir := t.TempDir()
	_, keys, _ := runCLI(t, "", "pack", "keygen", "--out", dir)
	key, pub := strings.Fields(keys)[0], strings.Fields(keys)[1]
	_, signed, _ := runCLI(t, "", "pack", "sign", "--key", key, testFile("ctxpack.support-1.0.0.json"))
	sp := writeFile(t, dir, "signed.json", []byte(signed))
	args := compileArgs("--pub", pub)
	args[2] = sp
	if code, _, errs := runCLI(t, "", args...); code != exitOK {
		t.Errorf("signed pack with --pub: %d %s", code, errs)
	}
	tampered := writeFile(t, dir, "tampered.json", []byte(strings.Replace(signed, "finance_lead", "finance_leaf", 1)))
	args[2] = tampered
	if code, _, errs := runCLI(t, "", args...); code != exitInvalid || !strings.Contains(errs, "signature verification failed") {
		t.Errorf("tampered signed pack: %d %s", code, errs)
	}
}

func TestCompileCommandErrors(t *testing.T) {
	dir := t.TempDir()
	badEv := writeFile(t, dir, "ev.json", []byte(`[{"evidence_ref":"x","content":"y","trust":"trusted","Trust":"x"}]`))
	badReq := writeFile(t, dir, "req.json", []byte(`{"request_id":"req_1"}`))
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no ontology", compileArgs()[:len(compileArgs())-2], exitInvalid, "ontology version not declared"},
		{"evidence field", replaceArg(compileArgs(), "--evidence", badEv), exitInvalid, `[0].Trust: unknown field "Trust"`},
		{"request field", replaceArg(compileArgs(), "--request", badReq), exitInvalid, "tenant_id: is required"},
		{"missing flags", []string{"compile", "--pack", "x"}, exitUsage, "are required"},
		{"unreadable file", replaceArg(compileArgs(), "--memory", filepath.Join(dir, "nope.json")), exitUsage, "no such file"},
	}
	for _, tc := range tests {
		code, _, errs := runCLI(t, "", tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.msg) {
			t.Errorf("%s: code %d stderr %q; want %d containing %q", tc.name, code, errs, tc.code, tc.msg)
		}
	}
}

func replaceArg(args []string, flag, value string) []string {
	out := append([]string(nil), args...)
	for i := range out {
		if out[i] == flag {
			out[i+1] = value
		}
	}
	return out
}
