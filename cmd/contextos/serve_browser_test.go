package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The browser test needs Node with playwright-core and Debian's
// chromium; .ci/run installs both and sets CI, and then the test fails
// rather than skips when one is missing.

// playwrightDir is where playwright-core is installed: CONTEXTOS_PLAYWRIGHT_DIR,
// or .ci/run's default.
func playwrightDir() string {
	if d := os.Getenv("CONTEXTOS_PLAYWRIGHT_DIR"); d != "" {
		return d
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(cache, "contextos-ci", "playwright")
}

// browserTools returns the node binary, the browser and the directory
// holding node_modules/playwright-core, or skips (fails in CI) naming
// what is missing.
func browserTools(t *testing.T) (node, chromium, dir string) {
	t.Helper()
	chromium = os.Getenv("CONTEXTOS_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	dir = playwrightDir()
	var missing []string
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node")
	}
	if _, err := os.Stat(chromium); err != nil {
		missing = append(missing, chromium+" (apt-get install chromium)")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core", "package.json")); err != nil {
		missing = append(missing, "playwright-core in "+dir+" (npm install playwright-core there, or set CONTEXTOS_PLAYWRIGHT_DIR)")
	}
	if len(missing) > 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("the browser test cannot run in CI: missing %s (.ci/run installs them)", strings.Join(missing, ", "))
		}
		t.Skipf("browser test skipped: missing %s", strings.Join(missing, ", "))
	}
	return node, chromium, dir
}

// In headless Chromium, against contextos serve: a finance lead opens
// /inbox, sees the paused 4200 refund with its arguments redacted and
// approves it; the run ends DECIDED with the lead's approval in its
// record; the page shows the records and a verified chain; a support
// agent's inbox is empty; a second lead's stale approval is refused.
// Screenshots go to the test's temporary directory.
func TestInboxInBrowser(t *testing.T) {
	node, chromium, pwDir := browserTools(t)
	dir := t.TempDir()
	key, flags := serveFiles(t, dir)
	svc := startServeProc(t, append(flags, "--store", "sqlite:"+filepath.Join(dir, "contextos.db"))...)
	const tenant = "tenant_acme_prod"
	agent := hsToken(t, key, "agent_17", tenant, "support_agent")
	lead := hsToken(t, key, "user_finance_lead_77", tenant, "finance_lead")
	lead2 := hsToken(t, key, "user_finance_lead_78", tenant, "finance_lead")

	code, run := call(t, "POST", svc.url+"/v1/runs", agent, refundRunBody(t, "req_browser_1"))
	if code != http.StatusOK || run["state"] != "paused" {
		t.Fatalf("POST /v1/runs: %d %v\n%s", code, run, svc.log())
	}
	runID := run["run_id"].(string)

	// CONTEXTOS_E2E_SHOTS keeps the screenshots for a person to look at.
	shots := os.Getenv("CONTEXTOS_E2E_SHOTS")
	if shots == "" {
		shots = filepath.Join(t.TempDir(), "screenshots")
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	script, err := filepath.Abs(filepath.Join("testdata", "inbox_e2e.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(pwDir, "node_modules"), "BASE_URL="+svc.url, "RUN_ID="+runID, "CHROMIUM="+chromium,
		"SHOTS="+shots, "LEAD_TOKEN="+lead, "LEAD2_TOKEN="+lead2, "AGENT_TOKEN="+agent)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("the browser script failed: %v\n%s\n%s\nservice log:\n%s", err, out, stderr, svc.log())
	}
	var seen struct {
		OK         bool   `json:"ok"`
		Status     string `json:"status"`
		Chain      string `json:"chain"`
		Second     int    `json:"second"`
		SecondCode string `json:"secondCode"`
	}
	if err := json.Unmarshal(out, &seen); err != nil || !seen.OK {
		t.Fatalf("the browser script said %s (%v)", out, err)
	}
	t.Logf("browser: %s", out)

	// What the browser saw holds in the API too.
	code, ended := call(t, "GET", svc.url+"/v1/runs/"+runID, agent, nil)
	if code != http.StatusOK || ended["status"] != "DECIDED" {
		t.Fatalf("the run after the browser's approval: %d %v", code, ended["status"])
	}
	approvals := ended["decision_record"].(map[string]any)["approvals"].([]any)
	if len(approvals) != 1 || approvals[0].(map[string]any)["approver"] != "user_finance_lead_77" {
		t.Errorf("the record's approvals: %v", approvals)
	}
	entries, err := os.ReadDir(shots)
	if err != nil || len(entries) < 7 {
		t.Errorf("screenshots in %s: %d (%v), want 7", shots, len(entries), err)
	}
}
