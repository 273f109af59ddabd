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

// midHash is a SHA-256 with room for its sum (a cachedDigest's).
type midHash struct {
	h   hash.Hash
	sum [sha256.Size]byte
}

// cachedDigest is what a digest with a PrefixState takes, pooled as one:
// the encoding's buffer and a SHA-256 to resume from the remembered state.
type cachedDigest struct {
	buf []byte
	m   midHash
}

var cachedDigests = sync.Pool{New: func() any {
	return &cachedDigest{buf: make([]byte, 0, 1024), m: midHash{h: sha256.New()}}
}}

// AppendDigestOfCached appends [DigestOf] a to dst, with ps (nil: none)
// remembering the state after the encoding's first block.
func AppendDigestOfCached(dst []byte, a Appender, ps *PrefixState) ([]byte, error) {
	if ps == nil {
		return appendDigestWith(dst, a.AppendCanonical)
	}
	cd := cachedDigests.Get().(*cachedDigest)
	out, err := a.AppendCanonical(cd.buf[:0])
	if err == nil {
		dst = ps.appendDigestWith(dst, out, &cd.m)
		if cap(out) <= maxPooledBuf {
			cd.buf = out[:0]
		}
	}
	cachedDigests.Put(cd)
	return dst, err
}

// appendDigestWith appends [DigestBytes] of b to dst: resumed in m from
// the remembered state when b starts with the remembered block.
func (ps *PrefixState) appendDigestWith(dst, b []byte, m *midHash) []byte {
	if len(b) <= sha256.BlockSize {
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
	if err := m.h.(encoding.BinaryUnmarshaler).UnmarshalBinary(st.state); err != nil {
		return AppendDigestBytes(dst, b)
	}
	m.h.Write(b[sha256.BlockSize:])
	sum := m.h.Sum(m.sum[:0])
	return appendHex(append(dst, DigestPrefix...), sum)
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
