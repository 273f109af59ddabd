package canon

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Appender is a type that writes its own canonical form. The gateway's
// envelope writers implement it to skip reflection. The contract:
// AppendCanonical appends exactly the bytes github.com/gowebpki/jcs writes
// for the value's encoding/json output, and fails where that would fail;
// every implementation's tests and fuzz targets hold it to jcs.
//
// The encoder uses AppendCanonical when the value's type implements it
// (a nil pointer is still written as null).
type Appender interface {
	AppendCanonical(dst []byte) ([]byte, error)
}

// Raw is JSON already in canonical form (the output of [JSON]), written
// as is. It lets a caller encode a large value once and use the bytes in
// several ids and digests. Raw that is not canonical makes wrong ids; it
// is never built from outside input.
type Raw []byte

// AppendCanonical implements Appender.
func (r Raw) AppendCanonical(dst []byte) ([]byte, error) {
	if len(r) == 0 {
		return nil, fmt.Errorf("%w: empty Raw", ErrNotCanonicalizable)
	}
	return append(dst, r...), nil
}

// AppendString appends s as a canonical JSON string (invalid UTF-8 bytes
// become U+FFFD, as encoding/json writes them).
func AppendString(dst []byte, s string) []byte { return appendGoString(dst, s) }

// AppendInt appends i as a canonical JSON number; an integer beyond
// ±MaxSafeInteger is an *IntegerError.
func AppendInt(dst []byte, i int64) ([]byte, error) { return appendInt(dst, i) }

// AppendFloat appends f as a canonical JSON number; NaN and infinities
// are an error.
func AppendFloat(dst []byte, f float64) ([]byte, error) { return appendFloat(dst, f) }

// AppendBool appends true or false.
func AppendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

// AppendValue appends the canonical form of any value, as JSON does.
func AppendValue(dst []byte, v any) ([]byte, error) {
	n := len(dst)
	out, err := appendAny(dst, v)
	if !errors.Is(err, errSlowPath) {
		return out, err
	}
	slow, err := jsonSlow(v)
	if err != nil {
		return nil, err
	}
	return append(dst[:n], slow...), nil
}

// DigestOf returns the digest (as [Digest]) of what a writes, encoding
// into a pooled buffer.
func DigestOf(a Appender) (string, error) { return digestOf(a.AppendCanonical) }

// appendIDParts writes ID's parts as one canonical JSON array; strings,
// ints and Appenders skip the reflective encoder.
func appendIDParts(dst []byte, parts []any) ([]byte, error) {
	dst = append(dst, '[')
	for i, p := range parts {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		switch x := p.(type) {
		case string:
			dst = appendGoString(dst, x)
		case int:
			dst, err = appendInt(dst, int64(x))
		case Appender:
			dst, err = x.AppendCanonical(dst)
		default:
			dst, err = AppendValue(dst, x)
		}
		if err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

// appendSumID appends the id of the canonical parts in buf (after the
// prefix and NUL) to dst.
func appendSumID(dst []byte, prefix string, buf []byte) []byte {
	sum := sha256.Sum256(buf)
	return appendHex(append(append(dst, prefix...), '_'), sum[:idHexLen/2])
}

func validPrefix(prefix string) bool {
	return prefix != "" && len(prefix) <= 32 && !strings.ContainsAny(prefix, "_ ")
}

// Members is a JSON object's member names in canonical order, each
// written once, so a hot path can write an object whose names it knows in
// advance without building a map: AppendObject with the member values in
// the same order writes what a map[string]any of those names and values
// encodes to.
type Members struct {
	names []string
	enc   [][]byte // `"name":`
}

// NewMembers returns the distinct names in canonical (UTF-16 code unit)
// order; ok is false when a name is not valid UTF-8 (such a name is
// written the general way, through a map).
func NewMembers(names []string) (m Members, ok bool) {
	for _, n := range names {
		if !utf8.ValidString(n) {
			return Members{}, false
		}
	}
	m.names = slices.Clone(names)
	slices.SortFunc(m.names, compareUTF16)
	m.names = slices.Compact(m.names)
	for _, n := range m.names {
		m.enc = append(m.enc, append(appendString(nil, n), ':'))
	}
	return m, true
}

// Names returns the member names in canonical order.
func (m Members) Names() []string { return m.names }

// AppendObject appends the object of m's names with the values value(i)
// returns for each name i (in Names order), as AppendValue writes each.
func (m Members) AppendObject(dst []byte, value func(i int) any) ([]byte, error) {
	dst = append(dst, '{')
	for i, enc := range m.enc {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, enc...)
		var err error
		if dst, err = AppendValue(dst, value(i)); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// AppendDigestObject appends to dst the digest (as [Digest]) of the
// object of m's names with values in the same order: what Digest of a
// map[string]any of those names and values gives, without the map.
// values must hold one value for each name.
func (m Members) AppendDigestObject(dst []byte, values []any) ([]byte, error) {
	if len(values) != len(m.names) {
		return nil, fmt.Errorf("canon: %d values for %d members", len(values), len(m.names))
	}
	return appendDigestWith(dst, func(dst []byte) ([]byte, error) {
		return m.AppendObject(dst, func(i int) any { return values[i] })
	})
}

// AppendDigestScalars is [Members.AppendDigestObject] for values that
// are all null, strings, float64s or bools: the object is written into
// scratch (which may be on the caller's stack, as nothing it is given
// escapes) instead of a pooled buffer. ok is false, and dst returned as it
// was, when a value is of another type; the caller then takes
// AppendDigestObject.
func (m Members) AppendDigestScalars(dst, scratch []byte, values []any) (out []byte, ok bool, err error) {
	if len(values) != len(m.names) {
		return dst, false, nil
	}
	b := append(scratch[:0], '{')
	for i, enc := range m.enc {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, enc...)
		switch v := values[i].(type) {
		case nil:
			b = append(b, "null"...)
		case string:
			b = appendGoString(b, v)
		case float64:
			if b, err = appendFloat(b, v); err != nil {
				return nil, false, err
			}
		case bool:
			b = AppendBool(b, v)
		default:
			return dst, false, nil
		}
	}
	return AppendDigestBytes(dst, append(b, '}')), true, nil
}

// CompareKeys orders object member names as the canonical form does, by
// their UTF-16 code units (RFC 8785 §3.2.3), for writers that sort a
// map's keys themselves. Names must be valid UTF-8.
func CompareKeys(a, b string) int { return compareUTF16(a, b) }
