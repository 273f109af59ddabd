package gateway

import (
	"context"
	"errors"
	"fmt"
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
// bound how many runs it keeps (the oldest run is dropped first).
type MemoryTranscript struct {
	mu      sync.Mutex
	runs    map[string][]TranscriptEntry
	next    map[string]int // a run's highest chained position + 1
	order   []string       // run ids, oldest first
	maxRuns int
}

var _ TranscriptSink = (*MemoryTranscript)(nil)

// NewMemoryTranscript returns an empty transcript that keeps every run.
func NewMemoryTranscript() *MemoryTranscript { return NewMemoryTranscriptLimit(0) }

// NewMemoryTranscriptLimit returns an empty transcript that keeps the
// entries of the maxRuns most recently started runs (0: no limit).
func NewMemoryTranscriptLimit(maxRuns int) *MemoryTranscript {
	return &MemoryTranscript{runs: map[string][]TranscriptEntry{}, next: map[string]int{}, maxRuns: max(maxRuns, 0)}
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
		m.runs, m.next = map[string][]TranscriptEntry{}, map[string]int{}
	}
	es, ok := m.runs[e.RunID]
	if e.ChainHash != "" && e.Seq < m.next[e.RunID] && chainedAt(es, e.Seq) {
		return fmt.Errorf("%w: run %s already holds a chained entry at position %d", ErrPositionTaken, e.RunID, e.Seq)
	}
	if !ok {
		m.order = append(m.order, e.RunID)
		if m.maxRuns > 0 && len(m.order) > m.maxRuns {
			delete(m.runs, m.order[0])
			delete(m.next, m.order[0])
			m.order = slices.Delete(m.order, 0, 1)
		}
	}
	m.runs[e.RunID] = append(es, e)
	if e.ChainHash != "" && e.Seq >= m.next[e.RunID] {
		m.next[e.RunID] = e.Seq + 1
	}
	return nil
}

// chainedAt reports whether es holds a chained entry at position seq.
// Only an append below the run's highest chained position asks (a
// runtime that came back after a takeover), so the run's entries are
// read only then.
func chainedAt(es []TranscriptEntry, seq int) bool {
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].Seq == seq && es[i].ChainHash != "" {
			return true
		}
	}
	return false
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
		for _, e := range m.runs[id] {
			out = append(out, e.Clone())
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
