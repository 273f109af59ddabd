package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/contextos/contextos/internal/sortedkeys"
	"io"
	"regexp"
	"unicode/utf8"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
)

// redactorsFlag is --redactors FILE: a JSON object, redaction rule name →
// regular expression (Go RE2). Its rules are added to the gateway, and
// their names are made known to pack validation (validation), so that packs may name
// them in policy_layer.guardrails.redaction_rules.
type redactorsFlag struct {
	path  string
	rules map[string]gateway.Redactor
}

func (r *redactorsFlag) register(fs *flag.FlagSet) {
	fs.StringVar(&r.path, "redactors", "", "redactors `FILE`: a JSON object, redaction rule name → regular expression (RE2) that packs may name")
}

// load reads the file, once. Without the flag it does nothing.
func (r *redactorsFlag) load(stdin io.Reader) error {
	if r.path == "" || r.rules != nil {
		return nil
	}
	data, err := readInput(r.path, stdin)
	if err != nil {
		return err
	}
	rules, err := parseRedactors(data)
	if err != nil {
		return fmt.Errorf("--redactors %s: %w", r.path, err)
	}
	r.rules = rules
	return nil
}

// validation is the pack validation the flag calls for: its rule names
// are known.
func (r *redactorsFlag) validation() *pack.ValidateOptions {
	return &pack.ValidateOptions{RedactionRules: sortedkeys.Of(r.rules)}
}

// ruleNameRE is the shape of a host rule name.
var ruleNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// parseRedactors decodes a redactors file. Refused, naming the entry: a
// document that is not one JSON object of strings, a duplicate name, a
// name that is not lower_snake_case (so no two names differ only in
// case), a built-in rule's name (a regular expression would silently
// replace its checksum-validated patterns), an expression that does not
// compile, and one that matches the empty string.
func parseRedactors(data []byte) (map[string]gateway.Redactor, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("want a JSON object: rule name → regular expression")
	}
	builtin := gateway.BuiltinRedactors()
	exprs := map[string]string{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name := t.(string)
		var expr string
		if err := dec.Decode(&expr); err != nil {
			return nil, fmt.Errorf("entry %q: want a regular expression string", clipName(name))
		}
		_, dup := exprs[name]
		switch {
		case dup:
			return nil, fmt.Errorf("entry %q is given twice", clipName(name))
		case builtin[name] != nil:
			return nil, fmt.Errorf("entry %q is a built-in rule; name yours differently", name)
		case !ruleNameRE.MatchString(name):
			return nil, fmt.Errorf("entry %q: a rule name is lower_snake_case, at most 64 characters", clipName(name))
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, fmt.Errorf("entry %q: invalid regular expression: %v", name, err)
		}
		if re.MatchString("") {
			return nil, fmt.Errorf("entry %q: the expression matches the empty string", name)
		}
		exprs[name] = expr
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON object")
	}
	rules := make(map[string]gateway.Redactor, len(exprs))
	for name, expr := range exprs {
		r, err := gateway.RegexpRedactor(expr)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", name, err)
		}
		rules[name] = r
	}
	return rules, nil
}

func clipName(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
