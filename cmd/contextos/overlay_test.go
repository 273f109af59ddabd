package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/contextos/internal/fixture"
)

const euOverlay = `{"overlay_id": "ov_eu_prod", "base": "ctxpack.support@1.0.0", "environment": "prod-eu",
  "environment_defaults": {"currency": "EUR", "timezone": "Europe/Paris"},
  "guardrails": {"must_escalate": ["chargeback_open"]}}`

// --overlay FILE on compile applies the overlay to the pack its base
// names; the ledger records it and its defaults compile. Overlays for no
// given pack, two for one pack, or one that expands power are refused.
func TestCompileOverlay(t *testing.T) {
	dir := t.TempDir()
	ov := writeFile(t, dir, "ov.json", []byte(euOverlay))
	code, out, errs := runCLI(t, "", compileArgs("--overlay", ov)...)
	if code != exitOK {
		t.Fatalf("compile --overlay: %d %s", code, errs)
	}
	var cc struct {
		Controls struct {
			MustEscalate []string `json:"must_escalate"`
		} `json:"runtime_controls"`
		Ledger struct {
			Packs []struct {
				Overlay *struct {
					OverlayID string `json:"overlay_id"`
					Hash      string `json:"hash"`
				} `json:"overlay"`
			} `json:"packs"`
			Environment struct{ Currency, Timezone string } `json:"environment"`
		} `json:"context_ledger"`
	}
	if err := json.Unmarshal([]byte(out), &cc); err != nil {
		t.Fatal(err)
	}
	if o := cc.Ledger.Packs[0].Overlay; o == nil || o.OverlayID != "ov_eu_prod" || !strings.HasPrefix(o.Hash, "sha256:") {
		t.Errorf("ledger overlay = %+v", o)
	}
	if cc.Ledger.Environment.Currency != "EUR" || cc.Ledger.Environment.Timezone != "Europe/Paris" {
		t.Errorf("ledger environment = %+v", cc.Ledger.Environment)
	}
	if !strings.Contains(strings.Join(cc.Controls.MustEscalate, ","), "chargeback_open") {
		t.Errorf("must_escalate = %v", cc.Controls.MustEscalate)
	}
	other := writeFile(t, dir, "other.json", []byte(strings.Replace(euOverlay, "ctxpack.support@1.0.0", "ctxpack.support@9.0.0", 1)))
	second := writeFile(t, dir, "second.json", []byte(strings.Replace(euOverlay, "ov_eu_prod", "ov_second", 1)))
	loose := writeFile(t, dir, "loose.json", []byte(`{"overlay_id": "ov_loose", "base": "ctxpack.support@1.0.0", "environment": "prod", "adapter_approval_modes": {"adp_payments": "read_only"}}`))
	misspelt := writeFile(t, dir, "misspelt.json", []byte(`{"overlay_id": "ov", "base": "ctxpack.support@1.0.0", "environment": "prod", "enviroment_defaults": {}}`))
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"overlay of no given pack", compileArgs("--overlay", other), exitInvalid, "not one of the packs given"},
		{"two overlays of one pack", compileArgs("--overlay", ov, "--overlay", second), exitInvalid, "a run is in one environment"},
		{"overlay expanding power", compileArgs("--overlay", loose), exitInvalid, "lower_approval_mode"},
		{"misspelt member", compileArgs("--overlay", misspelt), exitInvalid, "enviroment_defaults"},
		{"unreadable overlay", compileArgs("--overlay", filepath.Join(dir, "nope.json")), exitUsage, "no such file"},
	}
	for _, tc := range tests {
		code, _, errs := runCLI(t, "", tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.msg) {
			t.Errorf("%s: code %d stderr %q; want %d containing %q", tc.name, code, errs, tc.code, tc.msg)
		}
	}
}

// compile refuses a request and run context that disagree, as run does,
// naming the member; it accepts any unique request id.
func TestCompileRefusesDisagreement(t *testing.T) {
	dir := t.TempDir()
	rc := fixture.RunContext()
	for _, tc := range []struct{ from, to, member string }{
		{`"tenant_id": "tenant_acme_prod"`, `"tenant_id": "tenant_globex"`, "tenant_id"},
		{`"session_id": "sess_42f1"`, `"session_id": "sess_other"`, "session_id"},
		{`"user_id": "usr_771"`, `"user_id": "usr_other"`, "user.user_id"},
	} {
		edited := strings.ReplaceAll(string(rc), tc.from, tc.to)
		if edited == string(rc) {
			t.Fatalf("the run context fixture has no %s", tc.from)
		}
		f := writeFile(t, dir, "rc.json", []byte(edited))
		code, _, errs := runCLI(t, "", replaceArg(compileArgs(), "--run-context", f)...)
		if code != exitInvalid || !strings.Contains(errs, "request and run context disagree") || !strings.Contains(errs, tc.member) {
			t.Errorf("%s: code %d stderr %q", tc.member, code, errs)
		}
		// run refuses the same pair.
		code, _, errs = runCLI(t, "", replaceArg(runArgs(), "--run-context", f)...)
		if code != exitInvalid || !strings.Contains(errs, tc.member) {
			t.Errorf("run, %s: code %d stderr %q", tc.member, code, errs)
		}
	}
	req := fixture.Invoke()
	uuid := writeFile(t, dir, "req.json", []byte(strings.Replace(string(req), `"req_9f3a12"`, `"123e4567-e89b-12d3-a456-426614174000"`, 1)))
	if code, _, errs := runCLI(t, "", replaceArg(compileArgs(), "--request", uuid)...); code != exitOK {
		t.Errorf("a UUID request_id: %d %s", code, errs)
	}
	// A missing ontology says how to declare it.
	if code, _, errs := runCLI(t, "", compileArgs()[:len(compileArgs())-2]...); code != exitInvalid || !strings.Contains(errs, "--ontology ont.support@1.0.0") {
		t.Errorf("no ontology: %d %s", code, errs)
	}
}

// --overlay on run and replay: a run under an overlay replays equal with
// it, and is a compiled-context mismatch without it or with another.
func TestRunAndReplayOverlay(t *testing.T) {
	dir := t.TempDir()
	ov := writeFile(t, dir, "ov.json", []byte(`{"overlay_id": "ov_eu_prod", "base": "ctxpack.support@1.0.0", "environment": "prod-eu",
  "environment_defaults": {"currency": "EUR", "timezone": "Europe/Paris"}}`))
	packet := filepath.Join(dir, "packet.json")
	code, out, errs := runCLI(t, "", runArgs("--overlay", ov, "--approve", "GATE_FINANCE_APPROVAL=user_finance_lead_77:finance_lead", "--replay-packet", packet)...)
	if code != exitOK || !strings.Contains(out, `"DECIDED"`) {
		t.Fatalf("run --overlay: %d %s %s", code, out, errs)
	}
	replayArgs := []string{"replay", "--pack", testFile("ctxpack.support-1.0.0.json"), "--allow-unsigned"}
	if code, out, errs := runCLI(t, "", append(replayArgs, "--overlay", ov, packet)...); code != exitOK || !strings.Contains(out, `"replay_equal"`) {
		t.Errorf("replay --overlay: %d %s %s", code, out, errs)
	}
	if code, out, _ := runCLI(t, "", append(replayArgs, packet)...); code != exitInvalid || !strings.Contains(out, `"replay_mismatch"`) || !strings.Contains(out, "compiled context hash") {
		t.Errorf("replay without the overlay: %d %s", code, out)
	}
	// Another overlay that compiles the same content (only its id
	// differs) is a mismatch too: the packet pins the context ledger,
	// which names the overlay applied.
	other := writeFile(t, dir, "other.json", []byte(`{"overlay_id": "ov_eu_staging", "base": "ctxpack.support@1.0.0", "environment": "prod-eu",
  "environment_defaults": {"currency": "EUR", "timezone": "Europe/Paris"}}`))
	if code, out, _ := runCLI(t, "", append(replayArgs, "--overlay", other, packet)...); code != exitInvalid || !strings.Contains(out, `"replay_mismatch"`) || !strings.Contains(out, "ov_eu_staging") || strings.Contains(out, "compiled context hash") {
		t.Errorf("replay with another overlay of the same content: %d %s", code, out)
	}
	if code, _, errs := runCLI(t, "", runArgs("--overlay", filepath.Join(dir, "nope.json"))...); code != exitUsage {
		t.Errorf("run with an unreadable overlay: %d %s", code, errs)
	}
}
