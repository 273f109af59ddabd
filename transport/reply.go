package transport

import (
	"bytes"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// readReply is the fast reading of a response document, in one pass and
// without reflection. It accepts only documents it can read exactly as
// wire.Strict and encoding/json do together: well-formed JSON, nothing
// after it, valid UTF-8 (no lone surrogate escape), no member twice in
// one object, members of the response named exactly (no other member,
// no other case, no escape in their names) and each of its Go type (a
// string for a string member, an integer for an integer one, an object
// or null for an object). For such a document it fills w with exactly
// what json.Unmarshal fills it with (FuzzReplyReaderIsEncodingJSON) and
// returns true. It returns false for any other document, leaving w in
// any state: the caller then resets w and reads the document the slow way
// (wire.Strict, then encoding/json), which gives every refusal its
// error.
func readReply(data []byte, w *wireResponse) bool {
	p := reader{data: data}
	p.ws()
	if !p.eat('{') {
		return false
	}
	var seen uint16
	for more := p.open('}'); more; more = p.next('}') {
		name, ok := p.name()
		if !ok {
			return false
		}
		bit := uint16(0)
		switch string(name) {
		case "tool_contract_version":
			bit, ok = 1<<0, p.stringInto(&w.ToolContractVersion)
		case "request_id":
			bit, ok = 1<<1, p.stringInto(&w.RequestID)
		case "status":
			bit, ok = 1<<2, p.stringInto(&w.Status)
		case "output":
			bit, ok = 1<<3, p.mapInto(&w.Output)
		case "result_encoding":
			bit, ok = 1<<4, p.stringInto(&w.ResultEncoding)
		case "usage":
			bit, ok = 1<<5, p.usage(&w.Usage)
		case "trace":
			bit, ok = 1<<6, p.trace(&w.Trace)
		case "error":
			bit, ok = 1<<7, p.failure(&w.Error)
		default:
			return false
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
	}
	if p.bad {
		return false
	}
	p.ws()
	return p.pos == len(p.data)
}

// reader reads one JSON document. Every method reports false, or sets
// bad, for anything it does not read as encoding/json would.
type reader struct {
	data []byte
	pos  int
	bad  bool
	buf  []byte // unescaping scratch
}

// maxReadDepth is how deeply readReply reads nested values (deeper
// documents take the slow way, which bounds them at wire.MaxDepth).
const maxReadDepth = 64

func (p *reader) ws() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// eat consumes c after white space.
func (p *reader) eat(c byte) bool {
	p.ws()
	if p.pos < len(p.data) && p.data[p.pos] == c {
		p.pos++
		return true
	}
	return false
}

// open is called after an object's or array's opening bracket: true when
// an element follows, false (and the closing bracket consumed) when it is
// empty.
func (p *reader) open(closing byte) bool {
	return !p.eat(closing)
}

// next is called after an element: true when a comma and another element
// follow; false at the closing bracket, or with bad set.
func (p *reader) next(closing byte) bool {
	if p.eat(',') {
		return true
	}
	if !p.eat(closing) {
		p.bad = true
	}
	return false
}

// name reads a member name with no escape and its colon; the bytes are
// data's. (A name with a control character or a non-ASCII byte is
// returned as it is: it is no member of the response, which its caller
// refuses.)
func (p *reader) name() ([]byte, bool) {
	p.ws()
	if p.pos >= len(p.data) || p.data[p.pos] != '"' {
		return nil, false
	}
	start := p.pos + 1
	n := bytes.IndexByte(p.data[start:], '"')
	if n < 0 {
		return nil, false
	}
	name := p.data[start : start+n]
	if bytes.IndexByte(name, '\\') >= 0 {
		return nil, false
	}
	p.pos = start + n + 1
	return name, p.eat(':')
}

// null consumes null.
func (p *reader) null() bool {
	p.ws()
	if len(p.data)-p.pos >= 4 && string(p.data[p.pos:p.pos+4]) == "null" {
		p.pos += 4
		return true
	}
	return false
}

// stringInto reads a string, or null (which leaves *dst as it is).
func (p *reader) stringInto(dst *string) bool {
	if p.null() {
		return true
	}
	s, ok := p.str()
	*dst = s
	return ok
}

// str reads a string value: its escapes undone as encoding/json undoes
// them, refused when it holds invalid UTF-8 or a lone surrogate escape.
func (p *reader) str() (string, bool) {
	p.ws()
	if p.pos >= len(p.data) || p.data[p.pos] != '"' {
		return "", false
	}
	start := p.pos + 1
	ascii := true
	for i := start; i < len(p.data); i++ {
		switch c := p.data[i]; {
		case c == '"':
			seg := p.data[start:i]
			if !ascii && !utf8.Valid(seg) {
				return "", false
			}
			p.pos = i + 1
			return replyString(seg), true
		case c == '\\':
			return p.unescape(start)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// replyString is string(seg), without a copy for the values a reply
// holds most: its version and statuses (a string's bytes cannot be told
// apart from a copy's).
func replyString(seg []byte) string {
	switch string(seg) {
	case ContractVersion:
		return ContractVersion
	case StatusOK:
		return StatusOK
	case StatusError:
		return StatusError
	case StatusDenied:
		return StatusDenied
	}
	return string(seg)
}

// unescape reads the string starting at start (after its quote) that
// holds an escape.
func (p *reader) unescape(start int) (string, bool) {
	b := p.buf[:0]
	i := start
	for i < len(p.data) {
		c := p.data[i]
		switch {
		case c == '"':
			if !utf8.Valid(b) {
				return "", false
			}
			p.pos, p.buf = i+1, b
			return string(b), true
		case c < 0x20:
			return "", false
		case c != '\\':
			b = append(b, c)
			i++
			continue
		}
		if i+1 >= len(p.data) {
			return "", false
		}
		switch e := p.data[i+1]; e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := hex4(p.data, i+2)
			if !ok {
				return "", false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				// Only a high surrogate followed by the escape of a low
				// one is a character; anything else is refused.
				if i+1 >= len(p.data) || p.data[i] != '\\' || p.data[i+1] != 'u' {
					return "", false
				}
				r2, ok := hex4(p.data, i+2)
				if r = utf16.DecodeRune(r, r2); !ok || r == utf8.RuneError {
					return "", false
				}
				i += 6
			}
			b = utf8.AppendRune(b, r)
			continue
		default:
			return "", false
		}
		i += 2
	}
	return "", false
}

// hex4 reads the four hex digits of a \u escape at data[i:].
func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number reads a number's text, in JSON's grammar.
func (p *reader) number() ([]byte, bool) {
	p.ws()
	d, start := p.data, p.pos
	i := start
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	default:
		return nil, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return nil, false
		}
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return nil, false
		}
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	}
	p.pos = i
	return d[start:i], true
}

// intInto reads an integer (encoding/json refuses a fraction or an
// exponent for an integer member), or null.
func (p *reader) intInto(dst *int64) bool {
	if p.null() {
		return true
	}
	text, ok := p.number()
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(string(text), 10, 64)
	*dst = n
	return err == nil
}

// boolInto reads true, false or null.
func (p *reader) boolInto(dst *bool) bool {
	p.ws()
	rest := p.data[p.pos:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		*dst, p.pos = true, p.pos+4
	case len(rest) >= 5 && string(rest[:5]) == "false":
		*dst, p.pos = false, p.pos+5
	default:
		return p.null()
	}
	return true
}

// mapInto reads an object of any JSON, or null (nil).
func (p *reader) mapInto(dst *map[string]any) bool {
	if p.null() {
		return true
	}
	if !p.eat('{') {
		return false
	}
	m, ok := p.members(1)
	*dst = m
	return ok
}

// members reads an object's members, after its opening brace, as
// encoding/json decodes them into a map[string]any.
func (p *reader) members(depth int) (map[string]any, bool) {
	if depth > maxReadDepth {
		return nil, false
	}
	m := map[string]any{}
	for more := p.open('}'); more; more = p.next('}') {
		k, ok := p.str()
		if !ok || !p.eat(':') {
			return nil, false
		}
		if _, dup := m[k]; dup {
			return nil, false
		}
		if m[k], ok = p.value(depth); !ok {
			return nil, false
		}
	}
	return m, !p.bad
}

// value reads any JSON value as encoding/json decodes it into an any:
// objects as map[string]any, arrays as []any, numbers as float64.
func (p *reader) value(depth int) (any, bool) {
	p.ws()
	if p.pos >= len(p.data) {
		return nil, false
	}
	switch c := p.data[p.pos]; c {
	case '{':
		p.pos++
		return p.members(depth + 1)
	case '[':
		p.pos++
		if depth+1 > maxReadDepth {
			return nil, false
		}
		a := []any{}
		for more := p.open(']'); more; more = p.next(']') {
			v, ok := p.value(depth + 1)
			if !ok {
				return nil, false
			}
			a = append(a, v)
		}
		return a, !p.bad
	case '"':
		return p.str()
	case 't', 'f':
		var v bool
		ok := p.boolInto(&v)
		return v, ok
	case 'n':
		return nil, p.null()
	}
	text, ok := p.number()
	if !ok {
		return nil, false
	}
	f, err := strconv.ParseFloat(string(text), 64)
	return f, err == nil
}

// usage reads the usage member: an object or null.
func (p *reader) usage(dst **AttemptUsage) bool {
	if p.null() {
		return true
	}
	if !p.eat('{') {
		return false
	}
	u := &AttemptUsage{}
	*dst = u
	var seen uint8
	for more := p.open('}'); more; more = p.next('}') {
		name, ok := p.name()
		if !ok {
			return false
		}
		var bit uint8
		switch string(name) {
		case "duration_ms":
			bit, ok = 1, p.intInto(&u.DurationMS)
		case "attempt":
			var n int64
			bit, ok = 2, p.intInto(&n)
			u.Attempt = int(n)
			ok = ok && int64(u.Attempt) == n // encoding/json refuses what int cannot hold
		default:
			return false
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
	}
	return !p.bad
}

// trace reads the trace member: an object or null.
func (p *reader) trace(dst **Trace) bool {
	if p.null() {
		return true
	}
	if !p.eat('{') {
		return false
	}
	t := &Trace{}
	*dst = t
	var seen uint8
	for more := p.open('}'); more; more = p.next('}') {
		name, ok := p.name()
		if !ok {
			return false
		}
		var bit uint8
		switch string(name) {
		case "trace_id":
			bit, ok = 1, p.stringInto(&t.TraceID)
		case "span_id":
			bit, ok = 2, p.stringInto(&t.SpanID)
		default:
			return false
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
	}
	return !p.bad
}

// failure reads the error member: an object or null.
func (p *reader) failure(dst **Failure) bool {
	if p.null() {
		return true
	}
	if !p.eat('{') {
		return false
	}
	f := &Failure{}
	*dst = f
	var seen uint8
	for more := p.open('}'); more; more = p.next('}') {
		name, ok := p.name()
		if !ok {
			return false
		}
		var bit uint8
		switch string(name) {
		case "code":
			bit, ok = 1, p.stringInto(&f.Code)
		case "reason":
			bit, ok = 2, p.stringInto(&f.Reason)
		case "retryable":
			bit, ok = 4, p.boolInto(&f.Retryable)
		case "message":
			bit, ok = 8, p.stringInto(&f.Message)
		case "details":
			bit, ok = 16, p.mapInto(&f.Details)
		default:
			return false
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
	}
	return !p.bad
}
