package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/jsonv"
)

// TranscriptEntry is one transcript record: a call before it runs, or its
// result after. ChainHash = sha256(PrevHash || EntryHash), where EntryHash
// is the digest of the entry's envelope; the chain of a run starts at
// GenesisHash.
//
// A result entry is the result as the gateway hashed it, before the two
// fields that describe the recording rather than the outcome are set on the
// result Call returns: latency_ms is 0 and metadata.tool_transcript_id is
// empty. A replay, whose clock and timing differ, therefore rebuilds the
// same entries byte for byte.
//
// A sink is given entries that are its own to keep: what it does to them
// changes neither the call, its result nor the run. The in-memory stores'
// readers return copies (Clone).
type TranscriptEntry struct {
	RunID     string              `json:"run_id"`
	Seq       int                 `json:"seq"`
	Kind      string              `json:"kind"` // "call" or "result"
	Call      *ToolCallEnvelope   `json:"call,omitempty"`
	Result    *ToolResultEnvelope `json:"result,omitempty"`
	EntryHash string              `json:"entry_hash"`
	PrevHash  string              `json:"prev_hash"`
	ChainHash string              `json:"chain_hash"`
}

// Clone returns a copy of e that shares no memory with it: its envelopes,
// their maps and lists (deep, for the JSON-shaped values args, metadata,
// output and error details hold) and the values behind their pointers.
func (e TranscriptEntry) Clone() TranscriptEntry {
	if e.Call != nil {
		c := &ownedCall{env: *e.Call}
		ownCall(&c.env, &c.room)
		c.env.Args = jsonv.CloneObject(c.env.Args)
		c.env.Metadata = jsonv.CloneObject(c.env.Metadata)
		c.env.EvidenceRefs = slices.Clone(c.env.EvidenceRefs)
		e.Call = &c.env
	}
	if e.Result != nil {
		e.Result = e.Result.Clone()
	}
	return e
}

// ownedCall is a copy of a call envelope with room for what it owns.
type ownedCall struct {
	env  ToolCallEnvelope
	room callRoom
}

// ownedResult is a copy of a result envelope with room for what it owns.
type ownedResult struct {
	env  ToolResultEnvelope
	room resultRoom
}

// Clone returns a copy of r that shares no memory with it: its output
// (deep), lists, error details and the values behind its pointers.
func (r *ToolResultEnvelope) Clone() *ToolResultEnvelope {
	if r == nil {
		return nil
	}
	c := &ownedResult{env: *r}
	ownResult(&c.env, &c.room)
	return &c.env
}

// GenesisHash starts every run's transcript chain.
const GenesisHash = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// TranscriptSink stores transcript entries append-only. Append must keep
// the entry or return an error (never drop silently), be safe for
// concurrent use, and honour ctx. It must refuse a chained entry (one
// with a ChainHash) at a position (RunID, Seq) that already holds a
// chained entry with another chain hash (the same entry appended again,
// as a retried Temporal activity does, may be refused or kept as a
// no-op): a runtime that was taken over while a call of its was
// still running comes back with the next position of its own chain,
// which the takeover may have used, and only the refusal keeps the run's
// chain from forking (gatewaytest.RunTranscriptSinkTests holds this).
type TranscriptSink interface {
	Append(ctx context.Context, e TranscriptEntry) error
}

// MemoryTranscript is the in-memory TranscriptSink. It keeps entries by
// run, so reading one run back costs that run's entries only, and it can
// bound how many runs it keeps (the oldest run is dropped first). A run's
// entries are kept encoded, back to back in one byte slice the collector
// does not scan (entrycodec.go), and decoded when read back.
type MemoryTranscript struct {
	mu      sync.Mutex
	runs    map[string]*memRun
	order   []string // run ids, oldest first
	maxRuns int
	// last is the run started last: a run's first append sizes its
	// buffers as that run's are (runs alike, as a host's mostly are,
	// then grow them once or not at all).
	last *memRun
}

// memRun is one run's kept entries.
type memRun struct {
	buf  []byte     // the encoded entries, back to back
	ents []memEntry // one per entry, in the order appended
	// odd are the entries the encoding cannot give back exactly, kept as
	// they were appended (entrycodec.go); none in a run the gateway
	// records, unless an adapter's output holds such values.
	odd  []TranscriptEntry
	next int // the run's highest chained position + 1
}

// memEntry places one entry: its encoding ends at end in buf, or, when
// end is negative, it is odd[-end-1].
type memEntry struct {
	end     int32
	seq     int32
	chained bool
}

var _ TranscriptSink = (*MemoryTranscript)(nil)

// NewMemoryTranscript returns an empty transcript that keeps every run.
func NewMemoryTranscript() *MemoryTranscript { return NewMemoryTranscriptLimit(0) }

// NewMemoryTranscriptLimit returns an empty transcript that keeps the
// entries of the maxRuns most recently started runs (0: no limit).
func NewMemoryTranscriptLimit(maxRuns int) *MemoryTranscript {
	return &MemoryTranscript{runs: map[string]*memRun{}, maxRuns: max(maxRuns, 0)}
}

// defaultMemoryTranscriptRuns is how many runs the gateway's default
// in-memory transcript keeps.
const defaultMemoryTranscriptRuns = 10_000

// Append implements TranscriptSink.
func (m *MemoryTranscript) Append(ctx context.Context, e TranscriptEntry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runs == nil {
		m.runs = map[string]*memRun{}
	}
	r := m.runs[e.RunID]
	if r != nil && e.ChainHash != "" && e.Seq < r.next && r.chainedAt(e.Seq) {
		return fmt.Errorf("%w: run %s already holds a chained entry at position %d", ErrPositionTaken, e.RunID, e.Seq)
	}
	if r == nil {
		r = &memRun{}
		if l := m.last; l != nil {
			r.buf = make([]byte, 0, min(len(l.buf), 64<<10))
			r.ents = make([]memEntry, 0, min(len(l.ents), 1<<10))
		}
		m.last = r
		m.runs[e.RunID] = r
		m.order = append(m.order, e.RunID)
		if m.maxRuns > 0 && len(m.order) > m.maxRuns {
			delete(m.runs, m.order[0])
			m.order = slices.Delete(m.order, 0, 1)
		}
	}
	r.add(e)
	if e.ChainHash != "" && e.Seq >= r.next {
		r.next = e.Seq + 1
	}
	return nil
}

// add keeps e, encoded when the encoding gives it back exactly and its
// place fits the index (positions and offsets below 2³¹).
func (r *memRun) add(e TranscriptEntry) {
	me := memEntry{seq: int32(e.Seq), chained: e.ChainHash != ""}
	if int(me.seq) == e.Seq {
		if b, ok := appendEntry(r.buf, &e); ok && len(b) <= math.MaxInt32 {
			r.buf, me.end = b, int32(len(b))
			r.ents = append(r.ents, me)
			return
		}
	}
	r.odd = append(r.odd, e)
	me.end = -int32(len(r.odd))
	r.ents = append(r.ents, me)
}

// chainedAt reports whether the run holds a chained entry at position
// seq. Only an append below the run's highest chained position asks (a
// runtime that came back after a takeover), so the run's index is read
// only then.
func (r *memRun) chainedAt(seq int) bool {
	for i := len(r.ents) - 1; i >= 0; i-- {
		if me := r.ents[i]; me.chained && (me.end >= 0 && int(me.seq) == seq || me.end < 0 && r.odd[-me.end-1].Seq == seq) {
			return true
		}
	}
	return false
}

// appendTo appends copies of the run's entries to out: the encoded ones
// decoded afresh, the others cloned.
func (r *memRun) appendTo(out []TranscriptEntry) []TranscriptEntry {
	d := entryDecoder{s: string(r.buf)}
	for _, me := range r.ents {
		if me.end < 0 {
			out = append(out, r.odd[-me.end-1].Clone())
			continue
		}
		out = append(out, d.entry())
		d.i = int(me.end)
	}
	return out
}

// ErrPositionTaken is the error of a transcript append refused because
// the run already holds a chained entry at the entry's position: the
// chain would fork there. It wraps ErrChain.
var ErrPositionTaken = fmt.Errorf("%w: position already taken", ErrChain)

// Entries returns copies (Clone) of the entries of run, or of every kept
// run, run by run in the order they started, when run is "": what the
// caller does to them changes nothing the transcript keeps.
func (m *MemoryTranscript) Entries(run string) []TranscriptEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := m.order
	if run != "" {
		ids = []string{run}
	}
	var out []TranscriptEntry
	for _, id := range ids {
		if r := m.runs[id]; r != nil {
			out = r.appendTo(out)
		}
	}
	return out
}

// TranscriptReader is an optional TranscriptSink capability: reading back
// one run's entries, in order. Replay capture needs it (MemoryTranscript
// has it).
type TranscriptReader interface {
	RunEntries(ctx context.Context, runID string) ([]TranscriptEntry, error)
}

// RunEntries implements TranscriptReader.
func (m *MemoryTranscript) RunEntries(ctx context.Context, runID string) ([]TranscriptEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return m.Entries(runID), nil
}

// ErrChain reports a transcript whose chain does not verify.
var ErrChain = errors.New("gateway: transcript chain broken")

// VerifyTranscript recomputes the chain of one run's entries (in order)
// and returns the final chain hash, or an error naming the first broken
// entry. Each entry must also be what its kind says: a "call" holding a
// call envelope and no result, or a "result" holding a result and no
// call. The kind is outside the entry's hash, and a reader counts calls
// and results by it.
func VerifyTranscript(entries []TranscriptEntry) (string, error) {
	return verifyChain(entries, 0, GenesisHash)
}

// verifyChain verifies entries as the part of a run's chain that starts
// at sequence seq after the chain hash prev.
func verifyChain(entries []TranscriptEntry, seq int, prev string) (string, error) {
	for i, e := range entries {
		if !(e.Kind == "call" && e.Call != nil && e.Result == nil || e.Kind == "result" && e.Result != nil && e.Call == nil) {
			return "", fmt.Errorf("%w: entry %d (seq %d) is neither a call nor a result", ErrChain, i, e.Seq)
		}
		h, err := entryDigest(e)
		if err != nil {
			return "", fmt.Errorf("%w: entry %d: %w", ErrChain, i, err)
		}
		if e.Seq != seq+i || h != e.EntryHash || e.PrevHash != prev || e.ChainHash != chain(prev, h) {
			return "", fmt.Errorf("%w at entry %d (seq %d)", ErrChain, i, e.Seq)
		}
		prev = e.ChainHash
	}
	return prev, nil
}

func chain(prev, entry string) string {
	var out [canon.DigestLen]byte
	return string(appendChain(out[:0], prev, entry))
}

// appendChain appends sha256(prev || entry) to dst.
func appendChain[E string | []byte](dst []byte, prev string, entry E) []byte {
	var buf [2 * canon.DigestLen]byte
	return canon.AppendDigestBytes(dst, append(append(buf[:0], prev...), entry...))
}

// entryDigest is the digest of an entry's envelope, encoded afresh (a
// missing envelope is null).
func entryDigest(e TranscriptEntry) (string, error) {
	switch {
	case e.Kind == "result" && e.Result != nil:
		return canon.DigestOf(resultEncoding{r: e.Result})
	case e.Kind != "result" && e.Call != nil:
		return canon.DigestOf(callEncoding{e: e.Call})
	}
	return canon.Digest(nil)
}
