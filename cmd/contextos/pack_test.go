package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/contextos/internal/fixture"
)

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// editPack returns the canonical pack with f applied to its JSON form.
func editPack(t *testing.T, f func(m map[string]any)) []byte {
	t.Helper()
	b := fixture.SupportPack()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	out, _ := json.Marshal(m)
	return out
}

func TestPackKeygenSignVerify(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runCLI(t, "", "pack", "keygen", "--out", dir)
	if code != exitOK || errs != "" {
		t.Fatalf("keygen: %d %s", code, errs)
	}
	files := strings.Fields(out)
	if len(files) != 2 || !strings.HasSuffix(files[0], ".key") || !strings.HasSuffix(files[1], ".pub") {
		t.Fatalf("keygen wrote %v", files)
	}
	if fi, _ := os.Stat(files[0]); fi.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %v, want 0600", fi.Mode().Perm())
	}
	code, signed, errs := runCLI(t, "", "pack", "sign", "--key", files[0], testFile("ctxpack.support-1.0.0.json"))
	if code != exitOK || errs != "" {
		t.Fatalf("sign: %d %s", code, errs)
	}
	sp := writeFile(t, dir, "signed.json", []byte(signed))
	code, out, _ = runCLI(t, "", "pack", "verify", "--pub", files[1], sp)
	if code != exitOK || !strings.HasPrefix(out, "verified ctxpack.support@1.0.0 sha256:") {
		t.Errorf("verify: %d %q", code, out)
	}
	tampered := writeFile(t, dir, "tampered.json", []byte(strings.Replace(signed, "finance_lead", "finance_leap", 1)))
	code, out, _ = runCLI(t, "", "pack", "verify", "--pub", files[1], tampered)
	if code != exitInvalid || !strings.Contains(out, "content hash does not match") {
		t.Errorf("verify tampered: %d %q", code, out)
	}
	// A second key pair does not verify the first one's signature.
	other := t.TempDir()
	_, out2, _ := runCLI(t, "", "pack", "keygen", "--out", other)
	code, out, _ = runCLI(t, "", "pack", "verify", "--pub", strings.Fields(out2)[1], sp)
	if code != exitInvalid || !strings.Contains(out, "unknown key id") {
		t.Errorf("verify with other key: %d %q", code, out)
	}
	// The public key cannot sign; an invalid pack is not signed.
	if code, _, _ := runCLI(t, "", "pack", "sign", "--key", files[1], sp); code != exitUsage {
		t.Errorf("sign with public key: %d", code)
	}
	bad := writeFile(t, dir, "bad.json", editPack(t, func(m map[string]any) { delete(m["evaluation_layer"].(map[string]any), "release_gates") }))
	code, _, errs = runCLI(t, "", "pack", "sign", "--key", files[0], bad)
	if code != exitInvalid || !strings.Contains(errs, "release_gates") {
		t.Errorf("sign invalid pack: %d %q", code, errs)
	}
}

func TestPackValidate(t *testing.T) {
	dir := t.TempDir()
	good := testFile("ctxpack.support-1.0.0.json")
	// The seed pack is valid, with the risk gate's warning that its
	// finance gate reads only caller-asserted request.context.
	warning := "warning: risk: policy_layer.approval_gates[0].when: gate GATE_FINANCE_APPROVAL guards write-class adp_payments.issue_refund (destructive), but its when, the rules naming it and the deny rules read only caller-asserted request.context (identity_verified, refund_amount) and nothing of the call's arguments, so a call whose arguments differ from what the caller asserted is not held; bind it to the call: a when over tool.args, such as {\">\": [{\"var\": \"tool.args.amount_inr\"}, …]}, or a rule over tool.args.* whose branch names requires_approval_gate GATE_FINANCE_APPROVAL\n"
	if code, out, _ := runCLI(t, "", "pack", "validate", good); code != exitOK || out != warning+"valid, 1 warning\n" {
		t.Errorf("valid pack: %d %q", code, out)
	}
	// Bound to the call's own amount, the gate draws no warning; success
	// still says so.
	perCall := writeFile(t, dir, "per-call.json", editPack(t, func(m map[string]any) {
		g := m["policy_layer"].(map[string]any)["approval_gates"].([]any)[0].(map[string]any)
		g["when"] = map[string]any{">": []any{map[string]any{"var": "tool.args.amount_inr"}, 3000}}
	}))
	if code, out, _ := runCLI(t, "", "pack", "validate", perCall); code != exitOK || out != "valid\n" {
		t.Errorf("per-call pack: %d %q", code, out)
	}
	bad := writeFile(t, dir, "bad.json", editPack(t, func(m map[string]any) {
		perms := m["tooling_layer"].(map[string]any)["permissions"].([]any)
		delete(perms[2].(map[string]any), "requires_approval_gate")
	}))
	code, out, _ := runCLI(t, "", "pack", "validate", bad)
	want := "risk: tooling_layer.permissions[2].requires_approval_gate: permission p_issue_refund exposes destructive capability adp_payments.issue_refund without an approval gate\ninvalid, 1 problem\n"
	if code != exitInvalid || out != want {
		t.Errorf("invalid pack: %d\n%q\nwant\n%q", code, out, want)
	}
	code, out, _ = runCLI(t, "", "pack", "validate", "--json", good, bad)
	var probs []map[string]string
	if err := json.Unmarshal([]byte(out), &probs); err != nil || code != exitInvalid || len(probs) != 2 {
		t.Fatalf("--json: %d %v %q", code, err, out)
	}
	if p := probs[0]; p["file"] != good || p["severity"] != "warning" || p["code"] != "caller_asserted_control" || p["gate"] != "risk" || p["path"] != "policy_layer.approval_gates[0].when" {
		t.Errorf("--json warning: %v", p)
	}
	if p := probs[1]; p["file"] != bad || p["severity"] != "error" || p["code"] != "destructive_without_gate" || p["gate"] != "risk" {
		t.Errorf("--json problem: %v", p)
	}
	code, out, _ = runCLI(t, "", "pack", "validate", good, bad)
	if code != exitInvalid || out != good+": "+warning+good+": valid, 1 warning\n"+bad+": "+strings.TrimSuffix(want, "invalid, 1 problem\n")+bad+": invalid, 1 problem\n" {
		t.Errorf("several files: %q", out)
	}
	if code, _, _ := runCLI(t, "", "pack", "validate"); code != exitUsage {
		t.Errorf("no files: %d", code)
	}
	if code, _, errs := runCLI(t, "", "pack", "frob"); code != exitUsage || !strings.Contains(errs, "unknown command") {
		t.Errorf("unknown subcommand: %d", code)
	}
	if code, out, _ := runCLI(t, "", "pack", "-h"); code != exitOK || !strings.Contains(out, "keygen") {
		t.Errorf("pack -h: %d", code)
	}
}

func TestPackDiff(t *testing.T) {
	dir := t.TempDir()
	old := testFile("ctxpack.support-1.0.0.json")
	minor := writeFile(t, dir, "minor.json", editPack(t, func(m map[string]any) {
		m["pack_meta"].(map[string]any)["pack_version"] = "1.1.0"
		g := m["policy_layer"].(map[string]any)["guardrails"].(map[string]any)
		g["redaction_rules"] = append(g["redaction_rules"].([]any), "aadhaar")
	}))
	// aadhaar is not a built-in rule: the host supplies it.
	redactors := writeFile(t, dir, "redactors.json", []byte(`{"aadhaar": "\\b[2-9]\\d{3} \\d{4} \\d{4}\\b"}`))
	code, out, _ := runCLI(t, "", "pack", "diff", "--redactors", redactors, old, minor)
	if code != exitOK || !strings.HasPrefix(out, "class: minor\nversion: ok (1.0.0 → 1.1.0)\nminor: policy_layer.guardrails.redaction_rules: added aadhaar\n") {
		t.Errorf("minor: %d\n%s", code, out)
	}
	tooSmall := writeFile(t, dir, "small.json", editPack(t, func(m map[string]any) {
		m["pack_meta"].(map[string]any)["pack_version"] = "1.0.1"
		ds := m["decision_layer"].(map[string]any)["decision_specs"].([]any)[0].(map[string]any)
		ds["allowed_outcomes"] = []any{"approved", "denied"}
	}))
	code, out, _ = runCLI(t, "", "pack", "diff", old, tooSmall)
	if code != exitInvalid || !strings.Contains(out, "class: major") || !strings.Contains(out, "needs a MAJOR bump") {
		t.Errorf("insufficient bump: %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "", "pack", "diff", "--json", "--redactors", redactors, old, minor)
	var res map[string]any
	if json.Unmarshal([]byte(out), &res) != nil || res["class"] != "minor" || code != exitOK {
		t.Errorf("--json: %d %s", code, out)
	}
	if code, _, _ := runCLI(t, "", "pack", "diff", old); code != exitUsage {
		t.Error("one file accepted")
	}
}
