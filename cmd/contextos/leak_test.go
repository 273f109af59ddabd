package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/contextos/internal/fixture"
)

// The CLI's surfaces (stdout, stderr, the replay packet and the record it
// writes) never hold a card number, an IBAN or an email address a tool
// returned, wherever in its result the tool put them; the packet still
// replays equal.
func TestRunCommandLeaksNothing(t *testing.T) {
	leaks := []string{"4111111111111111", "4111 1111 1111 1111", "GB82 WEST 1234 5698 7654 32", "GB82WEST12345698765432", "jane.doe@example.com"}
	dir := t.TempDir()
	doc := fixture.SupportPack()
	edited := bytes.Replace(doc, []byte(`"redaction_rules": ["pan", "credit_card"]`), []byte(`"redaction_rules": ["pan", "credit_card", "iban", "email"]`), 1)
	if bytes.Equal(doc, edited) {
		t.Fatal("the support pack's redaction rules moved: edit this test")
	}
	packFile := filepath.Join(dir, "pack.json")
	tools := filepath.Join(dir, "tools.json")
	os.WriteFile(packFile, edited, 0o644)
	os.WriteFile(tools, []byte(`{
  "adp_orders.lookup": [
    {"status": "error", "error": {"code": "execution_failed", "reason": "card 4111 1111 1111 1111", "retryable": true, "message": "upstream said: pay GB82 WEST 1234 5698 7654 32 for jane.doe@example.com"}},
    {"status": "ok", "output": {"order_id": "ord_881", "status": "delivered", "card": 4111111111111111, "iban": "GB82WEST12345698765432",
      "jane.doe@example.com": {"note": "card 4111111111111111"}}}],
  "adp_policy.eval": [{"status": "ok", "output": {"eligible": true, "contact": "jane.doe@example.com"}}],
  "adp_payments.issue_refund": [{"status": "ok", "output": {"transaction_id": "txn_q9", "to": "GB82 WEST 1234 5698 7654 32"}, "mutations": ["refund:txn_q9", "charged:4111111111111111"]}]
}`), 0o644)
	packet := filepath.Join(dir, "packet.json")
	record := filepath.Join(dir, "record.json")
	args := runArgs("--approve", "GATE_FINANCE_APPROVAL=user_finance_lead_77:finance_lead", "--replay-packet", packet, "--record", record)
	for i, a := range args {
		switch {
		case strings.HasSuffix(a, "ctxpack.support-1.0.0.json"):
			args[i] = packFile
		case strings.HasSuffix(a, "tools.refund.json"):
			args[i] = tools
		}
	}
	code, out, errs := runCLI(t, "", args...)
	if code != exitOK || !strings.Contains(out, `"status":"DECIDED"`) && !strings.Contains(out, `"status": "DECIDED"`) {
		t.Fatalf("run: %d %s %s", code, out, errs)
	}
	if !strings.Contains(out, "[REDACTED]") {
		t.Errorf("stdout shows no redaction: %s", out)
	}
	surfaces := map[string]string{"stdout": out, "stderr": errs}
	for name, f := range map[string]string{"packet": packet, "record": record} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		surfaces[name] = string(b)
	}
	for name, s := range surfaces {
		for _, leak := range leaks {
			if strings.Contains(s, leak) {
				t.Errorf("%s holds %q", name, leak)
			}
		}
	}
	replayArgs := []string{"replay", "--pack", packFile, "--allow-unsigned", packet}
	if code, out, errs := runCLI(t, "", replayArgs...); code != exitOK || !strings.Contains(out, `"replay_equal"`) {
		t.Errorf("replay: %d %s %s", code, out, errs)
	}
}
