package sensitive

import (
	"bytes"
	"strings"
	"sync"
	"sync/atomic"
)

// apiKeys are the vendor key formats. Each is found where its literal
// lit occurs (the key begins back bytes before it) and its steps match
// from there; a key may follow a character that is not a letter or digit
// — the start of the text, a space, punctuation, and also '_', so a key
// glued to a name ("e_sk-proj-…", "token_xoxb-…") is found — but not a
// letter or digit, which would make an ordinary word a key ("risk-…",
// "highp_…").
var apiKeys = []struct {
	lit, what string
	back      int
	steps     []keyStep
}{
	{"AKIA", "an AWS access key id", 0, keySteps(lit("AKIA"), run(upperDigits, 16, 16), boundary())},
	{"ASIA", "an AWS access key id", 0, keySteps(lit("ASIA"), run(upperDigits, 16, 16), boundary())},
	{"AIza", "a Google API key", 0, keySteps(lit("AIza"), run(base64URL, 35, 35))},
	{"gh", "a GitHub token", 0, keySteps(lit("gh"), oneOf("pousr"), lit("_"), run(alnums, 36, 0), boundary())},
	{"github_pat_", "a GitHub token", 0, keySteps(lit("github_pat_"), run(words, 22, 0))},
	{"glpat-", "a GitLab token", 0, keySteps(lit("glpat-"), run(base64URL, 20, 0))},
	{"xox", "a Slack token", 0, keySteps(lit("xox"), oneOf("abposr"), lit("-"), run(alnumDash, 10, 0))},
	{"k_", "a Stripe secret key", 1, keySteps(oneOf("rs"), lit("k_"), lit("live", "test"), lit("_"), run(alnums, 16, 0))},
	{"sk-", "an API secret key", 0, keySteps(lit("sk-"), run(base64URL, 10, 0))},
	{"npm_", "an npm token", 0, keySteps(lit("npm_"), run(alnums, 36, 36), boundary())},
	{"SG.", "a SendGrid API key", 0, keySteps(lit("SG."), run(base64URL, 22, 22), lit("."), run(base64URL, 43, 43))},
	{"eyJ", "a JSON Web Token", 0, keySteps(lit("eyJ"), run(base64URL, 8, 0), lit(".eyJ"), run(base64URL, 8, 0), lit("."), run(base64URL, 0, 0))},
}

func findAPIKeys(s string, st *stats, spans []span, first bool) []span {
	if st.letters < 4 || len(s) < 16 {
		return spans
	}
	for k := range apiKeys {
		n := len(spans)
		spans = findAPIKey(s, k, spans, first)
		if first && len(spans) > n {
			return spans
		}
	}
	return spans
}

// findAPIKey appends the keys of format apiKeys[k] in s. Keys after a
// word boundary are found as the regexp \b<format> finds them, leftmost
// first, none overlapping; keys glued after '_' are found apart, also
// none overlapping, so a glued key never hides one the boundary finds.
// Each scan moves forwards, and a failed match's run is not read again
// (see matchKey): the whole is linear in s.
func findAPIKey(s string, k int, spans []span, first bool) []span {
	f := &apiKeys[k]
	plainFrom, gluedFrom, dead := 0, 0, 0
	for from := 0; ; {
		j := strings.Index(s[from:], f.lit)
		if j < 0 {
			return spans
		}
		i := from + j - f.back
		from += j + 1
		if i < 0 || i < dead {
			continue
		}
		glued := i > 0 && s[i-1] == '_'
		switch {
		case glued && i < gluedFrom, !glued && i < plainFrom:
			continue // inside a key found
		case i > 0 && !glued && isAlnum(s[i-1]):
			continue // glued to a letter or digit: a word, not a key
		}
		e, failed := matchKey(s, i, f.steps)
		if e < 0 {
			dead = failed
			continue
		}
		spans = append(spans, span{i, e, APIKey, f.what})
		if first {
			return spans
		}
		if glued {
			gluedFrom = e
		} else {
			plainFrom = e
		}
	}
}

// A keyStep is one part of a key format: one of some literals, one of
// some bytes, a run of min to max (0: no bound) bytes of a class, taken
// greedily, or a word boundary after the key (the regexp \b: the key's
// last byte is a letter or digit here, so the next must not be a letter,
// digit or '_'). Greedy runs need no backtracking: every run is followed
// by a byte outside its class, a boundary or the end.
type keyStep struct {
	lits     []string
	bytes    string
	class    *[256]bool
	min, max int
}

func keySteps(steps ...keyStep) []keyStep { return steps }

func lit(alts ...string) keyStep { return keyStep{lits: alts} }
func oneOf(bytes string) keyStep { return keyStep{bytes: bytes} }
func boundary() keyStep          { return keyStep{min: -1} }
func run(c *[256]bool, min, max int) keyStep {
	return keyStep{class: c, min: min, max: max}
}

// matchKey returns the end of the key format steps matches at s[i:], or
// -1 and how far no other match can start: when the format begins with a
// literal inside the class of the unbounded run that follows it (a JSON
// Web Token's "eyJ" and its first segment) and the match failed after
// that run, a match starting inside the run would read the same run to
// the same end and fail the same way.
func matchKey(s string, i int, steps []keyStep) (end, failed int) {
	failed = -1
	for n, st := range steps {
		switch {
		case st.lits != nil:
			w := -1
			for _, l := range st.lits {
				if strings.HasPrefix(s[i:], l) {
					w = len(l)
					break
				}
			}
			if w < 0 {
				return -1, failed
			}
			i += w
		case st.bytes != "":
			if i >= len(s) || strings.IndexByte(st.bytes, s[i]) < 0 {
				return -1, failed
			}
			i++
		case st.class != nil:
			e := i
			for e < len(s) && st.class[s[e]] && (st.max == 0 || e-i < st.max) {
				e++
			}
			if e-i < st.min {
				return -1, failed
			}
			if n == 1 && st.max == 0 && inClass(steps[0].lits, st.class) {
				failed = e
			}
			i = e
		default: // boundary
			if i < len(s) && isWord(s[i]) {
				return -1, failed
			}
		}
	}
	return i, -1
}

// inClass reports whether every byte of every literal is in c.
func inClass(lits []string, c *[256]bool) bool {
	for _, l := range lits {
		for i := 0; i < len(l); i++ {
			if !c[l[i]] {
				return false
			}
		}
	}
	return lits != nil
}

// The classes of the key formats' bodies.
var (
	upperDigits = keyClass("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")
	alnums      = keyClass("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
	words       = keyClass("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
	alnumDash   = keyClass("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-")
	base64URL   = keyClass("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_-")
)

func keyClass(members string) *[256]bool {
	var c [256]bool
	for i := 0; i < len(members); i++ {
		c[members[i]] = true
	}
	return &c
}

// Private keys: a PEM (or PGP) block whose header names a PRIVATE KEY,
// redacted whole, to its END line or, when that is missing, to the end of
// the string.
func findPrivateKeys(s string, st *stats, spans []span, first bool) []span {
	if st.upper < 10 || !strings.Contains(s, "PRIVATE KEY") {
		return spans
	}
	for from := 0; ; {
		k := strings.Index(s[from:], "-----BEGIN ")
		if k < 0 {
			return spans
		}
		start := from + k
		h := strings.Index(s[start+11:], "-----")
		if h < 0 {
			return spans
		}
		header := s[start+11 : start+11+h]
		from = start + 11 + h + 5
		if !strings.Contains(header, "PRIVATE KEY") {
			continue
		}
		end := len(s)
		if e := strings.Index(s[from:], "-----END "); e >= 0 {
			if c := strings.Index(s[from+e+9:], "-----"); c >= 0 {
				end = from + e + 9 + c + 5
			}
		}
		spans = append(spans, span{start, end, PrivateKey, kindInfo[PrivateKey].what})
		if first || end == len(s) {
			return spans
		}
		from = end
	}
}

// Bearer and basic credentials: "Bearer <token>" (a token of 8 or more
// characters with a digit, or of 20 or more) and "Basic <base64 of
// user:password>". The scheme stays; the credential goes.
func findCredentials(s string, st *stats, spans []span, first bool) []span {
	if st.letters < 5 {
		return spans
	}
	for _, scheme := range [2]string{"bearer", "basic"} {
		for from := 0; ; {
			i := indexFold(s, scheme, from)
			if i < 0 {
				break
			}
			from = i + len(scheme)
			if i > 0 && isLetter(s[i-1]) {
				continue
			}
			j := from
			for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
				j++
			}
			if j == from {
				continue
			}
			e := j
			for e < len(s) && isTokenChar(s[e]) {
				e++
			}
			tok := s[j:e]
			from = max(from, e)
			if !credential(scheme, tok) {
				continue
			}
			what := "a bearer token"
			if scheme == "basic" {
				what = "a basic credential"
			}
			spans = append(spans, span{j, e, Credential, what})
			if first {
				return spans
			}
			from = e
		}
	}
	return spans
}

func isTokenChar(c byte) bool {
	return isAlnum(c) || strings.IndexByte("._~+/=-", c) >= 0
}

func credential(scheme, tok string) bool {
	if len(tok) < 8 {
		return false
	}
	if scheme == "basic" {
		var buf [96]byte
		text, ok := decodeBase64(tok, buf[:0])
		return ok && bytes.IndexByte(text, ':') > 0
	}
	if len(tok) >= 20 {
		return true
	}
	for i := 0; i < len(tok); i++ {
		if isDigit(tok[i]) {
			return true
		}
	}
	return false
}

// Credentials in URLs: "scheme://user:password@host"; the user info goes.
func findURLCredentials(s string, st *stats, spans []span, first bool) []span {
	if !st.at || !st.colon {
		return spans
	}
	for from := 0; ; {
		k := strings.Index(s[from:], "://")
		if k < 0 {
			return spans
		}
		i := from + k + 3
		from = i
		if k == 0 || !isLetter(s[i-4]) {
			continue
		}
		j, colon := i, false
		for j < len(s) && strings.IndexByte("/ \t\r\n@?#\"'<>", s[j]) < 0 {
			colon = colon || s[j] == ':'
			j++
		}
		if j >= len(s) || s[j] != '@' || !colon || j == i {
			continue
		}
		spans = append(spans, span{i, j, URLCredential, kindInfo[URLCredential].what})
		if first {
			return spans
		}
		from = j
	}
}

// Passwords in text: the value of a secret-named key (IsSecretKey) in
// key=value or key: value form, the key optionally quoted (JSON, also
// escaped inside a string), the value quoted or up to the next delimiter.
// An authorization scheme ("Bearer ...") before the value stays. A URL
// query parameter that signs the URL (querySignature) is a secret-named
// key too.
func findPasswords(s string, st *stats, spans []span, first bool) []span {
	if !st.eq && !st.colon {
		return spans
	}
	for from := 0; ; {
		k := strings.IndexAny(s[from:], "=:")
		if k < 0 {
			return spans
		}
		sep := from + k
		from = sep + 1
		if sp, ok := passwordAt(s, sep); ok {
			spans = append(spans, sp)
			if first {
				return spans
			}
			from = max(from, sp.end)
		}
	}
}

func passwordAt(s string, sep int) (span, bool) {
	// The key, before the separator.
	j := sep
	for j > 0 && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	if j > 0 && (s[j-1] == '"' || s[j-1] == '\'') {
		j--
		if j > 0 && s[j-1] == '\\' {
			j--
		}
	}
	l := j
	for l > 0 && (isWord(s[l-1]) || s[l-1] == '-' || s[l-1] == '.') && j-l < 128 {
		l--
	}
	if l == j || !IsSecretKey(s[l:j]) && !querySignature(s, l, j, sep) {
		return span{}, false
	}
	// The value, after it.
	v := sep + 1
	if v < len(s) && (s[v] == '=' || s[v] == '>' || s[sep] == ':' && s[v] == '/') {
		return span{}, false // "==", "=>", "://"
	}
	for v < len(s) && (s[v] == ' ' || s[v] == '\t') {
		v++
	}
	var quote string
	switch {
	case v+1 < len(s) && s[v] == '\\' && (s[v+1] == '"' || s[v+1] == '\''):
		quote = s[v : v+2]
	case v < len(s) && (s[v] == '"' || s[v] == '\''):
		quote = s[v : v+1]
	}
	v += len(quote)
	// An authorization scheme stays.
	for _, scheme := range [...]string{"bearer", "basic", "token", "digest"} {
		w := v + len(scheme)
		if w < len(s) && (s[w] == ' ' || s[w] == '\t') && indexFold(s[v:w], scheme, 0) == 0 {
			for v = w; v < len(s) && (s[v] == ' ' || s[v] == '\t'); v++ {
			}
			break
		}
	}
	if v >= len(s) || s[v] == '{' || s[v] == '[' && !isRedactedAt(s, v) {
		return span{}, false
	}
	if isRedactedAt(s, v) {
		// Already redacted, unless text follows the marker in the value.
		if r := v + len(Redacted); r == len(s) || valueEnds(s, r, quote) {
			return span{}, false
		}
	}
	e := v
	if quote != "" {
		if q := strings.Index(s[v:], quote); q >= 0 {
			e = v + q
		} else {
			e = len(s)
		}
		for e > v && s[e-1] == '\\' && len(quote) == 1 { // an escaped quote ends nothing
			q := strings.Index(s[e+1:], quote)
			if q < 0 {
				e = len(s)
				break
			}
			e = e + 1 + q
		}
	} else {
		for e < len(s) && !valueEnds(s, e, "") {
			e++
		}
	}
	if e == v {
		return span{}, false
	}
	return span{v, e, Password, kindInfo[Password].what}, true
}

// valueEnds reports whether a value quoted with quote ("" when
// unquoted) ends at s[i].
func valueEnds(s string, i int, quote string) bool {
	if quote != "" {
		return strings.HasPrefix(s[i:], quote)
	}
	return strings.IndexByte(" \t\r\n\"'&,;})<>\\", s[i]) >= 0
}

// IsSecretKey reports whether a member or parameter named key holds a
// secret: a name with a word password, passwd, passphrase, pwd, secret,
// token (also glued: accessToken, authtoken), credential(s),
// authorization, cookie or bearer, or the words api key, private key,
// access key or secret key (api_key, apiKey, x-api-key). Names of things
// about a secret rather than the secret — ending in ref, id, url, type,
// name, count, expiry, path, ... (token_ref, secret_ref, token_url,
// max_tokens) — are not, and neither is the cursor of a paged listing
// (page_token, nextPageToken, continuation_token).
func IsSecretKey(key string) bool {
	if len(key) < 3 || len(key) > 128 {
		return false
	}
	// A run reads the same few member names again and again (every
	// argument, output and context member of every call): the answer
	// for each is kept, for up to secretKeyMemoMax names.
	secretKeyMemo.RLock()
	v, ok := secretKeyMemo.m[key]
	secretKeyMemo.RUnlock()
	if ok {
		return v
	}
	v = isSecretKey(key)
	if secretKeyMemo.full.Load() {
		return v // no lock once full: made-up names do not queue on it
	}
	secretKeyMemo.Lock()
	if len(secretKeyMemo.m) < secretKeyMemoMax {
		if secretKeyMemo.m == nil {
			secretKeyMemo.m = map[string]bool{}
		}
		secretKeyMemo.m[strings.Clone(key)] = v
	} else {
		secretKeyMemo.full.Store(true)
	}
	secretKeyMemo.Unlock()
	return v
}

// secretKeyMemo holds IsSecretKey's answers (isSecretKey's, which
// depend on the name alone); it stops growing at secretKeyMemoMax names
// (each at most 128 bytes), so names a caller makes up cannot grow it
// further.
var secretKeyMemo struct {
	sync.RWMutex
	m    map[string]bool
	full atomic.Bool // m holds secretKeyMemoMax names
}

const secretKeyMemoMax = 4096

// isSecretKey is IsSecretKey without the memo, for a name of 3 to 128
// bytes.
func isSecretKey(key string) bool {
	var words [24]string
	n := splitWords(key, words[:])
	if n == 0 {
		return false
	}
	for _, x := range notSecretLast {
		if strings.EqualFold(words[n-1], x) {
			return false
		}
	}
	for i := 0; i < n; i++ {
		w := words[i]
		if containsFold(w, "password") || containsFold(w, "passwd") || containsFold(w, "passphrase") ||
			containsFold(w, "secret") && !containsFold(w, "secretar") {
			return true
		}
		for _, x := range secretWords {
			if strings.EqualFold(w, x) && !(i > 0 && strings.EqualFold(x, "token") && cursorWord(words[i-1])) {
				return true
			}
		}
		if len(w) > 5 && hasSuffixFold(w, "token") || hasSuffixFold(w, "apikey") || hasSuffixFold(w, "privatekey") || hasSuffixFold(w, "accesskey") {
			return true
		}
		if i+1 < n && strings.EqualFold(words[i+1], "key") {
			for _, x := range keyQualifiers {
				if strings.EqualFold(w, x) {
					return true
				}
			}
		}
	}
	return false
}

// querySignature reports whether s[l:j], the key before the separator
// at sep, is a URL query parameter that signs the URL (sig, signature,
// X-Amz-Signature, X-Goog-Signature, Signature): "?" or "&" before it,
// "=" after it. Such a signature is the credential of a pre-signed or
// shared-access URL (S3, GCS, Azure SAS, CloudFront); as a member name
// elsewhere a signature is not a secret (IsSecretKey), so only the
// query position counts.
func querySignature(s string, l, j, sep int) bool {
	if l == 0 || s[l-1] != '?' && s[l-1] != '&' || s[sep] != '=' || j-l > 64 {
		return false
	}
	var words [32]string // a key of at most 64 bytes has at most 32 words
	n := splitWords(s[l:j], words[:])
	return n > 0 && (strings.EqualFold(words[n-1], "sig") || strings.EqualFold(words[n-1], "signature"))
}

// cursorWord reports whether w, before "token", makes it a cursor of a
// paged or resumed listing (page_token, nextPageToken,
// continuation_token), an opaque position rather than a credential.
func cursorWord(w string) bool {
	for _, x := range cursorWords {
		if strings.EqualFold(w, x) {
			return true
		}
	}
	return false
}

var (
	cursorWords    = []string{"page", "next", "prev", "previous", "continuation", "pagination", "cursor", "sync"}
	secretWords    = []string{"pwd", "token", "credential", "credentials", "authorization", "cookie", "bearer"}
	keyQualifiers  = []string{"api", "private", "access", "secret", "signing", "encryption", "master"}
	notSecretLast  = []string{"ref", "refs", "reference", "id", "ids", "url", "uri", "endpoint", "type", "kind", "name", "names", "count", "length", "len", "expiry", "expires", "expiration", "at", "ttl", "hint", "path", "file", "env", "var", "header", "scheme", "policy", "required", "present", "set", "valid", "provided"}
	wordSeparators = "_-. /:"
)

// splitWords splits key into words at separators and camelCase
// boundaries ("xAPIKey" → x, API, Key) and returns how many it wrote.
func splitWords(key string, words []string) int {
	n, start := 0, -1
	emit := func(end int) {
		if start >= 0 && end > start && n < len(words) {
			words[n] = key[start:end]
			n++
		}
		start = -1
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !isAlnum(c) || strings.IndexByte(wordSeparators, c) >= 0 {
			emit(i)
			continue
		}
		if start >= 0 && isUpper(c) {
			p := key[i-1]
			if isLower(p) || isDigit(p) || isUpper(p) && i+1 < len(key) && isLower(key[i+1]) {
				emit(i)
			}
		}
		if start < 0 {
			start = i
		}
	}
	emit(len(key))
	return n
}

func containsFold(s, sub string) bool { return indexFold(s, sub, 0) >= 0 }

func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}
