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
	mu     sync.Mutex
	values []string  // as resolved
	c      *compiled // values' forms, built on first use
}

// compiled is what scrubbing a set of values needs. It is shared by every
// Set of the same values (an endpoint resolves the same secret on every
// call), so the forms are computed once, not per attempt.
type compiled struct {
	forms   []string // values and their encodings, longest first
	short   []string // values (and forms) under minLen: whole-string matches only
	first   [256]bool
	numeric bool // some value could be written as a JSON number
}

// cache holds compiled sets by their values. It is bounded: when full it
// starts again (rotation leaves old entries behind).
var cache struct {
	sync.Mutex
	m map[string]*compiled
}

const cacheMax = 256

func compile(values []string) *compiled {
	key := strings.Join(values, "\x00")
	cache.Lock()
	defer cache.Unlock()
	if c, ok := cache.m[key]; ok {
		return c
	}
	c := &compiled{}
	for _, v := range values {
		for _, f := range Forms(v) {
			switch {
			case slices.Contains(c.forms, f) || slices.Contains(c.short, f):
			case len(f) < minLen:
				c.short = append(c.short, f)
			default:
				c.forms = append(c.forms, f)
				c.first[f[0]] = true
			}
		}
		if _, err := strconv.ParseFloat(v, 64); err == nil {
			c.numeric = true
		}
	}
	// Longest first: a padded form before its unpadded prefix.
	slices.SortStableFunc(c.forms, func(a, b string) int { return len(b) - len(a) })
	if len(cache.m) >= cacheMax || cache.m == nil {
		cache.m = map[string]*compiled{}
	}
	cache.m[key] = c
	return c
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
		if v != "" && !slices.Contains(s.values, v) {
			s.values = append(s.values, v)
			s.c = nil
		}
	}
}

// compiled is s's compiled form; s.mu is held.
func (s *Set) compiled() *compiled {
	if s.c == nil {
		s.c = compile(s.values)
	}
	return s.c
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
	if len(s.values) == 0 || str == "" {
		return str
	}
	c := s.compiled()
	if slices.Contains(c.short, str) {
		return Mask
	}
	return c.replace(str)
}

// replace masks the forms in str, leftmost first and, at one position,
// longest first. It allocates only when it finds one.
func (c *compiled) replace(str string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(str); i++ {
		if !c.first[str[i]] {
			continue
		}
		for _, f := range c.forms {
			if strings.HasPrefix(str[i:], f) {
				if b.Len() == 0 {
					b.Grow(len(str))
				}
				b.WriteString(str[last:i])
				b.WriteString(Mask)
				i += len(f) - 1
				last = i + 1
				break
			}
		}
	}
	if last == 0 {
		return str
	}
	b.WriteString(str[last:])
	return b.String()
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
		if s.compiled().numeric && s.string(string(x)) != string(x) {
			return Mask
		}
	case float64:
		if s.compiled().numeric {
			if t := strconv.FormatFloat(x, 'f', -1, 64); s.string(t) != t {
				return Mask
			}
		}
	case int, int64:
		if s.compiled().numeric {
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
