// Package sensitive owns the catalogue of secrets and personal data: the
// patterns for payment card numbers, PANs, IBANs, email addresses, phone
// numbers, US social security numbers, API keys, bearer and basic
// credentials, private keys, passwords in key=value text, credentials in
// URLs and base64-wrapped secrets, and the predicate for member names
// whose values are secrets. The pack secret scanner, the gateway's
// redaction rules and the transport's error scrubbing are all built on it.
//
// Detection names the kind of a finding, never its value. Redaction
// replaces each finding with Redacted; it is deterministic and idempotent
// (Redact of a redacted string returns it unchanged), and it allocates
// nothing when nothing matches: every pattern is guarded by a cheap
// prefilter computed in one pass over the string.
package sensitive

import (
	"net/url"
	"slices"
	"strings"
)

// Redacted is what a finding is replaced with.
const Redacted = "[REDACTED]"

// Kind is a class of sensitive data.
type Kind uint8

// The kinds, in the order Detect reports them (secrets first).
const (
	PrivateKey    Kind = iota // a PEM private key block
	Credential                // a bearer or basic credential
	APIKey                    // a vendor API key or token (AWS, Google, GitHub, Slack, Stripe, sk-, JWT, ...)
	URLCredential             // a user:password in a URL
	Password                  // the value of a secret-named key in key=value or key: value text
	Encoded                   // a base64 / base64url run decoding to text with any other kind
	Email                     // an email address
	Phone                     // an E.164 phone number
	IBAN                      // an ISO 13616 IBAN (mod-97 valid)
	Card                      // a Luhn-valid payment card number
	SSN                       // a US social security number
	PAN                       // an Indian permanent account number
	Aadhaar                   // an Indian Aadhaar number (Verhoeff-valid)
	numKinds
)

var kindInfo = [numKinds]struct {
	name, what string
	secret     bool
}{
	PrivateKey:    {"private_key", "a private key", true},
	Credential:    {"credential", "a bearer or basic credential", true},
	APIKey:        {"api_key", "an API key or token", true},
	URLCredential: {"url_credential", "a password in a URL", true},
	Password:      {"password", "a secret in key=value text", true},
	Encoded:       {"encoded", "base64-encoded sensitive data", true},
	Email:         {"email", "an email address", false},
	Card:          {"card", "a payment card number", false},
	SSN:           {"ssn", "a US social security number", false},
	PAN:           {"pan", "an Indian PAN", false},
	Aadhaar:       {"aadhaar", "an Aadhaar number", false},
	Phone:         {"phone", "a phone number", false},
	IBAN:          {"iban", "an IBAN", false},
}

// String returns the kind's stable name ("card", "iban", ...).
func (k Kind) String() string {
	if k < numKinds {
		return kindInfo[k].name
	}
	return "unknown"
}

// Secret reports whether the kind is a secret (a credential) rather than
// personal data.
func (k Kind) Secret() bool { return k < numKinds && kindInfo[k].secret }

// Set is a set of kinds.
type Set uint32

// Of returns the set of the kinds.
func Of(kinds ...Kind) Set {
	var s Set
	for _, k := range kinds {
		s |= 1 << k
	}
	return s
}

// Has reports whether k is in s.
func (s Set) Has(k Kind) bool { return s&(1<<k) != 0 }

// Sets of kinds.
var (
	// Secrets are the credentials: private keys, bearer and basic
	// credentials, API keys, URL credentials, key=value secrets and
	// base64-wrapped sensitive data.
	Secrets = Of(PrivateKey, Credential, APIKey, URLCredential, Password, Encoded)
	// PII is the personal data.
	PII = Of(Email, Card, SSN, PAN, Aadhaar, Phone, IBAN)
	// All is every kind.
	All = Secrets | PII
)

// rules are the built-in redaction rules by name.
//
// Every rule also redacts base64 runs that decode to sensitive data
// (Encoded): a card number wrapped in base64 is still a card number.
var rules = map[string]Set{
	"credit_card": Of(Card, Encoded),
	"pan":         Of(Card, PAN, Encoded),
	"iban":        Of(IBAN, Encoded),
	"email":       Of(Email, Encoded),
	"phone":       Of(Phone, Encoded),
	"ssn":         Of(SSN, Encoded),
	"secret":      Secrets,
}

// SecretRule is the name of the rule that also redacts the values of
// secret-named members (see IsSecretKey).
const SecretRule = "secret"

// Rule returns the set of kinds of a built-in redaction rule: credit_card
// (card numbers), pan (card numbers and Indian PANs), iban, email, phone,
// ssn and secret (every secret kind).
func Rule(name string) (Set, bool) {
	s, ok := rules[name]
	return s, ok
}

// RuleNames returns the names of the built-in redaction rules, sorted.
func RuleNames() []string {
	names := make([]string, 0, len(rules))
	for n := range rules {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Finding is one kind of sensitive data found in a string. What describes
// it (e.g. "an AWS access key id"); it never contains the value.
type Finding struct {
	Kind Kind
	What string
}

// span is a byte range of s to redact.
type span struct {
	start, end int
	kind       Kind
	what       string
}

// Detect reports the first kind of set found in s, in Kind order (secrets
// first), with a description that never contains the value.
func Detect(s string, set Set) (Finding, bool) {
	if s == "" {
		return Finding{}, false
	}
	st := measure(s)
	for k := Kind(0); k < numKinds; k++ {
		if !set.Has(k) {
			continue
		}
		if sp := detect(k, s, &st, nil, true); len(sp) > 0 {
			return Finding{Kind: sp[0].kind, What: sp[0].what}, true
		}
	}
	return Finding{}, false
}

// DetectEscaped is Detect of s as written and, when s holds a '%' and
// decodes, of s percent-decoded (url.PathUnescape): a value from a URL or
// a header whose escaping would hide a secret from Detect alone.
func DetectEscaped(s string, set Set) (Finding, bool) {
	if f, found := Detect(s, set); found {
		return f, true
	}
	if strings.IndexByte(s, '%') < 0 {
		return Finding{}, false
	}
	dec, err := url.PathUnescape(s)
	if err != nil {
		return Finding{}, false
	}
	return Detect(dec, set)
}

// maxPasses bounds the passes Redact makes to reach a fixed point; a
// string still changing after them is redacted whole (fail closed).
const maxPasses = 8

// Redact replaces every finding of set in s with Redacted and reports
// whether it changed anything. It is deterministic and idempotent:
// Redact(Redact(s)) returns its input unchanged.
func Redact(s string, set Set) (string, bool) {
	out, changed := redactOnce(s, set)
	if !changed {
		return s, false
	}
	// A replacement can, rarely, expose a new finding (a key=value pair
	// whose separator a redacted span held): redact to a fixed point.
	for range maxPasses {
		next, again := redactOnce(out, set)
		if !again {
			return out, true
		}
		out = next
	}
	return Redacted, true
}

// redactOnce makes one pass: every detector of set, then the union of
// their spans replaced.
func redactOnce(s string, set Set) (string, bool) {
	if s == "" {
		return s, false
	}
	st := measure(s)
	var spans []span
	for k := Kind(0); k < numKinds; k++ {
		if set.Has(k) {
			spans = detect(k, s, &st, spans, false)
		}
	}
	if len(spans) == 0 {
		return s, false
	}
	return replace(s, spans), true
}

// replace writes s with the union of spans replaced by Redacted; spans
// that overlap or touch become one.
func replace(s string, spans []span) string {
	slices.SortFunc(spans, func(a, b span) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end
	})
	var b strings.Builder
	b.Grow(len(s))
	pos := 0
	for i := 0; i < len(spans); {
		start, end := spans[i].start, spans[i].end
		for i++; i < len(spans) && spans[i].start <= end; i++ {
			end = max(end, spans[i].end)
		}
		start = max(start, pos)
		b.WriteString(s[pos:start])
		b.WriteString(Redacted)
		pos = end
	}
	b.WriteString(s[pos:])
	return b.String()
}

// stats are counted in one pass over a string, for the prefilters.
type stats struct {
	digits       int // ASCII and fullwidth
	letters      int
	upper        int
	maxRun       int // the longest run of base64 / base64url characters
	maxBlock     int // the most such characters in runs split only by whitespace
	at, plus     bool
	dash, colon  bool
	eq, fullwide bool
}

func measure(s string) stats {
	var st stats
	run, block := 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isB64(c) {
			run++
			block++
			st.maxRun = max(st.maxRun, run)
			st.maxBlock = max(st.maxBlock, block)
		} else {
			run = 0
			if !isSpace(c) {
				block = 0
			}
		}
		switch {
		case c >= '0' && c <= '9':
			st.digits++
		case c >= 'A' && c <= 'Z':
			st.upper++
			st.letters++
		case c >= 'a' && c <= 'z':
			st.letters++
		case c == '@':
			st.at = true
		case c == '+':
			st.plus = true
		case c == '-':
			st.dash = true
		case c == ':':
			st.colon = true
		case c == '=':
			st.eq = true
		case c == 0xEF:
			if i+2 < len(s) && s[i+1] == 0xBC && s[i+2] >= 0x90 && s[i+2] <= 0x99 {
				st.fullwide = true
				st.digits++
			}
		}
	}
	return st
}

// detect appends the spans of kind k found in s; with first, it may stop
// after one. (A switch, not a table of funcs: st stays on the stack.)
func detect(k Kind, s string, st *stats, spans []span, first bool) []span {
	switch k {
	case PrivateKey:
		return findPrivateKeys(s, st, spans, first)
	case Credential:
		return findCredentials(s, st, spans, first)
	case APIKey:
		return findAPIKeys(s, st, spans, first)
	case URLCredential:
		return findURLCredentials(s, st, spans, first)
	case Password:
		return findPasswords(s, st, spans, first)
	case Encoded:
		return findEncodedDepth(s, st, spans, first, 0)
	case Email:
		return findEmails(s, st, spans, first)
	case Phone:
		return findPhones(s, st, spans, first)
	case IBAN:
		return findIBANs(s, st, spans, first)
	case Card:
		return findCards(s, st, spans, first)
	case SSN:
		return findSSNs(s, st, spans, first)
	case PAN:
		return findPANs(s, st, spans, first)
	case Aadhaar:
		return findAadhaar(s, st, spans, first)
	}
	return spans
}

// isRedactedAt reports whether s holds the marker at i.
func isRedactedAt(s string, i int) bool { return strings.HasPrefix(s[i:], Redacted) }

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isUpper(c byte) bool  { return c >= 'A' && c <= 'Z' }
func isLower(c byte) bool  { return c >= 'a' && c <= 'z' }
func isLetter(c byte) bool { return isUpper(c) || isLower(c) }
func isAlnum(c byte) bool  { return isDigit(c) || isLetter(c) }
func isWord(c byte) bool   { return isAlnum(c) || c == '_' }
func isHex(c byte) bool    { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func lower(c byte) byte {
	if isUpper(c) {
		return c + 'a' - 'A'
	}
	return c
}

// indexFold is strings.Index for an ASCII lower-case needle, ignoring
// case, without allocating.
func indexFold(s, needle string, from int) int {
	n := len(needle)
	for i := from; i+n <= len(s); i++ {
		if lower(s[i]) != needle[0] {
			continue
		}
		j := 1
		for j < n && lower(s[i+j]) == needle[j] {
			j++
		}
		if j == n {
			return i
		}
	}
	return -1
}
