package pack

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/contextos/contextos/internal/sensitive"
)

// CodeUnknownRedactionRule is the problem code of a redaction rule that is
// neither built in nor registered by the host.
const CodeUnknownRedactionRule = "unknown_redaction_rule"

// ErrRedactionRuleName reports a name RegisterRedactionRules refuses.
var ErrRedactionRuleName = errors.New("pack: invalid redaction rule name")

// registered holds the host's redaction rule names (see
// RegisterRedactionRules).
var registered struct {
	mu    sync.RWMutex
	names map[string]bool
}

// RegisterRedactionRules makes redaction rule names that the host provides
// beyond the built-in ones (gateway.Options.Redactors, the CLI's
// --redactors) known to pack validation, so that packs naming them
// validate. Validation refuses a pack naming any other rule
// (CodeUnknownRedactionRule), so a misspelt rule fails when the pack is
// validated, not when it runs.
//
// Registration is process-wide and additive: Validate, Sign, Verify and
// the registries validate without options, and a pack is validated before
// any runtime exists, so the names must be registered before packs using
// them are validated or stored. contextos.New registers its gateway's
// rule names. The gateway still refuses, when a run starts, a rule that its
// own rules lack. A name must be non-empty, at most 64 bytes of printable
// UTF-8 without spaces; otherwise nothing is registered and the error
// matches ErrRedactionRuleName.
func RegisterRedactionRules(names ...string) error {
	for _, n := range names {
		if err := checkRuleName(n); err != nil {
			return err
		}
	}
	registered.mu.Lock()
	defer registered.mu.Unlock()
	if registered.names == nil {
		registered.names = map[string]bool{}
	}
	for _, n := range names {
		registered.names[n] = true
	}
	return nil
}

func checkRuleName(n string) error {
	ok := n != "" && len(n) <= 64 && utf8.ValidString(n)
	for _, r := range n {
		ok = ok && unicode.IsPrint(r) && !unicode.IsSpace(r)
	}
	if !ok {
		return fmt.Errorf("%w: %q", ErrRedactionRuleName, clip(n))
	}
	return nil
}

// RedactionRules returns the redaction rule names validation accepts: the
// built-in rules (credit_card, email, iban, pan, phone, secret, ssn) and
// the registered ones, sorted.
func RedactionRules() []string {
	names := sensitive.RuleNames()
	registered.mu.RLock()
	for n := range registered.names {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	registered.mu.RUnlock()
	slices.Sort(names)
	return names
}

// KnownRedactionRule reports whether validation accepts the rule name.
func KnownRedactionRule(name string) bool {
	if _, ok := sensitive.Rule(name); ok {
		return true
	}
	registered.mu.RLock()
	defer registered.mu.RUnlock()
	return registered.names[name]
}

// redactionRules refuses redaction rules nobody knows (gate referential).
func (v *validator) redactionRules() {
	for i, name := range v.p.PolicyLayer.Guardrails.RedactionRules {
		if !KnownRedactionRule(name) {
			v.add(GateReferential, CodeUnknownRedactionRule, idx("policy_layer.guardrails.redaction_rules", i),
				"redaction rule %q is not known (known: %s); a host adds rules with gateway.Options.Redactors or --redactors",
				clip(name), strings.Join(RedactionRules(), ", "))
		}
	}
}
