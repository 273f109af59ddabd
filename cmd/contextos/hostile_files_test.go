package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostileFiles: every input file of the CLI refuses duplicate members,
// invalid UTF-8 and over-budget expressions with exit 1, a message naming
// the file and the JSON path, and nothing on stdout (nothing ran).
func TestHostileFiles(t *testing.T) {
	td := func(n string) string {
		b, err := os.ReadFile(testFile(n))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	edit := func(doc, old, new string) string {
		t.Helper()
		if !strings.Contains(doc, old) {
			t.Fatalf("fixture lacks %q", old)
		}
		return strings.Replace(doc, old, new, 1)
	}
	plan, tools, req, rc, pk := td("plan.refund-4200.json"), td("tools.refund.json"), td("invoke.support-refund.json"), td("run-context.support.json"), td("ctxpack.support-1.0.0.json")
	deepRule := strings.Repeat(`{"!":`, 70) + "true" + strings.Repeat("}", 70)
	ones := "[" + strings.Repeat("1,", 2999) + "1]"
	hidden := `{"if":[true,true,{"map":[` + ones + `,{"map":[` + ones + `,{"map":[` + ones + `,1]}]}]}]}`
	explode := `{"reduce":[[` + strings.Repeat("1,", 63) + `1],{"cat":[{"var":"accumulator"},{"var":"accumulator"}]},"ab"]}`

	cases := []struct {
		name string
		cmd  string // run, validate-invoke, validate-rc, pack, compile, replay
		flag string // the file flag of run/compile that gets the hostile document
		doc  string
		want []string // parts of stderr
	}{
		{"plan with a duplicated refund amount", "run", "--plan", edit(plan, `"amount_inr": 4200,`, `"amount_inr": 1, "amount_inr": 4200,`), []string{"[1].steps[0].args.amount_inr", "more than once"}},
		{"plan with a duplicated decision outcome", "run", "--plan", edit(plan, `"outcome": "approved",`, `"outcome": "denied", "outcome": "approved",`), []string{"[1].decision.outcome", "more than once"}},
		{"plan with an escaped duplicate", "run", "--plan", edit(plan, `"currency": "INR"}}`, `"currency": "INR", "\u0063urrency": "USD"}}`), []string{"[1].steps[0].args.currency", "more than once"}},
		{"plan with invalid UTF-8", "run", "--plan", edit(plan, `"Delivered order`, "\"Delivered \xff order"), []string{"[1].decision.rationale", "not valid UTF-8"}},
		{"tools file with a duplicated status", "run", "--tools", edit(tools, `[{"status": "ok", "output": {"transaction_id"`, `[{"status": "error", "status": "ok", "output": {"transaction_id"`), []string{"adp_payments.issue_refund[0].status", "more than once"}},
		{"tools file with negative tokens", "run", "--tools", edit(tools, `[{"status": "ok", "output": {"transaction_id"`, `[{"status": "ok", "tokens": -5, "output": {"transaction_id"`), []string{"adp_payments.issue_refund[0]", "tokens must be ≥ 0"}},
		{"tools file with a lone surrogate", "run", "--tools", edit(tools, `"delivered"`, `"deliv\udfffered"`), []string{"adp_orders.lookup[0].output.status", "lone UTF-16 surrogate"}},
		{"request with a duplicated refund amount", "run", "--request", edit(req, `"refund_amount": 4200,`, `"refund_amount": 10, "refund_amount": 4200,`), []string{"input.context.refund_amount", "more than once"}},
		{"request with a byte order mark", "run", "--request", "\xef\xbb\xbf" + req, []string{"byte order mark"}},
		{"run context with a duplicated safety mode", "run", "--run-context", edit(rc, `"safety_mode": "destructive",`, `"safety_mode": "read_only", "safety_mode": "destructive",`), []string{"safety_mode", "more than once"}},
		{"endpoints file with a duplicated endpoint", "run", "--endpoints", `{"internal://payments": {"transport": "external", "url": "http://127.0.0.1:1/a"}, "internal://payments": {"transport": "external", "url": "http://127.0.0.1:1/b"}}`, []string{"internal://payments", "more than once"}},
		{"validate: invoke with a duplicated tenant", "validate-invoke", "", edit(req, `"tenant_id": "tenant_acme_prod",`, `"tenant_id": "tenant_acme_prod", "tenant_id": "tenant_evil",`), []string{"tenant_id", "more than once"}},
		{"validate: run context with invalid UTF-8 in a member name", "validate-rc", "", edit(rc, `"safety_mode"`, "\"safety_mode\xc0\""), []string{"member name is not valid UTF-8"}},
		{"pack validate: a duplicated pack id", "pack", "", edit(pk, `"pack_id": "ctxpack.support",`, `"pack_id": "ctxpack.support", "pack_id": "ctxpack.evil",`), []string{"pack_meta.pack_id", "more than once"}},
		{"pack validate: a duplicated operator in a rule", "pack", "", edit(pk, `"if": { "==": [{ "var": "request.context.identity_verified" }, true] },`, `"if": { "==": [{ "var": "request.context.identity_verified" }, true], "==": [1, 1] },`), []string{"rules[0].if.==", "more than once"}},
		{"pack validate: a rule nested too deeply", "pack", "", edit(pk, `"if": { "==": [{ "var": "request.context.identity_verified" }, true] },`, `"if": `+deepRule+`,`), []string{"rules[0].if", "nested too deeply"}},
		{"pack validate: a rule that explodes", "pack", "", edit(pk, `"if": { "==": [{ "var": "request.context.identity_verified" }, true] },`, `"if": `+explode+`,`), []string{"rules[0].if", "exceeds its budget"}},
		{"pack validate: a costly constant in a branch never taken", "pack", "", edit(pk, `"if": { "==": [{ "var": "request.context.identity_verified" }, true] },`, `"if": `+hidden+`,`), []string{"rules[0].if", "exceeds its budget"}},
		{"compile: request with a duplicated refund amount", "compile", "--request", edit(req, `"refund_amount": 4200,`, `"refund_amount": 10, "refund_amount": 4200,`), []string{"input.context.refund_amount", "more than once"}},
		{"compile: evidence with a duplicated trust level", "compile", "--evidence", `[{"evidence_id":"e1","trust":"low","trust":"high"}]`, []string{"[0].trust", "more than once"}},
		{"replay: packet with a duplicated member", "replay", "", `{"packet_id":"p","packet_id":"q"}`, []string{"packet_id", "more than once"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "hostile.json")
			if err := os.WriteFile(file, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			var args []string
			switch tc.cmd {
			case "run":
				args = runArgs(tc.flag, file)
			case "compile":
				args = []string{"compile", "--allow-unsigned", "--pack", testFile("ctxpack.support-1.0.0.json"), "--request", testFile("invoke.support-refund.json"),
					"--run-context", testFile("run-context.support.json"), "--ontology", "ont.support@1.0.0", tc.flag, file}
			case "validate-invoke":
				args = []string{"validate", "--kind", "invoke-agent", file}
			case "validate-rc":
				args = []string{"validate", "--kind", "run-context", file}
			case "pack":
				args = []string{"pack", "validate", file}
			case "replay":
				args = []string{"replay", "--pack", testFile("ctxpack.support-1.0.0.json"), "--allow-unsigned", file}
			}
			code, out, errs := runCLI(t, "", args...)
			all := errs + out // pack and schema validation print their problems on stdout
			if code != exitInvalid {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			if tc.cmd == "run" || tc.cmd == "compile" || tc.cmd == "replay" {
				if out != "" {
					t.Errorf("stdout %q: something ran", out)
				}
				if !strings.Contains(errs, file) {
					t.Errorf("stderr %q does not name the file", errs)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("output %q lacks %q", all, w)
				}
			}
		})
	}
}
