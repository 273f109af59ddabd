package decision

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/runcontext"
)

// Store keeps DecisionRecords append-only and hash-chained.
// Implementations must be safe for concurrent use and honour ctx; Append
// either keeps the record (and returns it with prev_record_hash and
// record_hash set) or returns an error: a record is never dropped
// silently.
//
// A stored record that does not decode as a Record (one an earlier
// release sealed with a number a Record cannot hold) never makes the
// others unreadable: List returns every record it selects that reads,
// in order, together with an *UnreadableError (ErrUnreadable) naming the
// ones that do not; Get of such a record returns that error; Verify
// checks its link on its stored bytes and, when the whole chain holds,
// returns that error. RunStoreTests and RunUnreadableTests in package
// decisiontest check this.
type Store interface {
	Append(ctx context.Context, r *Record) (*Record, error)
	Get(ctx context.Context, recordID string) (*Record, error)
	List(ctx context.Context, f Filter) ([]*Record, error)
	Verify(ctx context.Context) error
}

// Filter selects records; empty fields match everything.
type Filter struct {
	RunID    string
	TenantID string
	Status   Status
}

// Match reports whether f selects r.
func (f Filter) Match(r *Record) bool {
	return (f.RunID == "" || r.RunID == f.RunID) && (f.TenantID == "" || r.TenantID == f.TenantID) && (f.Status == "" || r.Status == f.Status)
}

// filter decodes the stored lines, in order, and keeps the records f
// matches: the List of every Store here. A line that does not decode is
// named in an *UnreadableError when its keys match f (or cannot be
// read), and the others are still returned.
func (f Filter) filter(lines [][]byte) ([]*Record, error) {
	return f.filterAt(lines, nil)
}

// filterAt is filter of some of a store's lines: at gives their
// positions in the chain (nil: lines is the whole chain), by which an
// *UnreadableError names them.
func (f Filter) filterAt(lines [][]byte, at []int) ([]*Record, error) {
	var out []*Record
	var bad []UnreadableRecord
	for j, line := range lines {
		i := j
		if at != nil {
			i = at[j]
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			if k, kerr := readKeys(line); kerr != nil || f.matchKeys(k) {
				bad = append(bad, unreadable(line, i, err))
			}
			continue
		}
		if f.Match(&r) {
			out = append(out, &r)
		}
	}
	return out, unreadableErr(bad)
}

// Sentinel errors.
var (
	ErrNotFound  = errors.New("decision: record not found")
	ErrDuplicate = errors.New("decision: record id already stored")
	// ErrChain reports a broken chain; the error is a *ChainError.
	ErrChain = errors.New("decision: record chain broken")
)

// ChainError names the first broken link of a store's chain.
type ChainError struct {
	Index    int
	RecordID string
	Reason   string
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("decision: record chain broken at record %d (%s): %s", e.Index, e.RecordID, e.Reason)
}

// Is matches ErrChain.
func (e *ChainError) Is(target error) bool { return target == ErrChain }

// Seal chains r after the record whose record_hash is prevHash
// (GenesisHash for the first): it returns the copy a Store keeps, with
// prev_record_hash and record_hash set, and its canonical bytes, which a
// durable Store writes as they are so VerifyChain checks exactly what was
// stored. r itself is not changed.
func Seal(r *Record, prevHash string) (*Record, []byte, error) { return seal(r, prevHash) }

// VerifyChain checks stored records (each the canonical bytes Seal gave)
// in order, the first following the record whose hash is prevHash
// (GenesisHash from the start); offset is the first one's index in the
// store, for the *ChainError that names the first broken link. A record
// that does not decode as a Record has its link checked on its bytes;
// when every link holds and such records were met, the error is an
// *UnreadableError naming them (the chain is intact).
func VerifyChain(records [][]byte, prevHash string, offset int) error {
	bad, err := verifyChainFrom(records, prevHash, offset)
	if err != nil {
		return err
	}
	return unreadableErr(bad)
}

// seal chains r after prev and returns the stored copy and its canonical
// bytes.
func seal(r *Record, prev string) (*Record, []byte, error) {
	c, err := cloneRecord(r)
	if err != nil {
		return nil, nil, err
	}
	normalize(c)
	c.PrevRecordHash = prev
	b, ok, err := sealOnce(c)
	switch {
	case err != nil:
		return nil, nil, err
	case !ok:
		return sealTwice(c)
	}
	return c, b, nil
}

// sealTwice sets c's record hashes from the digest of c without them,
// then encodes c: two canonical encodings, the reference sealOnce is
// held to.
func sealTwice(c *Record) (*Record, []byte, error) {
	c.RecordHash = ""
	h, err := Hash(c)
	if err != nil {
		return nil, nil, fmt.Errorf("decision: record has no canonical form: %w", err)
	}
	c.RecordHash = h
	if c.Replay != nil {
		c.Replay.RecordHash = h
	}
	b, err := canon.JSON(c)
	if err != nil {
		return nil, nil, err
	}
	return c, b, nil
}

// hashPlaceholder stands in for record_hash while a record is encoded:
// a digest's length, but never a digest (z is no hex digit).
const hashPlaceholder = canon.DigestPrefix + "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"

// placeholderMember is the canonical member record_hash holding the
// placeholder, in the record and in its replay member.
const placeholderMember = `"record_hash":"` + hashPlaceholder + `"`

// sealOnce is sealTwice with one canonical encoding: c is encoded with the
// placeholder for its record hashes; the record hash is the digest of
// those bytes without the placeholder members (the canonical form of c
// without them: members are sorted by name, whatever their values), and
// the stored bytes are those bytes with the placeholder overwritten by
// the hash, which has its length and is written as is. ok is false, and c
// is left to sealTwice, when the placeholder member is not met exactly
// where c has it (a record whose own values hold it).
func sealOnce(c *Record) (b []byte, ok bool, err error) {
	c.RecordHash = hashPlaceholder
	want := 1
	if c.Replay != nil {
		c.Replay.RecordHash, want = hashPlaceholder, 2
	}
	b, err = canon.JSON(c)
	if err != nil {
		return nil, false, fmt.Errorf("decision: record has no canonical form: %w", err)
	}
	// The placeholder's run of z is looked for (z is rare in a record, so
	// the search skips ahead fast), and each run found must be the value
	// of a placeholder member.
	var at [2]int
	n := 0
	zs := []byte(hashPlaceholder[len(hashPlaceholder)-32:])
	for i := 0; ; {
		j := bytes.Index(b[i:], zs)
		if j < 0 {
			break
		}
		a := i + j - len(`"record_hash":"`+canon.DigestPrefix) // where its member would start
		if n == want || a < 0 || a+len(placeholderMember) > len(b) || string(b[a:a+len(placeholderMember)]) != placeholderMember {
			return nil, false, nil
		}
		at[n], n, i = a, n+1, a+len(placeholderMember)
	}
	if n != want {
		return nil, false, nil
	}
	// Without the members: each goes with the comma before it (neither is
	// its object's first member: actor and compiled_context_hash sort
	// before it), else with the comma after it.
	// The digest is taken of the bytes around them as they are (no copy
	// of the record without them): canon.DigestBytes' form.
	d := sha256.New()
	from := 0
	for _, a := range at[:n] {
		end := a + len(placeholderMember)
		switch {
		case a > 0 && b[a-1] == ',':
			a--
		case end < len(b) && b[end] == ',':
			end++
		}
		d.Write(b[from:a])
		from = end
	}
	d.Write(b[from:])
	var sum [sha256.Size]byte
	var hb [canon.DigestLen]byte
	h := string(hex.AppendEncode(append(hb[:0], canon.DigestPrefix...), d.Sum(sum[:0])))
	for _, a := range at[:n] {
		copy(b[a+len(`"record_hash":"`):], h)
	}
	c.RecordHash = h
	if c.Replay != nil {
		c.Replay.RecordHash = h
	}
	return b, true, nil
}

// verifyChainFrom checks canonical records that follow a record whose
// hash is prev; offset is the index of the first (for errors). It returns
// the records whose links hold but that do not decode as a Record, and
// the *ChainError of the first link that does not hold.
func verifyChainFrom(lines [][]byte, prev string, offset int) ([]UnreadableRecord, error) {
	var bad []UnreadableRecord
	for j, line := range lines {
		h, u, ok, err := checkLink(line, prev, offset+j)
		if err != nil {
			return nil, err
		}
		if !ok {
			bad = append(bad, u)
		}
		prev = h
	}
	return bad, nil
}

// normalize gives every list of a record a value ([] rather than null), so
// stored records always have the published shape.
func normalize(r *Record) {
	for _, s := range []*[]string{&r.SubjectIDs, &r.EvidenceRefs, &r.Rationale.AlternativesConsidered,
		&r.ControlsActive.MustRefuse, &r.ControlsActive.MustEscalate, &r.ControlsActive.ApprovalGatesActive, &r.ControlsActive.RedactionRulesActive} {
		if *s == nil {
			*s = []string{}
		}
	}
	if r.PolicyDecisions == nil {
		r.PolicyDecisions = []PolicyDecisionRef{}
	}
	for i := range r.PolicyDecisions {
		if r.PolicyDecisions[i].RuleIDs == nil {
			r.PolicyDecisions[i].RuleIDs = []string{}
		}
	}
	if r.Approvals == nil {
		r.Approvals = []Approval{}
	}
	if r.AgentIdentity.PrincipalChain == nil {
		r.AgentIdentity.PrincipalChain = []runcontext.Principal{}
	}
	if r.Outputs == nil {
		r.Outputs = map[string]any{}
	}
}

// MemoryStore is the in-memory Store. It keeps each record's canonical
// bytes, so Verify checks exactly what was stored.
type MemoryStore struct {
	mu    sync.Mutex
	lines [][]byte
	index map[string]int
	// byRun lists the positions of each run's records, in order, so
	// listing a run's records reads those only; unkeyed lists the
	// records whose run cannot be read (bytes that are not JSON), which
	// every listing reads.
	byRun   map[string][]int
	unkeyed []int
	head    string // record_hash of the last record
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{index: map[string]int{}, byRun: map[string][]int{}}
}

// keep appends a record's stored bytes and indexes them under its run
// (ok: its run id reads); m.mu is held.
func (m *MemoryStore) keep(b []byte, recordID, runID string, ok bool) {
	i := len(m.lines)
	m.index[recordID] = i
	m.lines = append(m.lines, b)
	if ok {
		m.byRun[runID] = append(m.byRun[runID], i)
	} else {
		m.unkeyed = append(m.unkeyed, i)
	}
}

// Append implements Store.
func (m *MemoryStore) Append(ctx context.Context, r *Record) (*Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.index[r.RecordID]; dup || r.RecordID == "" {
		return nil, fmt.Errorf("%w: %q", ErrDuplicate, r.RecordID)
	}
	prev := m.head
	if prev == "" {
		prev = GenesisHash
	}
	c, b, err := seal(r, prev)
	if err != nil {
		return nil, err
	}
	m.keep(b, c.RecordID, c.RunID, true)
	m.head = c.RecordHash
	return c, nil
}

// Get implements Store.
func (m *MemoryStore) Get(ctx context.Context, id string) (*Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	i, ok := m.index[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return DecodeStored(m.lines[i], i)
}

// List implements Store.
func (m *MemoryStore) List(ctx context.Context, f Filter) ([]*Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if f.RunID == "" {
		return f.filter(m.lines)
	}
	// The run's records and those whose run cannot be read, in chain
	// order.
	run := m.byRun[f.RunID]
	at := make([]int, 0, len(run)+len(m.unkeyed))
	for a, b := run, m.unkeyed; len(a) > 0 || len(b) > 0; {
		if len(b) == 0 || (len(a) > 0 && a[0] < b[0]) {
			at, a = append(at, a[0]), a[1:]
		} else {
			at, b = append(at, b[0]), b[1:]
		}
	}
	lines := make([][]byte, len(at))
	for j, i := range at {
		lines[j] = m.lines[i]
	}
	return f.filterAt(lines, at)
}

// Verify implements Store.
func (m *MemoryStore) Verify(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// The records stored when Verify starts, a page at a time: what it
	// holds beyond the store is one page, and appends go on meanwhile
	// (stored records never change).
	m.mu.Lock()
	n := len(m.lines)
	m.mu.Unlock()
	prev := GenesisHash
	var bad []UnreadableRecord
	for off := 0; off < n; off += verifyPage {
		if err := ctx.Err(); err != nil {
			return err
		}
		m.mu.Lock()
		page := slices.Clone(m.lines[off:min(off+verifyPage, n)])
		m.mu.Unlock()
		b, err := verifyChainFrom(page, prev, off)
		if err != nil {
			return err
		}
		bad = append(bad, b...)
		k, err := readKeys(page[len(page)-1])
		if err != nil {
			// Unreachable: a link that holds was read from its keys.
			return &ChainError{Index: off + len(page) - 1, Reason: "record is not JSON"}
		}
		prev = k.RecordHash
	}
	return unreadableErr(bad)
}

// verifyPage is how many records Verify reads at a time.
const verifyPage = 256
