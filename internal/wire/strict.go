package wire

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of objects and arrays in a document
// [CheckStrict] accepts (encoding/json's own limit is 10,000; no document
// of this project nests anywhere near 1,000).
const MaxDepth = 1000

// maxProblems bounds the problems one scan reports.
const maxProblems = 32

// ErrStrict matches a *StrictError.
var ErrStrict = errors.New("JSON document refused")

// StrictError lists the problems [CheckStrict] found in a document. Its
// text names paths and byte offsets, never a value of the document.
type StrictError struct {
	Problems []Problem
}

func (e *StrictError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "JSON document refused: " + strings.Join(parts, "; ")
}

// Is matches ErrStrict.
func (e *StrictError) Is(target error) bool { return target == ErrStrict }

// String renders the problem as "path: message" ("message" at the
// document itself).
func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// Strict returns the problems of [CheckStrict] as a *StrictError, or nil.
func Strict(data []byte) error {
	if probs := CheckStrict(data); len(probs) > 0 {
		return &StrictError{Problems: probs}
	}
	return nil
}

// CheckStrict scans data, one JSON document, for what encoding/json lets
// through silently, and returns each problem with its JSON path:
//
//   - a member name that appears twice in one object, compared after
//     unescaping ("a" and "\u0061" are the same name): encoding/json keeps
//     the last value, so a duplicated "refund_amount" could show a
//     validator one amount and act on another;
//   - a string (member name or value) that is not valid UTF-8: invalid
//     bytes, overlong encodings, UTF-8-encoded surrogates, and \u escapes
//     of a lone UTF-16 surrogate such as "\ud800" (encoding/json turns all
//     of them into U+FFFD, so two different byte strings read the same);
//   - a byte order mark before the document;
//   - nesting deeper than [MaxDepth];
//   - malformed JSON, or data after the document.
//
// No problems means data holds exactly one well-formed JSON document that
// encoding/json decodes without losing or altering anything. Messages name
// paths and byte offsets, never a value. The scan is iterative (no
// recursion: deep documents cannot exhaust the stack), allocates only for
// member names with escapes and for wide objects, and reads each byte once.
//
// [Decode] and [UnmarshalOpen] apply it; a package that decodes outside
// input with encoding/json directly (a tool's reply, say) calls it first:
//
//	if err := wire.Strict(body); err != nil { … refuse, errors.Is(err, wire.ErrStrict) … }
func CheckStrict(data []byte) []Problem {
	probs, _ := scan(data)
	return probs
}

// scan is CheckStrict; syntax reports whether scanning stopped at
// malformed JSON (Decode then lets encoding/json describe it).
func scan(data []byte) (probs []Problem, syntax bool) {
	s := scanners.Get().(*scanner)
	*s = scanner{data: data, stack: s.stack[:0], keys: s.keys[:0]}
	s.run()
	probs, syntax = s.probs, s.syntax
	if cap(s.stack) <= 64 && cap(s.keys) <= 1024 {
		// Keep the buffers, not references into data.
		clear(s.stack[:cap(s.stack)])
		clear(s.keys[:cap(s.keys)])
		*s = scanner{stack: s.stack[:0], keys: s.keys[:0]}
		scanners.Put(s)
	}
	return probs, syntax
}

// scanners keeps scanners' buffers between scans (the scan is on the
// invoke path).
var scanners = sync.Pool{New: func() any { return new(scanner) }}

type frame struct {
	obj      bool
	index    int                 // array: index of the current element
	key      []byte              // object: the current member name (unescaped)
	keyStart int                 // object: where its member names start in scanner.keys
	set      map[string]struct{} // object: its member names, once it is wide
}

// wideObject is the member count beyond which names go into a set.
const wideObject = 16

type scanner struct {
	data  []byte
	pos   int
	stack []frame
	// keys holds the member names of the open objects, innermost last: a
	// nested object closes before its parent reads its next name.
	keys   [][]byte
	probs  []Problem
	syntax bool
	stop   bool
	// the string being scanned: a member name; already reported
	strKey, strBad bool
}

func (s *scanner) add(path, msg string) {
	if len(s.probs) == maxProblems {
		s.probs = append(s.probs, Problem{Message: "too many problems; the rest are not reported"})
		s.stop = true
		return
	}
	s.probs = append(s.probs, Problem{Path: path, Message: msg})
}

func (s *scanner) fail(msg string) {
	s.add(s.path(), fmt.Sprintf("invalid JSON: %s (at byte %d)", msg, s.pos))
	s.syntax, s.stop = true, true
}

// path renders the JSON path of the current position.
func (s *scanner) path() string {
	var b strings.Builder
	for _, f := range s.stack {
		if f.obj {
			if f.key == nil {
				break
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(strings.ToValidUTF8(string(f.key), "\uFFFD"))
		} else {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(f.index))
			b.WriteByte(']')
		}
	}
	return clipPath(b.String())
}

// clipPath keeps error text bounded for hostile, deeply nested documents.
func clipPath(p string) string {
	const max = 256
	if len(p) <= max {
		return p
	}
	cut := len(p) - max/2
	for cut < len(p) && !utf8.RuneStart(p[cut]) {
		cut++
	}
	head := max / 2
	for head > 0 && !utf8.RuneStart(p[head]) {
		head--
	}
	return p[:head] + "…" + p[cut:]
}

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) run() {
	if bytes.HasPrefix(s.data, []byte("\xef\xbb\xbf")) {
		s.add("", "a byte order mark (U+FEFF) precedes the document; JSON text must not start with one")
		return
	}
	s.ws()
	for !s.stop {
		// A value starts here.
		if s.pos >= len(s.data) {
			if len(s.stack) == 0 {
				s.fail("empty document")
			} else {
				s.fail("unexpected end of input")
			}
			return
		}
		switch c := s.data[s.pos]; {
		case c == '{':
			if !s.push(true) {
				return
			}
			s.pos++
			s.ws()
			if s.pos < len(s.data) && s.data[s.pos] == '}' {
				s.pos++
				s.pop()
			} else if !s.member() {
				return
			} else {
				continue
			}
		case c == '[':
			if !s.push(false) {
				return
			}
			s.pos++
			s.ws()
			if s.pos < len(s.data) && s.data[s.pos] == ']' {
				s.pos++
				s.pop()
			} else {
				continue
			}
		case c == '"':
			s.str(false)
		case c == '-' || c >= '0' && c <= '9':
			s.number()
		case c == 't':
			s.literal("true")
		case c == 'f':
			s.literal("false")
		case c == 'n':
			s.literal("null")
		default:
			s.fail(fmt.Sprintf("unexpected %s where a value should start", describe(s.data[s.pos:])))
		}
		if s.stop {
			return
		}
		// After a value: close containers or move to the next element.
		for {
			s.ws()
			if len(s.stack) == 0 {
				if s.pos < len(s.data) {
					s.fail("data after the document")
				}
				return
			}
			if s.pos >= len(s.data) {
				s.fail("unexpected end of input")
				return
			}
			top := &s.stack[len(s.stack)-1]
			c := s.data[s.pos]
			switch {
			case c == ',' && top.obj:
				s.pos++
				s.ws()
				if !s.member() {
					return
				}
			case c == ',':
				s.pos++
				top.index++
				s.ws()
			case c == '}' && top.obj, c == ']' && !top.obj:
				s.pos++
				s.pop()
				continue
			default:
				s.fail(fmt.Sprintf("unexpected %s after a value", describe(s.data[s.pos:])))
				return
			}
			break
		}
	}
}

// describe names the byte (or rune) at the start of b for a syntax error
// without echoing document content beyond one character.
func describe(b []byte) string {
	r, _ := utf8.DecodeRune(b)
	if r == utf8.RuneError || r < 0x20 {
		return fmt.Sprintf("byte 0x%02x", b[0])
	}
	return strconv.QuoteRune(r)
}

func (s *scanner) push(obj bool) bool {
	if len(s.stack) >= MaxDepth {
		s.add(s.path(), fmt.Sprintf("the document nests deeper than %d levels", MaxDepth))
		s.stop = true
		return false
	}
	s.stack = append(s.stack, frame{obj: obj, keyStart: len(s.keys)})
	return true
}

func (s *scanner) pop() {
	s.keys = s.keys[:s.stack[len(s.stack)-1].keyStart]
	s.stack = s.stack[:len(s.stack)-1]
}

// member reads a member name and its colon; the value follows.
func (s *scanner) member() bool {
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		if s.pos >= len(s.data) {
			s.fail("unexpected end of input")
		} else {
			s.fail(fmt.Sprintf("unexpected %s where a member name should start", describe(s.data[s.pos:])))
		}
		return false
	}
	key := s.str(true)
	if s.stop {
		return false
	}
	top := &s.stack[len(s.stack)-1]
	top.key = key
	if s.seen(top, key) {
		s.add(s.path(), "member name appears more than once in the object (after unescaping); duplicate members are refused")
		if s.stop {
			return false
		}
	}
	s.ws()
	if s.pos >= len(s.data) || s.data[s.pos] != ':' {
		if s.pos >= len(s.data) {
			s.fail("unexpected end of input")
		} else {
			s.fail(fmt.Sprintf("unexpected %s after a member name", describe(s.data[s.pos:])))
		}
		return false
	}
	s.pos++
	s.ws()
	return true
}

// seen records key in the object and reports whether it was there.
func (s *scanner) seen(f *frame, key []byte) bool {
	if f.set != nil {
		if _, ok := f.set[string(key)]; ok {
			return true
		}
		f.set[string(key)] = struct{}{}
		return false
	}
	keys := s.keys[f.keyStart:]
	for _, k := range keys {
		if bytes.Equal(k, key) {
			return true
		}
	}
	if len(keys) < wideObject {
		s.keys = append(s.keys, key)
		return false
	}
	f.set = make(map[string]struct{}, 2*wideObject)
	for _, k := range keys {
		f.set[string(k)] = struct{}{}
	}
	f.set[string(key)] = struct{}{}
	s.keys = s.keys[:f.keyStart]
	return false
}

// str scans a string at s.pos (an opening quote). For a member name it
// returns the name, unescaped (a sub-slice of data when it has no escapes).
func (s *scanner) str(key bool) []byte {
	start := s.pos
	s.pos++
	s.strKey, s.strBad = key, false
	var unesc []byte // the unescaped name, once an escape is met
	escaped := false
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			if !key {
				return nil
			}
			if !escaped {
				return s.data[start+1 : s.pos-1]
			}
			return unesc
		case c == '\\':
			if key && !escaped {
				escaped = true
				unesc = append([]byte(nil), s.data[start+1:s.pos]...)
			}
			r, ok := s.escape()
			if !ok {
				return nil
			}
			if key {
				unesc = utf8.AppendRune(unesc, r)
			}
		case c < 0x20:
			s.fail(fmt.Sprintf("control character 0x%02x in a string", c))
			return nil
		case c < utf8.RuneSelf:
			s.pos++
			if escaped {
				unesc = append(unesc, c)
			}
		default:
			r, size := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && size == 1 {
				s.badString("is not valid UTF-8", s.pos)
			}
			if escaped {
				unesc = append(unesc, s.data[s.pos:s.pos+size]...)
			}
			s.pos += size
		}
		if s.stop {
			return nil
		}
	}
	s.fail("unexpected end of input in a string")
	return nil
}

// badString reports the string being scanned as not valid Unicode, once.
func (s *scanner) badString(msg string, at int) {
	if s.strBad {
		return
	}
	s.strBad = true
	what := "string"
	if s.strKey {
		// The name is no usable path segment: report at its object.
		what = "member name"
		top := &s.stack[len(s.stack)-1]
		saved := top.key
		top.key = nil
		defer func() { top.key = saved }()
	}
	s.add(s.path(), fmt.Sprintf("%s %s (at byte %d)", what, msg, at))
}

// escape reads one escape sequence at s.pos (a backslash) and returns the
// rune it stands for.
func (s *scanner) escape() (rune, bool) {
	at := s.pos
	if s.pos+1 >= len(s.data) {
		s.pos = len(s.data)
		s.fail("unexpected end of input in a string")
		return 0, false
	}
	c := s.data[s.pos+1]
	s.pos += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	case 'u':
	default:
		s.pos = at
		s.fail("invalid escape in a string")
		return 0, false
	}
	r, ok := s.hex4()
	if !ok {
		return 0, false
	}
	switch {
	case r >= 0xD800 && r < 0xDC00:
		// A high surrogate needs a low one next.
		if s.pos+1 < len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
			save := s.pos
			s.pos += 2
			lo, ok := s.hex4()
			if !ok {
				return 0, false
			}
			if lo >= 0xDC00 && lo < 0xE000 {
				return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), true
			}
			s.pos = save
		}
		s.badString(fmt.Sprintf("holds a lone UTF-16 surrogate \\u%04x, which is not a character", r), at)
		return utf8.RuneError, true
	case r >= 0xDC00 && r < 0xE000:
		s.badString(fmt.Sprintf("holds a lone UTF-16 surrogate \\u%04x, which is not a character", r), at)
		return utf8.RuneError, true
	}
	return r, true
}

func (s *scanner) hex4() (rune, bool) {
	if s.pos+4 > len(s.data) {
		s.pos = len(s.data)
		s.fail("unexpected end of input in a \\u escape")
		return 0, false
	}
	var r rune
	for i := 0; i < 4; i++ {
		c := s.data[s.pos+i]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			s.pos += i
			s.fail("invalid \\u escape in a string")
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	s.pos += 4
	return r, true
}

func (s *scanner) number() {
	d := s.data
	if d[s.pos] == '-' {
		s.pos++
	}
	switch {
	case s.pos < len(d) && d[s.pos] == '0':
		s.pos++
	case s.pos < len(d) && d[s.pos] >= '1' && d[s.pos] <= '9':
		s.digits()
	default:
		s.fail("invalid number")
		return
	}
	if s.pos < len(d) && d[s.pos] == '.' {
		s.pos++
		if !s.digits() {
			s.fail("invalid number")
			return
		}
	}
	if s.pos < len(d) && (d[s.pos] == 'e' || d[s.pos] == 'E') {
		s.pos++
		if s.pos < len(d) && (d[s.pos] == '+' || d[s.pos] == '-') {
			s.pos++
		}
		if !s.digits() {
			s.fail("invalid number")
		}
	}
}

func (s *scanner) digits() bool {
	start := s.pos
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		s.pos++
	}
	return s.pos > start
}

func (s *scanner) literal(word string) {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(word)) {
		s.fail("invalid literal")
		return
	}
	s.pos += len(word)
}
