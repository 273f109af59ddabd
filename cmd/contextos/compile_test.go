package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/contextos/schemas"
)

// compileArgs compiles the plain support pack (--allow-unsigned).
func compileArgs(extra ...string) []string {
	td := testFile
	return append([]string{"compile", "--allow-unsigned", "--pack", td("ctxpack.support-1.0.0.json"), "--request", td("invoke.support-refund.json"),
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

// A signed pack is always verified: with a --pub key it compiles; tampered,
// signed by another key, or without a --pub to verify it, it is refused,
// --allow-unsigned or not. A plain pack needs --allow-unsigned.
func TestCompileCommandSignedPacks(t *testing.T) {
	dir := t.TempDir()
	_, keys, _ := runCLI(t, "", "pack", "keygen", "--out", dir)
	key, pub := strings.Fields(keys)[0], strings.Fields(keys)[1]
	_, otherKeys, _ := runCLI(t, "", "pack", "keygen", "--out", t.TempDir())
	otherPub := strings.Fields(otherKeys)[1]
	_, signed, _ := runCLI(t, "", "pack", "sign", "--key", key, testFile("ctxpack.support-1.0.0.json"))
	sp := writeFile(t, dir, "signed.json", []byte(signed))
	tampered := writeFile(t, dir, "tampered.json", []byte(strings.Replace(signed, "finance_lead", "finance_leaf", 1)))
	plain := testFile("ctxpack.support-1.0.0.json")
	withPack := func(p string, extra ...string) []string {
		args := slices.Delete(compileArgs(), 1, 2) // no --allow-unsigned
		args[2] = p
		return append(args, extra...)
	}
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"signed, verified", withPack(sp, "--pub", pub), exitOK, ""},
		{"signed, another signer's key", withPack(sp, "--pub", otherPub), exitInvalid, "signature verification failed"},
		{"signed, no key to verify it", withPack(sp, "--allow-unsigned"), exitInvalid, "a signed pack is verified: give --pub"},
		{"tampered", withPack(tampered, "--pub", pub), exitInvalid, "signature verification failed"},
		{"tampered, allow-unsigned too", withPack(tampered, "--pub", pub, "--allow-unsigned"), exitInvalid, "signature verification failed"},
		{"plain, allowed", withPack(plain, "--allow-unsigned"), exitOK, ""},
		{"plain, with keys only", withPack(plain, "--pub", pub), exitInvalid, "the pack is not signed"},
		{"neither keys nor allow-unsigned", withPack(plain), exitUsage, "--allow-unsigned"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, "", tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.msg) {
				t.Errorf("exit %d, stderr %q; want %d with %q", code, errs, tc.code, tc.msg)
			}
			if code != exitOK && out != "" {
				t.Errorf("a refused pack compiled: %q", out)
			}
		})
	}
}

// A pack whose compatibility.requires this runtime does not meet is
// refused before anything is compiled.
func TestCompileCommandCompatibility(t *testing.T) {
	dir := t.TempDir()
	later := writeFile(t, dir, "later.json", editPack(t, func(m map[string]any) {
		m["contract_meta"].(map[string]any)["compatibility"] = map[string]any{"requires": map[string]any{"runtime": ">=2.0.0", "ontology": ">=1.0.0"}}
	}))
	args := compileArgs()
	args[3] = later
	code, out, errs := runCLI(t, "", args...)
	if code != exitInvalid || out != "" || !strings.Contains(errs, "incompatible with host") || !strings.Contains(errs, "runtime >=2.0.0") {
		t.Errorf("exit %d, stderr %q", code, errs)
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
