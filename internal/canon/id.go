package canon

import (
	"fmt"
	"strings"
)

// Prefixes of the identifiers the seeds name. Ids that replay must reproduce
// are derived from content with [ID]; the others come from an injected id
// source.
const (
	PrefixRun      = "run"
	PrefixRequest  = "req"
	PrefixPolicy   = "pol"
	PrefixToolCall = "tool"
	PrefixDecision = "dr"
	PrefixReplay   = "rp"
	PrefixIdem     = "ik"
)

// idHexLen is the number of hex digits after the prefix: 64 bits, as in the
// seed's run_a1b2c3d4e5f60718.
const idHexLen = 16

// ID derives a deterministic identifier "<prefix>_<16 lowercase hex>" from
// the canonical JSON of parts (taken together as one JSON array). The same
// prefix and parts always give the same id; parts differ in any way, the id
// differs with overwhelming probability. Parts must be canonicalizable; a
// value that is not (a NaN, say) is an error.
func ID(prefix string, parts ...any) (string, error) {
	return makeID(prefix, func(dst []byte) ([]byte, error) { return appendIDParts(dst, parts) })
}

// Part is one part of an id built with [IDOf]: a string, an int or
// canonical JSON. Unlike [ID]'s parts it is not an interface, so hot paths
// build ids without allocating for their parts.
type Part struct {
	s    string
	b    []byte
	raw  Raw
	i    int
	kind partKind
}

type partKind uint8

const (
	partString partKind = iota
	partInt
	partRaw
	partBytes
)

// StringPart is a string part of an id.
func StringPart(s string) Part { return Part{s: s, kind: partString} }

// IntPart is an int part of an id.
func IntPart(i int) Part { return Part{i: i, kind: partInt} }

// BytesPart is a string part given as its bytes: IDOf(p, BytesPart(b))
// equals IDOf(p, StringPart(string(b))) without the string, so a caller
// can hash bytes it has just written (a digest, say) into the same buffer
// it appends the id to. b must not change until the id is built.
func BytesPart(b []byte) Part { return Part{b: b, kind: partBytes} }

// RawPart is a part of an id already in canonical JSON (see [Raw]).
func RawPart(r Raw) Part { return Part{raw: r, kind: partRaw} }

// IDOf is [ID] with typed parts: IDOf(p, StringPart(a), IntPart(n)) equals
// ID(p, a, n), and a RawPart equals the same [Raw] given to ID.
func IDOf(prefix string, parts ...Part) (string, error) {
	return makeID(prefix, func(dst []byte) ([]byte, error) { return appendParts(dst, parts) })
}

// AppendIDOf appends [IDOf] to dst, so a caller can build the id into a
// longer string in one allocation.
func AppendIDOf(dst []byte, prefix string, parts ...Part) ([]byte, error) {
	return appendID(dst, prefix, func(dst []byte) ([]byte, error) { return appendParts(dst, parts) })
}

// AppendIDHead appends the start of what an id of prefix hashes: the
// prefix, a NUL and the '[' of its parts' array. A caller that derives
// many ids sharing their leading parts writes the head and those parts
// once, then for each id the other parts and the closing ']', and hashes
// the whole with [AppendIDSum]: IDOf(prefix, StringPart(a),
// StringPart(b)) is AppendIDSum of the head, AppendString(a), ',',
// AppendString(b) and ']'.
func AppendIDHead(dst []byte, prefix string) ([]byte, error) {
	if !validPrefix(prefix) {
		return nil, fmt.Errorf("canon: invalid id prefix %q", prefix)
	}
	return append(append(dst, prefix...), 0, '['), nil
}

// AppendIDSum appends to dst the id of input, written as [AppendIDHead]
// says with the same prefix: "<prefix>_<16 lowercase hex>".
func AppendIDSum(dst []byte, prefix string, input []byte) []byte {
	return appendSumID(dst, prefix, input)
}

// appendParts writes typed parts as one canonical JSON array.
func appendParts(dst []byte, parts []Part) ([]byte, error) {
	dst = append(dst, '[')
	for i, p := range parts {
		if i > 0 {
			dst = append(dst, ',')
		}
		switch p.kind {
		case partString:
			dst = appendGoString(dst, p.s)
		case partBytes:
			if plainASCII(p.b) {
				dst = append(append(append(dst, '"'), p.b...), '"')
			} else {
				dst = appendGoString(dst, string(p.b))
			}
		case partInt:
			var err error
			if dst, err = appendInt(dst, int64(p.i)); err != nil {
				return nil, err
			}
		default:
			var err error
			if dst, err = p.raw.AppendCanonical(dst); err != nil {
				return nil, err
			}
		}
	}
	return append(dst, ']'), nil
}

// makeID hashes the prefix, a NUL and what parts appends, in a pooled
// buffer.
func makeID(prefix string, parts func(dst []byte) ([]byte, error)) (string, error) {
	var out [64]byte
	b, err := appendID(out[:0], prefix, parts)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// appendID appends to dst the id makeID returns.
func appendID(dst []byte, prefix string, parts func(dst []byte) ([]byte, error)) ([]byte, error) {
	if !validPrefix(prefix) {
		return nil, fmt.Errorf("canon: invalid id prefix %q", prefix)
	}
	bp := digestBufs.Get().(*[]byte)
	buf, err := parts(append(append((*bp)[:0], prefix...), 0))
	if err != nil {
		digestBufs.Put(bp)
		return nil, err
	}
	dst = appendSumID(dst, prefix, buf)
	if cap(buf) <= maxPooledBuf {
		*bp = buf
		digestBufs.Put(bp)
	}
	return dst, nil
}

// HasPrefix reports whether id has the form "<prefix>_<something>".
func HasPrefix(id, prefix string) bool {
	return len(id) > len(prefix)+1 && strings.HasPrefix(id, prefix) && id[len(prefix)] == '_'
}
