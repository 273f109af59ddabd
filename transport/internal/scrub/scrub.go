// Package scrub owns the removal of the secret values a transport resolved
// for one attempt (API keys, bearer tokens, basic passwords, OAuth2 client
// secrets and access tokens) from everything the attempt hands back: a
// tool that echoes its credentials in a reply, an error envelope or an
// error body must not get them into results, errors, logs, spans or
// packets. It knows the exact values, so it replaces them and their
// encoded forms (base64 and base64url, padded or not and at any byte
// alignment, URL query and path escaping, hex) wherever they occur.
package scrub

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Mask replaces a secret.
const Mask = "[REDACTED]"

// minLen is the shortest secret (and encoded form) replaced inside longer
// text; a shorter one is replaced only where it is a whole string, so a
// one-letter secret does not blank every word.
const minLen = 4

// Set is the secrets one attempt resolved. Safe for concurrent use.
type Set struct {
	mu      sync.Mutex
	values  []string // as resolved
	forms   []string // values and their encodings, longest first
	short   []string // values (and forms) under minLen: whole-string matches only
	rep     *strings.Replacer
	numeric bool // some value could be written as a JSON number
}

type key struct{}

// With returns ctx carrying a new, empty Set.
func With(ctx context.Context) (context.Context, *Set) {
	s := &Set{}
	return context.WithValue(ctx, key{}, s), s
}

// From is the Set ctx carries (nil when none).
func From(ctx context.Context) *Set {
	s, _ := ctx.Value(key{}).(*Set)
	return s
}

// Add records resolved values in the Set ctx carries (a no-op without
// one).
func Add(ctx context.Context, values ...string) {
	if s := From(ctx); s != nil {
		s.Add(values...)
	}
}

// Add records resolved values.
func (s *Set) Add(values ...string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range values {
		if v == "" || slices.Contains(s.values, v) {
			continue
		}
		s.values = append(s.values, v)
		for _, f := range Forms(v) {
			switch {
			case slices.Contains(s.forms, f) || slices.Contains(s.short, f):
			case len(f) < minLen:
				s.short = append(s.short, f)
			default:
				s.forms = append(s.forms, f)
			}
		}
		if _, err := strconv.ParseFloat(v, 64); err == nil {
			s.numeric = true
		}
		s.rep = nil
	}
}

// Empty reports a Set with nothing to scrub.
func (s *Set) Empty() bool {
	if s == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.values) == 0
}

// Forms is v and the encodings a tool could echo it in: standard and URL
// base64 (padded and not, and the inner characters of v encoded at byte
// offsets 1 and 2 of a longer base64 text), URL query and path escaping,
// lower- and upper-case hex.
func Forms(v string) []string {
	b := []byte(v)
	out := []string{v, url.QueryEscape(v), url.PathEscape(v), hex.EncodeToString(b), strings.ToUpper(hex.EncodeToString(b))}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		full := enc.EncodeToString(b)
		out = append(out, full, strings.TrimRight(full, "="))
		// v inside a longer base64 text starts at byte offset k (mod 3):
		// encode it behind k filler bytes and keep the characters that
		// depend on v alone.
		for k := 1; k <= 2; k++ {
			e := enc.WithPadding(base64.NoPadding).EncodeToString(append(make([]byte, k), b...))
			lead := []int{0, 2, 3}[k]
			n := k + len(b)
			trail := 0
			switch n % 3 {
			case 1:
				trail = 1 // the last character also holds 4 bits of what follows
			case 2:
				trail = 1 // likewise, 2 bits
			}
			if len(e)-trail > lead {
				out = append(out, e[lead:len(e)-trail])
			}
		}
		// v at offset 0 followed by more text: the full groups only.
		if len(b)%3 != 0 {
			e := enc.WithPadding(base64.NoPadding).EncodeToString(b)
			out = append(out, e[:len(e)-1])
		}
	}
	return out
}

func (s *Set) replacer() *strings.Replacer {
	if s.rep == nil {
		forms := slices.Clone(s.forms)
		// Longest first: a padded form before its unpadded prefix.
		slices.SortStableFunc(forms, func(a, b string) int { return len(b) - len(a) })
		pairs := make([]string, 0, 2*len(forms))
		for _, f := range forms {
			pairs = append(pairs, f, Mask)
		}
		s.rep = strings.NewReplacer(pairs...)
	}
	return s.rep
}

// String is str with every secret form replaced by Mask.
func (s *Set) String(str string) string {
	if s == nil || str == "" {
		return str
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.string(str)
}

func (s *Set) string(str string) string {
	if len(s.values) == 0 {
		return str
	}
	if slices.Contains(s.short, str) {
		return Mask
	}
	if len(s.forms) == 0 {
		return str
	}
	return s.replacer().Replace(str)
}

// Value scrubs a JSON value: strings, map keys and, when a secret is
// numeric, numbers that spell it (they become the string Mask). Maps and
// slices are changed in place; the result replaces v.
func (s *Set) Value(v any) any {
	if s == nil {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.values) == 0 {
		return v
	}
	return s.value(v)
}

// Map scrubs m in place (keys and values) and returns it.
func (s *Set) Map(m map[string]any) map[string]any {
	if s == nil || m == nil {
		return m
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.values) == 0 {
		return m
	}
	return s.scrubMap(m)
}

func (s *Set) value(v any) any {
	switch x := v.(type) {
	case string:
		return s.string(x)
	case map[string]any:
		return s.scrubMap(x)
	case []any:
		for i := range x {
			x[i] = s.value(x[i])
		}
		return x
	case map[string]string:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = e
		}
		return s.scrubMap(m)
	case []string:
		for i := range x {
			x[i] = s.string(x[i])
		}
		return x
	case json.Number:
		if s.numeric && s.string(string(x)) != string(x) {
			return Mask
		}
	case float64:
		if s.numeric {
			if t := strconv.FormatFloat(x, 'f', -1, 64); s.string(t) != t {
				return Mask
			}
		}
	case int, int64:
		if s.numeric {
			if t := strconv.FormatInt(toInt64(x), 10); s.string(t) != t {
				return Mask
			}
		}
	}
	return v
}

func toInt64(v any) int64 {
	if i, ok := v.(int); ok {
		return int64(i)
	}
	return v.(int64)
}

// scrubMap scrubs values in place, then renames keys that hold a secret.
// Renamed keys are taken in sorted order, and one whose new name is taken
// gets a " (n)" suffix, so the result does not depend on map order.
func (s *Set) scrubMap(m map[string]any) map[string]any {
	var renamed []string
	for k, v := range m {
		m[k] = s.value(v)
		if s.string(k) != k {
			renamed = append(renamed, k)
		}
	}
	slices.Sort(renamed)
	for _, k := range renamed {
		v := m[k]
		delete(m, k)
		nk := s.string(k)
		for i := 2; ; i++ {
			if _, taken := m[nk]; !taken {
				break
			}
			nk = s.string(k) + " (" + strconv.Itoa(i) + ")"
		}
		m[nk] = v
	}
	return m
}
