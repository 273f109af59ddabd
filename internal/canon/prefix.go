package canon

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"hash"
	"sync"
	"sync/atomic"
)

// PrefixState remembers SHA-256's state after the first 64-byte block of
// one encoding, so that digests of later encodings that start with the
// same 64 bytes (a call envelope's approval modes, a result envelope's
// empty artifacts and capability id) hash only the rest: the digest is
// the same, one compression of the block fewer. It keeps the first block
// it is given; an encoding that starts otherwise is hashed whole. The zero
// value is ready to use, and it is safe for concurrent use.
type PrefixState struct {
	p atomic.Pointer[prefixState]
}

// prefixState is the block and SHA-256's state after it (its
// MarshalBinary form).
type prefixState struct {
	block [sha256.BlockSize]byte
	state []byte
}

// midHash is a pooled SHA-256 with room for its sum.
type midHash struct {
	h   hash.Hash
	sum [sha256.Size]byte
}

var midHashes = sync.Pool{New: func() any { return &midHash{h: sha256.New()} }}

// AppendDigestOfCached appends [DigestOf] a to dst, with ps (nil: none)
// remembering the state after the encoding's first block.
func AppendDigestOfCached(dst []byte, a Appender, ps *PrefixState) ([]byte, error) {
	return appendDigestFrom(dst, a.AppendCanonical, ps)
}

// appendDigest appends [DigestBytes] of b to dst: from the remembered
// state when b starts with the remembered block (ps nil: none).
func (ps *PrefixState) appendDigest(dst, b []byte) []byte {
	if ps == nil || len(b) <= sha256.BlockSize {
		return AppendDigestBytes(dst, b)
	}
	st := ps.p.Load()
	if st == nil {
		ps.remember(b[:sha256.BlockSize])
		return AppendDigestBytes(dst, b)
	}
	if !bytes.Equal(st.block[:], b[:sha256.BlockSize]) {
		return AppendDigestBytes(dst, b)
	}
	m := midHashes.Get().(*midHash)
	if err := m.h.(encoding.BinaryUnmarshaler).UnmarshalBinary(st.state); err != nil {
		midHashes.Put(m)
		return AppendDigestBytes(dst, b)
	}
	m.h.Write(b[sha256.BlockSize:])
	sum := m.h.Sum(m.sum[:0])
	dst = appendHex(append(dst, DigestPrefix...), sum)
	midHashes.Put(m)
	return dst
}

// remember keeps SHA-256's state after block, unless a state is kept
// already.
func (ps *PrefixState) remember(block []byte) {
	h := sha256.New()
	h.Write(block)
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return
	}
	st := &prefixState{state: state}
	copy(st.block[:], block)
	ps.p.CompareAndSwap(nil, st)
}
