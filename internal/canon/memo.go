package canon

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"sync/atomic"
)

// HashMemo remembers the last encoding digested through it and SHA-256's
// state at every memoStride bytes of it, so that the digest of a later
// encoding that starts with the same bytes hashes only from the last
// remembered state inside the shared part (an encoding equal to the last
// one is not hashed again). The digest is the SHA-256 of the whole
// encoding either way: the memo only skips compressing blocks whose input
// is byte for byte the input the remembered state was computed from.
//
// It suits a digest taken once per run of a value most of whose encoding
// repeats from run to run (a compiled context's prompt, manifests and
// budget from the same pack and evidence). It keeps a copy of the last
// encoding. The zero value is ready to use, and it is safe for concurrent
// use: each digest reads one immutable snapshot, and the last writer's
// encoding is the one kept.
type HashMemo struct {
	p atomic.Pointer[hashMemo]
}

// memoStride is how often the memo keeps SHA-256's state: a multiple of
// the block size, so each state is at a block boundary.
const memoStride = 16 * sha256.BlockSize

// hashMemo is one remembered encoding: enc, its digest, and states, the
// MarshalBinary form of SHA-256's state after enc[:(i+1)*memoStride] at
// [i*size:(i+1)*size].
type hashMemo struct {
	enc    []byte
	digest [DigestLen]byte
	states []byte
	size   int
}

// state returns the i-th remembered state.
func (h *hashMemo) state(i int) []byte { return h.states[i*h.size : (i+1)*h.size] }

// n is the number of remembered states.
func (h *hashMemo) n() int {
	if h.size == 0 {
		return 0
	}
	return len(h.states) / h.size
}

// DigestOfMemo returns [DigestOf] a, with m (nil: none) remembering the
// encoding (see HashMemo).
func DigestOfMemo(a Appender, m *HashMemo) (string, error) {
	var buf [DigestLen]byte
	d, err := appendDigestMemo(buf[:0], a.AppendCanonical, m)
	if err != nil {
		return "", err
	}
	return string(d), nil
}

// appendDigestMemo is appendDigestWith with m remembering the encoding.
func appendDigestMemo(dst []byte, encode func(dst []byte) ([]byte, error), m *HashMemo) ([]byte, error) {
	if m == nil {
		return appendDigestWith(dst, encode)
	}
	bp := digestBufs.Get().(*[]byte)
	out, err := encode((*bp)[:0])
	if err == nil {
		dst = m.appendDigest(dst, out)
		if cap(out) <= maxPooledBuf {
			*bp = out[:0]
		}
	}
	digestBufs.Put(bp)
	return dst, err
}

// appendDigest appends [DigestBytes] of b to dst: the remembered digest
// when b is the remembered encoding, else hashed from the last remembered
// state within the prefix b shares with it; b and its states are
// remembered in its place.
func (m *HashMemo) appendDigest(dst, b []byte) []byte {
	prev := m.p.Load()
	if prev != nil && bytes.Equal(prev.enc, b) {
		return append(dst, prev.digest[:]...)
	}
	h := sha256.New()
	k := 0 // the strides b shares with prev
	if prev != nil {
		for k < prev.n() && (k+1)*memoStride <= len(b) && bytes.Equal(prev.enc[k*memoStride:(k+1)*memoStride], b[k*memoStride:(k+1)*memoStride]) {
			k++
		}
		if k > 0 {
			if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(prev.state(k - 1)); err != nil {
				h.Reset()
				k = 0
			}
		}
	}
	next := &hashMemo{enc: bytes.Clone(b)}
	if k > 0 {
		next.size = prev.size
		next.states = make([]byte, 0, (len(b)/memoStride)*prev.size)
		next.states = append(next.states, prev.states[:k*prev.size]...)
	}
	ok := true
	off := k * memoStride
	for ; off+memoStride <= len(b); off += memoStride {
		h.Write(b[off : off+memoStride])
		if !ok {
			continue
		}
		n := len(next.states)
		st, err := h.(encoding.BinaryAppender).AppendBinary(next.states)
		if err != nil || (next.size != 0 && len(st)-n != next.size) {
			ok = false // hash the rest; remember no states
			continue
		}
		if next.size == 0 {
			next.size = len(st) - n
			st = append(make([]byte, 0, (len(b)/memoStride)*next.size), st...)
		}
		next.states = st
	}
	h.Write(b[off:])
	var sum [sha256.Size]byte
	d := appendHex(append(next.digest[:0], DigestPrefix...), h.Sum(sum[:0]))
	dst = append(dst, d...)
	if !ok {
		next.states, next.size = nil, 0
	}
	m.p.Store(next)
	return dst
}
