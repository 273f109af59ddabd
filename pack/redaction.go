package pack

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/contextos/contextos/internal/sensitive"
)

// CodeUnknownRedactionRule is the problem code of a redaction rule that is
// neither built in nor named in ValidateOptions.RedactionRules.
const CodeUnknownRedactionRule = "unknown_redaction_rule"

// ErrRedactionRuleName reports a name in ValidateOptions.RedactionRules
// that is not a valid rule name; nothing is validated then.
var ErrRedactionRuleName = errors.New("pack: invalid redaction rule name")

// ValidateOptions tunes validation (Validate, and every function or type
// that validates: DecodeAndValidate, Sign, Verify, ApplyOverlay, Diff, the
// registries and the Resolver). A nil *ValidateOptions is the zero value:
// only the built-in redaction rules are known.
type ValidateOptions struct {
	// RedactionRules are the names of the redaction rules the host
	// provides beyond the built-in ones (credit_card, email, iban, pan,
	// phone, secret, ssn): gateway.Options.Redactors, the CLI's
	// --redactors. A pack may name them in
	// policy_layer.guardrails.redaction_rules; validation refuses any other
	// name (CodeUnknownRedactionRule), so a misspelt rule fails when the
	// pack is validated, not when it runs. Each name must be non-empty, at
	// most 64 bytes of printable UTF-8 without spaces; otherwise validation
	// fails with an error matching ErrRedactionRuleName.
	RedactionRules []string
	// Gates are further validation gates (package eval's replay and
	// evaluation gates over golden cases) that Validate runs after the
	// built-in ones, in order, and only when those found no problem (a gate
	// may compile and run the pack). Everything that validates runs them,
	// so Sign and the registries' Put refuse a pack that fails them.
	Gates []GateFunc
	// ReviewRoles are the roles whose sign-off a registry validating with
	// these options requires before a version is reviewed (see
	// Entry.SignOff). Each is a lower-case identifier. Default (nil or
	// empty): DefaultReviewRoles, so a review is never skipped.
	ReviewRoles []ReviewRole
	// AllowMultiRoleReviewer lets one reviewer sign off in several of the
	// required roles (a team too small for one person per role). Default:
	// each required role needs its own reviewer — four roles, four people —
	// reviewers compared after Unicode normalization and case folding, so
	// "Ana" and "ana" are one reviewer.
	AllowMultiRoleReviewer bool
}

// GateFunc is a validation gate a host adds (ValidateOptions.Gates): it
// returns the problems it finds in the pack, each naming its gate.
type GateFunc func(*Pack) []Problem

// clone returns a copy of o that later changes by the caller do not
// affect.
func (o *ValidateOptions) clone() *ValidateOptions {
	if o == nil {
		return nil
	}
	return &ValidateOptions{RedactionRules: slices.Clone(o.RedactionRules), Gates: slices.Clone(o.Gates), ReviewRoles: slices.Clone(o.ReviewRoles),
		AllowMultiRoleReviewer: o.AllowMultiRoleReviewer}
}

// Check reports an invalid option: a redaction rule name that is empty,
// longer than 64 bytes, or not printable UTF-8 without spaces (the error
// matches ErrRedactionRuleName), or a review role that is not a
// lower-case identifier (ErrReview). Everything that validates checks its
// options first; a host calls Check to refuse bad options at
// construction. A nil *ValidateOptions is valid.
func (o *ValidateOptions) Check() error {
	if o == nil {
		return nil
	}
	for _, n := range o.RedactionRules {
		ok := n != "" && len(n) <= 64 && utf8.ValidString(n)
		for _, r := range n {
			ok = ok && unicode.IsPrint(r) && !unicode.IsSpace(r)
		}
		if !ok {
			return fmt.Errorf("%w: %q", ErrRedactionRuleName, clip(n))
		}
	}
	return o.checkReviewRoles()
}

// knownRedactionRule reports whether validation with o accepts the rule
// name.
func (o *ValidateOptions) knownRedactionRule(name string) bool {
	if _, ok := sensitive.Rule(name); ok {
		return true
	}
	return o != nil && slices.Contains(o.RedactionRules, name)
}

// redactionRuleNames returns the rule names validation with o accepts,
// sorted.
func (o *ValidateOptions) redactionRuleNames() []string {
	names := sensitive.RuleNames()
	if o != nil {
		for _, n := range o.RedactionRules {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	return names
}

// redactionRules refuses redaction rules nobody knows (gate referential).
func (v *validator) redactionRules() {
	for i, name := range v.p.PolicyLayer.Guardrails.RedactionRules {
		if !v.opts.knownRedactionRule(name) {
			v.add(GateReferential, CodeUnknownRedactionRule, idx("policy_layer.guardrails.redaction_rules", i),
				"redaction rule %q is not known (known: %s); a host adds rules with gateway.Options.Redactors or --redactors",
				clip(name), strings.Join(v.opts.redactionRuleNames(), ", "))
		}
	}
}
