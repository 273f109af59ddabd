package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// evalData is the eval package's golden directory and support packs: the
// golden cases a pack repository's CI would keep beside its pack.
func evalData(name string) string { return filepath.Join("..", "..", "eval", "testdata", name) }

type packTestReport struct {
	Steps []struct {
		Step   string `json:"step"`
		Status string `json:"status"`
	} `json:"steps"`
	Cases []struct {
		Case   string `json:"case"`
		Passed bool   `json:"passed"`
	} `json:"cases"`
	Scorecard struct {
		Hash string `json:"scorecard_hash"`
	} `json:"scorecard"`
}

func TestPackTest(t *testing.T) {
	golden := evalData("golden")
	base := evalData(filepath.Join("packs", "support-1.0.0.json"))
	for _, tc := range []struct {
		name      string
		args      []string
		code      int
		failSteps []string
		failCases []string
	}{
		{name: "released pack passes its golden cases", args: []string{"--golden", golden, base}, code: exitOK},
		{name: "policy regression fails the evaluators and the release gate",
			args: []string{"--golden", golden, "--baseline", base, evalData(filepath.Join("packs", "support-2.0.0-policy-regression.json"))},
			code: exitInvalid, failSteps: []string{"evaluators", "release_gates"}, failCases: []string{"flow1-high-value-approved"}},
		{name: "a new tool changes the surface and fails the manifest step",
			args: []string{"--golden", golden, "--baseline", base, evalData(filepath.Join("packs", "support-1.1.0-new-tool.json"))},
			code: exitInvalid, failSteps: []string{"tool_manifest"}},
		{name: "a trigger runs only its checks", args: []string{"--golden", golden, "--trigger", "POLICY_BUNDLE_UPDATED", base}, code: exitOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"pack", "test", "--allow-unsigned", "--json"}, tc.args...)
			code, out, errs := runCLI(t, "", args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s\n%s", code, tc.code, errs, out)
			}
			var rep packTestReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("--json output: %v\n%s", err, out)
			}
			failed := map[string]bool{}
			for _, s := range rep.Steps {
				if s.Status == "fail" {
					failed[s.Step] = true
				}
			}
			for _, s := range tc.failSteps {
				if !failed[s] {
					t.Errorf("step %s did not fail: %+v", s, rep.Steps)
				}
			}
			if len(tc.failSteps) == 0 && len(failed) > 0 {
				t.Errorf("steps failed: %v", failed)
			}
			for _, c := range tc.failCases {
				found := false
				for _, rc := range rep.Cases {
					if rc.Case == c {
						found = true
						if rc.Passed {
							t.Errorf("case %s passed", c)
						}
					}
				}
				if !found {
					t.Errorf("case %s not in the report", c)
				}
			}
			if slicesContain(tc.args, "--trigger") {
				for _, s := range rep.Steps {
					if s.Step == "evaluators" || s.Step == "security" || s.Step == "diff" {
						t.Errorf("POLICY_BUNDLE_UPDATED ran step %s", s.Step)
					}
				}
			}
			if !strings.HasPrefix(rep.Scorecard.Hash, "sha256:") && !slicesContain(tc.args, "--trigger") {
				t.Errorf("scorecard hash %q", rep.Scorecard.Hash)
			}
		})
	}
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// The readable report is what a CI log shows: each step with its problems
// and warnings, each case and the scorecard table, then PASSED or FAILED.
func TestPackTestText(t *testing.T) {
	code, out, errs := runCLI(t, "", "pack", "test", "--allow-unsigned", "--golden", evalData("golden"),
		"--baseline", evalData(filepath.Join("packs", "support-1.0.0.json")), evalData(filepath.Join("packs", "support-2.0.0-policy-regression.json")))
	if code != exitInvalid {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"FAIL    release_gates", "policy moved from 1 to 0 (delta -1)", "RELEASE_GATE", "\nFAILED\n",
		// The risk gate's warning, by gate id, with the per-call fix.
		"PASS    policy\n        warning: risk: policy_layer.approval_gates[0].when: gate GATE_FINANCE_APPROVAL", "tool.args.amount_inr"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// A signed pack is verified with --pub; a plain one needs --allow-unsigned;
// bad flags are usage errors.
func TestPackTestSignedAndUsage(t *testing.T) {
	dir := t.TempDir()
	_, keys, _ := runCLI(t, "", "pack", "keygen", "--out", dir)
	files := strings.Fields(keys)
	base := evalData(filepath.Join("packs", "support-1.0.0.json"))
	code, signed, errs := runCLI(t, "", "pack", "sign", "--key", files[0], base)
	if code != exitOK {
		t.Fatalf("sign: %d %s", code, errs)
	}
	sp := writeFile(t, dir, "signed.json", []byte(signed))
	golden, emptyDir := evalData("golden"), t.TempDir()
	empty := writeFile(t, dir, "empty.json", nil)
	doc, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	badAdapter := writeFile(t, dir, "bad-adapter.json", []byte(strings.Replace(string(doc), `"p_orders_lookup",
"adapter_id": "adp_orders"`, `"p_orders_lookup",
"adapter_id": "adp_nope"`, 1)))
	if string(doc) == string(readFileT(t, badAdapter)) {
		t.Fatal("the bad-adapter pack is the pack")
	}
	if code, out, errs := runCLI(t, "", "pack", "test", "--pub", files[1], "--golden", golden, sp); code != exitOK {
		t.Errorf("signed pack: exit %d %s\n%s", code, errs, out)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--golden", golden, base}, exitUsage, "--allow-unsigned"},
		{[]string{"--allow-unsigned", "--golden", golden}, exitUsage, "one PACK"},
		{[]string{"--allow-unsigned", "--golden", golden, "--trigger", "NOPE", base}, exitUsage, "unknown trigger"},
		{[]string{"--allow-unsigned", "--golden", filepath.Join(dir, "missing"), base}, exitUsage, ""},
		{[]string{"--pub", files[1], "--golden", golden, base}, exitInvalid, ""},
		// No evidence: --golden is required, and a directory without
		// cases fails the golden steps.
		{[]string{"--allow-unsigned", base}, exitUsage, "--golden DIR is required"},
		{[]string{"--allow-unsigned", "--golden", emptyDir, base}, exitInvalid, ""},
		// A baseline given is never "no baseline".
		{[]string{"--allow-unsigned", "--golden", golden, "--baseline", empty, base}, exitUsage, "baseline file is empty"},
		{[]string{"--allow-unsigned", "--golden", golden, "--baseline=", base}, exitUsage, "--baseline needs a FILE"},
		// Stdin is one input at most.
		{[]string{"--allow-unsigned", "--golden", golden, "--baseline", "-", "-"}, exitUsage, "only one input"},
		{[]string{"--allow-unsigned", "--golden", golden, "--redactors", "-", "-"}, exitUsage, "only one input"},
		// A validation failure fails whatever the trigger selects.
		{[]string{"--allow-unsigned", "--golden", golden, "--trigger", "MODEL_CONFIG_UPDATED", badAdapter}, exitInvalid, ""},
	} {
		code, out, errs := runCLI(t, "", append([]string{"pack", "test"}, tc.args...)...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("pack test %v: exit %d, stderr %q, stdout %q", tc.args, code, errs, out)
		}
	}
}

func readFileT(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
