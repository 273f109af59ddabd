package main

import "testing"

// FuzzParseRedactors: any --redactors file is refused or yields rules with
// well-formed, non-built-in names whose redaction is idempotent; never a
// panic.
func FuzzParseRedactors(f *testing.F) {
	f.Add([]byte(`{"employee_id": "\\bEMP-\\d{6}\\b"}`))
	f.Add([]byte(`{"a": "x", "a": "y"}`))
	f.Add([]byte(`{"iban": "X"}`))
	f.Add([]byte(`["x"]`))
	f.Add([]byte(`{"emp_id": "[A-Z]+"} trailing`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rules, err := parseRedactors(data)
		if err != nil {
			return
		}
		for name, r := range rules {
			if !ruleNameRE.MatchString(name) {
				t.Fatalf("name %q accepted", name)
			}
			for _, s := range []string{"EMP-123456 and [REDACTED]", string(data)} {
				once, _ := r(s)
				if twice, changed := r(once); twice != once || changed {
					t.Fatalf("rule %s is not idempotent on %q: %q → %q", name, s, once, twice)
				}
			}
		}
	})
}
