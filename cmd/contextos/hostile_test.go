package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// Hostile CLI input around redaction rules: a bad --redactors file is
// refused naming the entry, a pack naming a rule nobody supplies is
// refused at validation naming the rule and its path, and a host rule
// from --redactors is known to validation and redacts the run's output.
func TestHostileRedactors(t *testing.T) {
	dir := t.TempDir()
	td := testFile
	file := func(name, body string) string { return writeFile(t, dir, name, []byte(body)) }
	withRules := func(name string, rules ...any) string {
		return writeFile(t, dir, name, editPack(t, func(m map[string]any) {
			g := m["policy_layer"].(map[string]any)["guardrails"].(map[string]any)
			g["redaction_rules"] = append(g["redaction_rules"].([]any), rules...)
		}))
	}
	tools := file("tools.json", `{
  "adp_orders.lookup": [{"status": "ok", "output": {"order_id": "ord_881", "status": "delivered", "handled_by": "EMP-123456",
    "payee": "DE89 3704 0044 0532 0130 00", "config": {"db_password": "hunter2"}}}],
  "adp_policy.eval": [{"status": "ok", "output": {"eligible": true}}],
  "adp_payments.issue_refund": [{"status": "ok", "output": {"transaction_id": "txn_q9"}, "mutations": ["refund:txn_q9"]}]
}`)
	employee := file("employee.json", `{"cmd_hostile_employee_id": "\\bEMP-\\d{6}\\b"}`)
	hostPack := withRules("host.json", "cmd_hostile_employee_id", "iban", "secret")
	packet := filepath.Join(dir, "packet.json")
	run := func(pk string, extra ...string) []string {
		args := runArgs(append([]string{"--approve", "GATE_FINANCE_APPROVAL=user_finance_lead_77:finance_lead"}, extra...)...)
		args[2] = pk
		for i, a := range args {
			if a == td("tools.refund.json") {
				args[i] = tools
			}
		}
		return args
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want []string // in stdout or stderr
		leak []string // in neither
	}{
		{"redactors expression that does not compile", []string{"pack", "validate", "--redactors", file("bad-re.json", `{"order_ref": "ord_("}`), td("ctxpack.support-1.0.0.json")},
			exitInvalid, []string{`entry "order_ref"`, "invalid regular expression"}, nil},
		{"redactors entry named like a built-in rule", []string{"pack", "validate", "--redactors", file("builtin.json", `{"iban": "X"}`), td("ctxpack.support-1.0.0.json")},
			exitInvalid, []string{`entry "iban" is a built-in rule`}, nil},
		{"redactors entry differing from a built-in in case", []string{"pack", "validate", "--redactors", file("case.json", `{"Email": "X"}`), td("ctxpack.support-1.0.0.json")},
			exitInvalid, []string{`entry "Email"`, "lower_snake_case"}, nil},
		{"redactors entry given twice", []string{"pack", "validate", "--redactors", file("dup.json", `{"emp_id": "A", "emp_id": "B"}`), td("ctxpack.support-1.0.0.json")},
			exitInvalid, []string{`entry "emp_id" is given twice`}, nil},
		{"redactors expression matching the empty string", []string{"pack", "validate", "--redactors", file("empty.json", `{"emp_id": "x*"}`), td("ctxpack.support-1.0.0.json")},
			exitInvalid, []string{`entry "emp_id"`, "empty string"}, nil},
		{"redactors file that is not an object", []string{"compile", "--allow-unsigned", "--redactors", file("list.json", `["x"]`), "--pack", td("ctxpack.support-1.0.0.json"),
			"--request", td("invoke.support-refund.json"), "--run-context", td("run-context.support.json")}, exitInvalid, []string{"want a JSON object"}, nil},
		{"redactors expression that is not a string", []string{"pack", "validate", "--redactors", file("num.json", `{"emp_id": 5}`), td("ctxpack.support-1.0.0.json")},
			exitInvalid, []string{`entry "emp_id": want a regular expression string`}, nil},
		{"unknown rule iban2 refused at pack validation", []string{"pack", "validate", withRules("iban2.json", "iban2")},
			exitInvalid, []string{"referential: policy_layer.guardrails.redaction_rules[2]", `"iban2" is not known`}, nil},
		{"unknown rule refused before a run starts", run(withRules("iban3.json", "iban3")), exitInvalid, []string{`"iban3" is not known`}, nil},
		{"host rule known to validation with --redactors", []string{"pack", "validate", "--redactors", employee, hostPack}, exitOK, nil, nil},
		{"run output redacted by host and built-in rules", run(hostPack, "--redactors", employee, "--replay-packet", packet), exitOK,
			[]string{`"DECIDED"`, "[REDACTED]"}, []string{"EMP-123456", "DE89 3704", "hunter2"}},
		{"replay of that run with the host rule", []string{"replay", "--pack", hostPack, "--allow-unsigned", "--redactors", employee, packet}, exitOK,
			[]string{`"replay_equal"`}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runCLI(t, "", c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d\nstdout: %.600s\nstderr: %s", code, c.code, out, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(out+errs, w) {
					t.Errorf("output lacks %q\nstdout: %.600s\nstderr: %s", w, out, errs)
				}
			}
			for _, l := range c.leak {
				if strings.Contains(out+errs, l) {
					t.Errorf("output holds %q", l)
				}
			}
		})
	}
}
