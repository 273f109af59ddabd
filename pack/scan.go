package pack

import (
	"encoding/json"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Finding is a secret or raw PII found in a document. What describes the
// kind of finding; it never contains the value.
type Finding struct {
	Path string
	Code string // CodeSecret or CodePII
	What string
}

type detector struct {
	code, what string
	// pre is a cheap necessary condition; the regexp runs only when it holds.
	pre   func(s string, st stats) bool
	re    *regexp.Regexp
	check func(match string) bool
}

// stats are counted once per string for the prefilters.
type stats struct{ digits, upper int }

func has(sub string) func(string, stats) bool {
	return func(s string, _ stats) bool { return strings.Contains(s, sub) }
}

func digits(n int) func(string, stats) bool {
	return func(_ string, st stats) bool { return st.digits >= n }
}

var detectors = []detector{
	{CodeSecret, "a private key", has("PRIVATE KEY"), regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`), nil},
	{CodeSecret, "a bearer token", func(s string, _ stats) bool { return strings.Contains(strings.ToLower(s), "bearer") }, regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{16,}`), nil},
	{CodeSecret, "an AWS access key id", func(s string, st stats) bool {
		return st.upper >= 4 && (strings.Contains(s, "AKIA") || strings.Contains(s, "ASIA"))
	}, regexp.MustCompile(`\b(AKIA|ASIA)[0-9A-Z]{16}\b`), nil},
	{CodeSecret, "a Google API key", has("AIza"), regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}\b`), nil},
	{CodeSecret, "a GitHub token", has("gh"), regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{36,}\b`), nil},
	{CodeSecret, "a Slack token", has("xox"), regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`), nil},
	{CodeSecret, "a Stripe secret key", has("k_"), regexp.MustCompile(`\b[rs]k_(live|test)_[A-Za-z0-9]{16,}\b`), nil},
	{CodeSecret, "an API secret key", has("sk-"), regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{20,}\b`), nil},
	{CodeSecret, "a JSON Web Token", has("eyJ"), regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`), nil},
	{CodeSecret, "a password in a URL", func(s string, _ stats) bool { return strings.Contains(s, "://") && strings.Contains(s, "@") }, regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@`), nil},
	{CodePII, "an email address", has("@"), regexp.MustCompile(`\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b`), nil},
	{CodePII, "a payment card number", digits(13), regexp.MustCompile(`\b(?:\d[ -]?){12,18}\d\b`), luhn},
	{CodePII, "a US social security number", digits(9), regexp.MustCompile(`\b\d{3}-\d{2}-\d{4}\b`), nil},
	{CodePII, "an Indian PAN", func(_ string, st stats) bool { return st.upper >= 6 && st.digits >= 4 }, regexp.MustCompile(`\b[A-Z]{5}[0-9]{4}[A-Z]\b`), nil},
	{CodePII, "an Aadhaar number", digits(12), regexp.MustCompile(`\b\d{4} \d{4} \d{4}\b`), nil},
	{CodePII, "a phone number", func(s string, st stats) bool { return st.digits >= 8 && strings.Contains(s, "+") }, regexp.MustCompile(`\+\d{1,3}[ -]?\d{3,4}[ -]?\d{3,4}[ -]?\d{2,4}\b`), nil},
}

func countStats(s string) stats {
	var st stats
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			st.digits++
		case c >= 'A' && c <= 'Z':
			st.upper++
		}
	}
	return st
}

// secretKeys are member names whose non-empty string value is a secret,
// whatever it looks like.
var secretKeys = map[string]bool{
	"password": true, "passwd": true, "secret": true, "client_secret": true, "api_key": true, "apikey": true,
	"access_token": true, "refresh_token": true, "token": true, "private_key": true, "secret_key": true, "bearer": true,
}

// ScanSecrets walks a value (a decoded JSON document of maps, slices and
// strings, or a Go value such as *Pack, whose members are named by their
// json tags) and reports every string that looks like a secret or raw PII,
// and every secret-named member with a string value, with its JSON path.
// Embedded raw JSON (expressions) is scanned too. Findings are sorted by
// path.
func ScanSecrets(v any) []Finding {
	var out []Finding
	scanValue(reflect.ValueOf(v), "", "", &out)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

func scanValue(v reflect.Value, path, key string, out *[]Finding) {
	if !v.IsValid() {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			scanValue(v.Elem(), path, key, out)
		}
	case reflect.String:
		scanString(v.String(), path, key, out)
	case reflect.Slice, reflect.Array:
		if v.Type() == rawMessageType {
			var doc any
			if json.Unmarshal(v.Bytes(), &doc) == nil {
				scanValue(reflect.ValueOf(doc), path, key, out)
			}
			return
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := 0; i < v.Len(); i++ {
			scanValue(v.Index(i), path+"["+strconv.Itoa(i)+"]", key, out)
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return
		}
		iter := v.MapRange()
		for iter.Next() {
			k := iter.Key().String()
			scanValue(iter.Value(), joinPath(path, k), k, out)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			scanValue(v.Field(i), joinPath(path, name), name, out)
		}
	}
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func scanString(x, path, key string, out *[]Finding) {
	if x == "" {
		return
	}
	if secretKeys[strings.ToLower(key)] {
		*out = append(*out, Finding{Path: path, Code: CodeSecret, What: "member " + key + " holds a secret value; use a secret reference"})
		return
	}
	st := countStats(x)
	for _, d := range detectors {
		if !d.pre(x, st) {
			continue
		}
		for _, m := range d.re.FindAllString(x, 4) {
			if d.check == nil || d.check(m) {
				*out = append(*out, Finding{Path: path, Code: d.code, What: "contains " + d.what + "; packs must not carry secrets or raw PII"})
				return
			}
		}
	}
}

// luhn reports whether the digits of s pass the Luhn check.
func luhn(s string) bool {
	sum, n, double := 0, 0, false
	for i := len(s) - 1; i >= 0; i-- {
		c := s[i]
		if c < '0' || c > '9' {
			continue
		}
		d := int(c - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		n++
		double = !double
	}
	return n >= 13 && sum%10 == 0
}
