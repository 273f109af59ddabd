// Package canon owns the project's hashing contract: RFC 8785 (JSON
// Canonicalization Scheme) canonical JSON of Go values and raw JSON,
// "sha256:<64 lowercase hex>" digests over it, and deterministic,
// content-derived identifiers such as pol_…, tool_…, dr_… and rp_….
//
// Every digest in ContextOS is SHA-256 over the canonical JSON of a value with
// the digest field itself left out (see [DigestExcluding]). The same value
// gives the same bytes and the same digest on every machine, run and Go
// version: map iteration order never reaches the output, numbers are written
// in the ECMAScript form RFC 8785 prescribes and object keys are sorted by
// their UTF-16 code units.
package canon

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// DigestPrefix starts every digest this package writes.
const DigestPrefix = "sha256:"

// ErrNotCanonicalizable reports a value or document that has no canonical
// JSON form: invalid JSON, a NaN or infinite number, or a Go value that
// encoding/json cannot marshal.
var ErrNotCanonicalizable = errors.New("canon: value has no canonical JSON form")

// MaxSafeInteger is the largest integer the canonical form writes exactly:
// 2^53−1, ECMAScript's Number.MAX_SAFE_INTEGER. RFC 8785 writes every
// number as an IEEE 754 double, so a larger integer would be written as
// the nearest double, which reads back as another number (or does not
// fit its Go type at all).
const MaxSafeInteger = 1<<53 - 1

// ErrUnsafeInteger reports a Go integer (int, int64, uint64, …) beyond
// ±MaxSafeInteger: it has no canonical form that reads back as itself, so
// the encoder refuses it rather than hash or store another number. The
// error is an *IntegerError and also matches ErrNotCanonicalizable.
// Numbers in raw JSON documents and json.Number values are numbers in
// JSON's own sense and are canonicalized as RFC 8785 says.
var ErrUnsafeInteger = errors.New("canon: integer beyond ±(2^53−1) has no exact canonical form")

// IntegerError is the error of a Go integer beyond ±MaxSafeInteger. It
// does not carry the integer: a number that long may be an identifier or
// a card number.
type IntegerError struct {
	// Digits is the number of decimal digits of the integer.
	Digits int
}

func (e *IntegerError) Error() string {
	return fmt.Sprintf("canon: a %d-digit integer is beyond ±(2^53−1) and has no exact canonical form", e.Digits)
}

// Is matches ErrUnsafeInteger and ErrNotCanonicalizable.
func (e *IntegerError) Is(target error) bool {
	return target == ErrUnsafeInteger || target == ErrNotCanonicalizable
}

// unsafeInt is the *IntegerError of i.
func unsafeInt(i int64) error {
	n := 0
	for ; i != 0; i /= 10 {
		n++
	}
	return &IntegerError{Digits: n}
}

// unsafeUint is the *IntegerError of u.
func unsafeUint(u uint64) error {
	n := 0
	for ; u != 0; u /= 10 {
		n++
	}
	return &IntegerError{Digits: n}
}

// JSON returns the RFC 8785 canonical JSON of v. A []byte or json.RawMessage
// is taken as a JSON document and canonicalized as is; any other value is
// first marshalled with encoding/json (so its json tags and MarshalJSON
// methods apply).
func JSON(v any) ([]byte, error) {
	// Encoded into a pooled buffer and copied out at its exact size: the
	// result of a small value (a call's arguments) is kept, and a fixed
	// starting capacity would keep hundreds of unused bytes with it.
	bp := digestBufs.Get().(*[]byte)
	out, err := appendJSON((*bp)[:0], v)
	var b []byte
	if err == nil {
		b = slices.Clone(out)
	}
	if cap(out) <= maxPooledBuf {
		*bp = out[:0]
	}
	digestBufs.Put(bp)
	return b, err
}

// appendJSON appends the canonical JSON of v to dst: the reflective fast
// path first, encoding/json and the canonical writer where it cannot go.
func appendJSON(dst []byte, v any) ([]byte, error) {
	switch v.(type) {
	case json.RawMessage, []byte:
	default:
		// appendAny writes JSON-shaped values (maps, slices, strings,
		// numbers) without reflection and hands other types to it.
		out, err := appendAny(dst, v)
		if !errors.Is(err, errSlowPath) {
			return out, err
		}
	}
	slow, err := jsonSlow(v)
	if err != nil {
		return nil, err
	}
	return append(dst, slow...), nil
}

// jsonSlow canonicalizes through encoding/json and the canonical writer.
// A Go value's integers are checked first, as the reflective encoder
// checks them: encoding/json writes any integer, and the canonical writer
// would round it.
func jsonSlow(v any) ([]byte, error) {
	raw, err := marshal(v)
	if err != nil {
		return nil, err
	}
	switch v.(type) {
	case json.RawMessage, []byte:
	default:
		if err := checkIntegers(reflect.ValueOf(v)); err != nil {
			return nil, err
		}
	}
	out, err := transform(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
	}
	return out, nil
}

func marshal(v any) ([]byte, error) {
	switch x := v.(type) {
	case json.RawMessage:
		return x, nil
	case []byte:
		return x, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
	}
	return raw, nil
}

// Digest returns "sha256:" followed by the lowercase hex SHA-256 of the
// canonical JSON of v.
func Digest(v any) (string, error) {
	return digestOf(func(dst []byte) ([]byte, error) { return appendJSON(dst, v) })
}

// digestOf hashes what encode appends, encoding into a pooled buffer: a
// digest needs the bytes only until they are hashed.
func digestOf(encode func(dst []byte) ([]byte, error)) (string, error) {
	var buf [DigestLen]byte
	d, err := appendDigestWith(buf[:0], encode)
	if err != nil {
		return "", err
	}
	return string(d), nil
}

// appendDigestWith appends the digest of what encode writes into a pooled
// buffer.
func appendDigestWith(dst []byte, encode func(dst []byte) ([]byte, error)) ([]byte, error) {
	bp := digestBufs.Get().(*[]byte)
	out, err := encode((*bp)[:0])
	if err == nil {
		dst = AppendDigestBytes(dst, out)
		if cap(out) <= maxPooledBuf {
			*bp = out[:0]
		}
	}
	digestBufs.Put(bp)
	return dst, err
}

// digestBufs pools Digest's encoding buffers; buffers that grew past
// maxPooledBuf are left to the collector.
var digestBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledBuf = 64 << 10

// DigestBytes returns "sha256:<hex>" of b exactly as given (no
// canonicalization). Use it for opaque content such as attachments.
func DigestBytes(b []byte) string {
	var buf [DigestLen]byte
	return string(AppendDigestBytes(buf[:0], b))
}

// DigestLen is the length of a digest: "sha256:" and 64 hex digits.
const DigestLen = len(DigestPrefix) + 2*sha256.Size

// AppendDigestBytes appends [DigestBytes] of b to dst. With dst on the
// stack, a caller that needs several digests makes one string of them.
func AppendDigestBytes(dst, b []byte) []byte {
	sum := sha256.Sum256(b)
	return appendHex(append(dst, DigestPrefix...), sum[:])
}

// hexPairs holds the two lowercase hex digits of every byte value: hex for
// a digest is half the table lookups of encoding/hex.
var hexPairs = func() (t [256][2]byte) {
	const digits = "0123456789abcdef"
	for i := range t {
		t[i] = [2]byte{digits[i>>4], digits[i&0xf]}
	}
	return t
}()

// appendHex appends the lowercase hex of b (as encoding/hex writes it).
func appendHex(dst, b []byte) []byte {
	for _, c := range b {
		p := hexPairs[c]
		dst = append(dst, p[0], p[1])
	}
	return dst
}

// AppendDigestOf appends [DigestOf] a to dst.
func AppendDigestOf(dst []byte, a Appender) ([]byte, error) {
	return appendDigestWith(dst, a.AppendCanonical)
}

// DigestExcluding returns the digest of v with the object member at each
// given path removed first. A path is a list of object keys from the top,
// such as []string{"context_ledger", "compiled_context_hash"}; a path whose
// parent is missing or not an object is ignored. This is how a document that
// carries its own digest is hashed.
func DigestExcluding(v any, paths ...[]string) (string, error) {
	c, err := JSONExcluding(v, paths...)
	if err != nil {
		return "", err
	}
	return DigestBytes(c), nil
}

// JSONExcluding is [JSON] with the members at paths removed, as in
// [DigestExcluding].
func JSONExcluding(v any, paths ...[]string) ([]byte, error) {
	if len(paths) == 0 {
		return JSON(v)
	}
	raw, err := marshal(v)
	if err != nil {
		return nil, err
	}
	switch v.(type) {
	case json.RawMessage, []byte:
	default:
		// A Go value's integers are held to JSON's rule here too: the
		// document below is JSON, in which they would only be rounded.
		if err := checkIntegers(reflect.ValueOf(v)); err != nil {
			return nil, err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keep numbers' text; jcs re-formats them below
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after JSON value", ErrNotCanonicalizable)
	}
	for _, p := range paths {
		remove(doc, p)
	}
	pruned, err := json.Marshal(doc)
	if err != nil { // unreachable for decoded JSON; reported, never panicked
		return nil, fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
	}
	return JSON(json.RawMessage(pruned))
}

func remove(doc any, path []string) {
	for i, key := range path {
		obj, ok := doc.(map[string]any)
		if !ok {
			return
		}
		if i == len(path)-1 {
			delete(obj, key)
			return
		}
		doc = obj[key]
	}
}

// IsDigest reports whether s has the form "sha256:<64 lowercase hex>".
func IsDigest(s string) bool {
	if !strings.HasPrefix(s, DigestPrefix) {
		return false
	}
	return IsLowerHex(s[len(DigestPrefix):], 2*sha256.Size)
}

// IsLowerHex reports whether s is exactly n lowercase hex digits.
func IsLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
