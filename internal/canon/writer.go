package canon

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// transform is the single-pass RFC 8785 writer behind JSON. It parses the
// input once and appends the canonical form: object members sorted by the
// UTF-16 code units of their keys, strings re-escaped the ECMAScript way,
// numbers through jcs.NumberToJSON (integers that are already canonical are
// copied). It accepts exactly what jcs.Transform accepts and writes the same
// bytes; FuzzTransformMatchesJCS holds it to that.
func transform(in []byte) ([]byte, error) {
	p := parser{in: in}
	p.skipWS()
	out, err := p.value(make([]byte, 0, len(in)), 0)
	if err != nil {
		return nil, err
	}
	p.skipWS()
	if p.pos != len(p.in) {
		return nil, p.fail("trailing data after JSON value")
	}
	return out, nil
}

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 1000

type parser struct {
	in  []byte
	pos int
}

var errSyntax = errors.New("invalid JSON")

func (p *parser) fail(msg string) error {
	return errors.Join(errSyntax, errors.New(msg+" at offset "+strconv.Itoa(p.pos)))
}

func (p *parser) skipWS() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(dst []byte, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, p.fail("nesting too deep")
	}
	if p.pos >= len(p.in) {
		return nil, p.fail("unexpected end of input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(dst, depth)
	case c == '[':
		return p.array(dst, depth)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return appendString(dst, s), nil
	case c == '-' || c >= '0' && c <= '9':
		return p.number(dst)
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if len(p.in)-p.pos >= len(lit) && string(p.in[p.pos:p.pos+len(lit)]) == lit {
				p.pos += len(lit)
				return append(dst, lit...), nil
			}
		}
		return nil, p.fail("invalid value")
	}
}

func (p *parser) array(dst []byte, depth int) ([]byte, error) {
	p.pos++ // [
	dst = append(dst, '[')
	p.skipWS()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return append(dst, ']'), nil
	}
	for first := true; ; first = false {
		if !first {
			dst = append(dst, ',')
		}
		p.skipWS()
		var err error
		if dst, err = p.value(dst, depth+1); err != nil {
			return nil, err
		}
		p.skipWS()
		if p.pos >= len(p.in) {
			return nil, p.fail("unterminated array")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return append(dst, ']'), nil
		default:
			return nil, p.fail("expected , or ] in array")
		}
	}
}

type member struct {
	key        string
	start, end int // canonical "key":value in the scratch buffer
}

var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func (p *parser) object(dst []byte, depth int) ([]byte, error) {
	p.pos++ // {
	p.skipWS()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return append(dst, '{', '}'), nil
	}
	bp := scratchPool.Get().(*[]byte)
	buf := (*bp)[:0]
	defer func() { *bp = buf[:0]; scratchPool.Put(bp) }()
	var members []member
	for {
		p.skipWS()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return nil, p.fail("expected string key in object")
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		p.skipWS()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return nil, p.fail("expected : after object key")
		}
		p.pos++
		p.skipWS()
		start := len(buf)
		buf = appendString(buf, key)
		buf = append(buf, ':')
		if buf, err = p.value(buf, depth+1); err != nil {
			return nil, err
		}
		members = append(members, member{key: key, start: start, end: len(buf)})
		p.skipWS()
		if p.pos >= len(p.in) {
			return nil, p.fail("unterminated object")
		}
		if p.in[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.in[p.pos] != '}' {
			return nil, p.fail("expected , or } in object")
		}
		p.pos++
		break
	}
	slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.key, b.key) })
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].key == m.key {
				return nil, p.fail("duplicate object key")
			}
			dst = append(dst, ',')
		}
		dst = append(dst, buf[m.start:m.end]...)
	}
	return append(dst, '}'), nil
}

// compareUTF16 orders strings by their UTF-16 code units (RFC 8785 §3.2.3).
// Byte order of UTF-8 equals code point order, which differs from UTF-16
// order only between supplementary characters (surrogate pairs, D800–DFFF)
// and BMP characters E000–FFFF.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return int(utf16Key(ra)) - int(utf16Key(rb))
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// utf16Key maps a rune to its first UTF-16 code unit, which decides the
// order of two different runes (equal first units imply both are
// supplementary; then their code points order them the same way).
func utf16Key(r rune) uint32 {
	if r >= 0x10000 {
		hi, lo := utf16.EncodeRune(r)
		return uint32(hi)<<16 | uint32(lo)
	}
	return uint32(r) << 16
}

func (p *parser) str() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes, printable ASCII or valid UTF-8.
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == '"' {
			s := p.in[start:p.pos]
			p.pos++
			if !utf8.Valid(s) {
				return "", p.fail("invalid UTF-8 in string")
			}
			return string(s), nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p.pos++
	}
	out := append([]byte(nil), p.in[start:p.pos]...)
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			if !utf8.Valid(out) {
				return "", p.fail("invalid UTF-8 in string")
			}
			return string(out), nil
		case c < 0x20:
			return "", p.fail("control character in string")
		case c != '\\':
			out = append(out, c)
			p.pos++
			continue
		}
		p.pos++ // backslash
		if p.pos >= len(p.in) {
			break
		}
		e := p.in[p.pos]
		p.pos++
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.fail("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xdc00 || p.pos+1 >= len(p.in) || p.in[p.pos] != '\\' || p.in[p.pos+1] != 'u' {
					return "", p.fail("lone surrogate in string")
				}
				p.pos += 2
				r2, ok := p.hex4()
				if !ok || r2 < 0xdc00 || r2 > 0xdfff {
					return "", p.fail("lone surrogate in string")
				}
				r = utf16.DecodeRune(r, r2)
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", p.fail("invalid escape in string")
		}
	}
	return "", p.fail("unterminated string")
}

func (p *parser) hex4() (rune, bool) {
	if p.pos+4 > len(p.in) {
		return 0, false
	}
	var r rune
	for _, c := range p.in[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	p.pos += 4
	return r, true
}

const hexDigits = "0123456789abcdef"

// appendString writes s as ECMAScript JSON.stringify does.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func (p *parser) number(dst []byte) ([]byte, error) {
	start := p.pos
	if p.in[p.pos] == '-' {
		p.pos++
	}
	intStart := p.pos
	switch {
	case p.pos < len(p.in) && p.in[p.pos] == '0':
		p.pos++
	case p.pos < len(p.in) && p.in[p.pos] >= '1' && p.in[p.pos] <= '9':
		for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
			p.pos++
		}
	default:
		return nil, p.fail("invalid number")
	}
	plainInt := true
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		plainInt = false
		p.pos++
		if !p.digits() {
			return nil, p.fail("invalid number fraction")
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		plainInt = false
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if !p.digits() {
			return nil, p.fail("invalid number exponent")
		}
	}
	lit := p.in[start:p.pos]
	// An integer literal of at most 15 digits is exactly representable and
	// already in canonical form (except -0).
	if plainInt && p.pos-intStart <= 15 && string(lit) != "-0" {
		return append(dst, lit...), nil
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return nil, p.fail("number out of range")
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return nil, p.fail("number has no canonical form")
	}
	return append(dst, s...), nil
}

func (p *parser) digits() bool {
	start := p.pos
	for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
		p.pos++
	}
	return p.pos > start
}
