package decision

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/contextos/contextos/internal/canon"
)

// Errors of a FileStore's files, each in a *LogError whose Kind it is.
// ErrTruncated, ErrTornTail and ErrHead are integrity failures: their
// *LogError also matches ErrChain (the log cannot be trusted as it is).
var (
	// ErrTruncated reports a record log shorter than its sealed head: its
	// tail was cut off, or the log file was deleted.
	ErrTruncated = errors.New("decision: record log is shorter than its sealed head")
	// ErrTornTail reports a log whose last line is incomplete (no
	// newline): an append a crash cut short. RepairFileStore removes it.
	ErrTornTail = errors.New("decision: record log ends in an incomplete record")
	// ErrHead reports a head file that is missing, unreadable, not sealed,
	// or that does not describe the log, and a log that holds records its
	// head does not seal.
	ErrHead = errors.New("decision: record log head is missing or does not match the log")
	// ErrLocked reports a record log another writer holds.
	ErrLocked = errors.New("decision: record log is locked by another writer")
	// ErrClosed reports a use of a closed FileStore.
	ErrClosed = errors.New("decision: file store is closed")
)

// LogError is a failure of a FileStore's files. Kind is ErrTruncated,
// ErrTornTail or ErrHead (an integrity failure of the log or head file at
// Path: the error matches Kind and ErrChain), or ErrLocked (another writer
// holds the lock file at Path; Reason names the holder, such as "held by
// pid 4711 on host-a", when it could be read). Reason never quotes the
// log's content.
type LogError struct {
	Path   string
	Kind   error
	Reason string
}

func (e *LogError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("%v: %s", e.Kind, e.Path)
	}
	return fmt.Sprintf("%v: %s: %s", e.Kind, e.Path, e.Reason)
}

// Is matches Kind, and ErrChain for an integrity failure.
func (e *LogError) Is(target error) bool {
	return target == e.Kind || target == ErrChain && e.Kind != ErrLocked
}

// lockError is the *LogError of a lock file another writer holds.
func lockError(path, holder string) *LogError {
	e := &LogError{Path: path, Kind: ErrLocked}
	if holder != "" {
		e.Reason = "held by " + holder
	}
	return e
}

// headVersion is the version of a FileStore's head file.
const headVersion = "contextos.decision_head.v1"

// Head is a FileStore's sealed head, kept in "<log>.head" beside the log:
// how many records and bytes the log holds and the record_hash of its last
// record (GenesisHash when it is empty). Seal is the digest of the head's
// canonical JSON without seal. Like the record chain, the seal is a
// digest, not a signature: it catches a log cut short, deleted or edited
// without its head, and a damaged head; it does not stop someone who can
// rewrite both files. A host that needs that anchors Head elsewhere (a
// transparency log, another system) and compares.
type Head struct {
	Version        string `json:"version"`
	Records        int    `json:"records"`
	Bytes          int64  `json:"bytes"`
	LastRecordHash string `json:"last_record_hash"`
	Seal           string `json:"seal,omitempty"`
}

// FileStoreOptions tunes OpenFileStore.
type FileStoreOptions struct {
	// Logger receives what opening and appending change or fail to do
	// beyond their errors: a head rolled forward over the record a crash
	// left unsealed, a head that could not be written. Default: discard.
	Logger *slog.Logger
}

// FileStore is a Store in an append-only JSON Lines file: one canonical
// record per line, each appended with a single write and synced, then
// sealed in the head file "<log>.head" (written to a temporary file,
// synced and renamed over the old head, so a head is whole or absent).
//
// Open checks the log against its head and its chain: a log shorter than
// its head or missing (ErrTruncated), a torn last line (ErrTornTail), a
// head missing or not matching (ErrHead) or a broken chain (*ChainError)
// is refused. The one record a crash can leave between its append and its
// seal is verified and sealed (and logged). Get, List and Verify read the
// log again and check it against what the store wrote: every link, the
// size and the last record; Verify checks the head file too.
//
// One writer at a time: opening takes "<log>.lock" and refuses a log
// another FileStore holds (a *LogError of kind ErrLocked), in this process or another; Close
// releases it. On Linux, macOS and the BSDs the lock is an flock(2) lock
// on that file, which the system releases when the holder exits, however
// it exits: a lock file left behind is not a lock, so there is no stale
// lock to clear (flock is not reliable over NFS; keep the log on a local
// disk). Elsewhere the lock is the exclusive creation of the lock file,
// removed by Close; after a crash an operator removes it once no writer
// runs.
//
// Each append costs three fsyncs (the log, the head, its directory): the
// store favours an audit trail that cannot be silently shortened over
// write throughput.
type FileStore struct {
	mu     sync.Mutex
	path   string
	f      *os.File
	lock   *fileLock
	log    *slog.Logger
	index  map[string]int
	head   Head
	sealed bool  // the head file holds head
	broken error // a failed write left the log in a state the store cannot vouch for
	closed bool
}

var _ Store = (*FileStore)(nil)

// OpenFileStore opens the record log at path (creating it and its head if
// neither exists), takes its lock and verifies it against its head and
// its chain. Every refusal is typed (see FileStore); the lock is released
// when opening fails.
func OpenFileStore(path string, opts *FileStoreOptions) (*FileStore, error) {
	var o FileStoreOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	lk, err := acquireLock(path + ".lock")
	if err != nil {
		return nil, err
	}
	s, err := openLocked(path, lk, o.Logger)
	if err != nil {
		lk.release()
		return nil, err
	}
	return s, nil
}

func openLocked(path string, lk *fileLock, logger *slog.Logger) (*FileStore, error) {
	h, err := readHead(path)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	created := false
	switch {
	case errors.Is(err, fs.ErrNotExist) && h == nil:
		created = true // a new store
	case errors.Is(err, fs.ErrNotExist):
		return nil, &LogError{Path: path, Kind: ErrTruncated, Reason: fmt.Sprintf("the log file is missing; its sealed head names %d records", h.Records)}
	case err != nil:
		return nil, fmt.Errorf("decision: read record log: %w", err)
	case h == nil && len(data) > 0:
		return nil, &LogError{Path: path, Kind: ErrHead, Reason: "the log has no head file (it was deleted, or the log was written before heads were kept); RepairFileStore with SealUnsealed seals it once an operator has reviewed it"}
	}
	fresh := h == nil
	if fresh {
		h = &Head{Version: headVersion, LastRecordHash: GenesisHash}
	}
	lines, _, extra, torn, err := verifyLog(path, data, *h)
	if err != nil {
		return nil, err
	}
	if torn > 0 {
		return nil, &LogError{Path: path, Kind: ErrTornTail, Reason: fmt.Sprintf("its last %d bytes are an incomplete record (no newline), an append a crash cut short; RepairFileStore removes them", torn)}
	}
	if extra > 1 {
		return nil, &LogError{Path: path, Kind: ErrHead, Reason: fmt.Sprintf("it holds %d records beyond its sealed head; a crash leaves at most one", extra)}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("decision: open record log: %w", err)
	}
	if created {
		syncDir(path)
	}
	s := &FileStore{path: path, f: f, lock: lk, log: logger, index: make(map[string]int, len(lines)), sealed: !fresh && extra == 0,
		head: Head{Version: headVersion, Records: len(lines), Bytes: int64(len(data)), LastRecordHash: GenesisHash}}
	for i, line := range lines {
		// The keys, not the whole record: a record that does not decode
		// (verifyLog checked its link) is still found by its id.
		k, _ := readKeys(line) // verified by verifyLog
		if j, dup := s.index[k.RecordID]; dup {
			f.Close()
			return nil, &ChainError{Index: i, RecordID: k.RecordID, Reason: fmt.Sprintf("the record id is already stored at record %d (the store never appends one twice)", j)}
		}
		s.index[k.RecordID] = i
		s.head.LastRecordHash = k.RecordHash
	}
	if !s.sealed {
		if err := s.seal(); err != nil {
			f.Close()
			return nil, err
		}
		if extra == 1 {
			logger.Warn("decision: sealed the record a crash left between its append and its seal",
				"path", path, "records", s.head.Records, "last_record_hash", s.head.LastRecordHash)
		}
	}
	return s, nil
}

// Head returns the store's current head (see Head).
func (s *FileStore) Head() Head {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sealedHead(s.head)
}

// Close seals the head if an earlier seal failed, closes the log and
// releases the lock. Closing twice is a no-op.
func (s *FileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	if !s.sealed && s.broken == nil {
		errs = append(errs, s.seal())
	}
	errs = append(errs, s.f.Close(), s.lock.release())
	return errors.Join(errs...)
}

// Append implements Store. The record is kept once it is written and
// synced; its seal follows. A seal that fails is logged and retried by
// the next Append (which refuses to write while it still fails) and by
// Close, so the log is never more than one record ahead of its head.
func (s *FileStore) Append(ctx context.Context, r *Record) (*Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return nil, err
	}
	if !s.sealed {
		if err := s.seal(); err != nil {
			return nil, fmt.Errorf("decision: the previous record is still unsealed: %w", err)
		}
	}
	if _, dup := s.index[r.RecordID]; dup || r.RecordID == "" {
		return nil, fmt.Errorf("%w: %q", ErrDuplicate, r.RecordID)
	}
	c, b, err := seal(r, s.head.LastRecordHash)
	if err != nil {
		return nil, err
	}
	line := append(b, '\n')
	_, err = s.f.Write(line)
	if err == nil {
		err = s.f.Sync()
	}
	if err != nil {
		// Cut a partial write off, so the log ends on a record boundary.
		if terr := s.f.Truncate(s.head.Bytes); terr != nil {
			s.broken = fmt.Errorf("decision: record log %s may end in a partial record (append failed, and so did undoing it): %w", s.path, terr)
			s.log.Error("decision: record log left in an unknown state", "path", s.path, "error", terr.Error())
		}
		return nil, fmt.Errorf("decision: append record %s: %w", c.RecordID, err)
	}
	s.index[c.RecordID] = s.head.Records
	s.head = Head{Version: headVersion, Records: s.head.Records + 1, Bytes: s.head.Bytes + int64(len(line)), LastRecordHash: c.RecordHash}
	s.sealed = false
	if err := s.seal(); err != nil {
		s.log.Error("decision: record appended, its head not sealed yet (the next append or Close seals it)", "path", s.path, "record_id", c.RecordID, "error", err.Error())
	}
	return c, nil
}

// Get implements Store; it verifies the log first.
func (s *FileStore) Get(ctx context.Context, id string) (*Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	lines, _, err := s.read()
	i, ok := s.index[id]
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return DecodeStored(lines[i], i)
}

// List implements Store; it verifies the log first.
func (s *FileStore) List(ctx context.Context, f Filter) ([]*Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	lines, _, err := s.read()
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return f.filter(lines)
}

// Verify implements Store: it reads the log again and checks every link,
// its size and last record against what the store wrote, and the head
// file against the store's head. When all of that holds and the log has
// records that do not decode as a Record, it returns an *UnreadableError
// naming them.
func (s *FileStore) Verify(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, bad, err := s.read()
	if err != nil {
		return err
	}
	if s.sealed {
		// (Unsealed, the head file is one record behind until the next seal.)
		h, err := readHead(s.path)
		if err != nil {
			return err
		}
		if h == nil || *h != sealedHead(s.head) {
			return &LogError{Path: s.path, Kind: ErrHead, Reason: "the head file is missing or is not the head the store sealed"}
		}
	}
	return unreadableErr(bad)
}

func (s *FileStore) usable() error {
	if s.closed {
		return ErrClosed
	}
	return s.broken
}

// read reads the log and checks it is exactly what the store wrote: its
// size, its chain and its last record. It returns the log's records and
// those among them that do not decode as a Record (their links hold).
// The caller holds s.mu.
func (s *FileStore) read() ([][]byte, []UnreadableRecord, error) {
	if s.closed {
		return nil, nil, ErrClosed
	}
	data, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, &LogError{Path: s.path, Kind: ErrTruncated, Reason: fmt.Sprintf("the log file was deleted; the store wrote %d records", s.head.Records)}
	case err != nil:
		return nil, nil, fmt.Errorf("decision: read record log: %w", err)
	case int64(len(data)) < s.head.Bytes:
		return nil, nil, &LogError{Path: s.path, Kind: ErrTruncated, Reason: fmt.Sprintf("it holds %d bytes; the store wrote %d", len(data), s.head.Bytes)}
	case int64(len(data)) > s.head.Bytes:
		return nil, nil, &LogError{Path: s.path, Kind: ErrHead, Reason: fmt.Sprintf("it holds %d bytes the store did not write", int64(len(data))-s.head.Bytes)}
	}
	lines, bad, extra, torn, err := verifyLog(s.path, data, s.head)
	if err != nil {
		return nil, nil, err
	}
	if extra != 0 || torn != 0 { // unreachable with the size check; kept as a guard
		return nil, nil, &LogError{Path: s.path, Kind: ErrHead, Reason: "it holds records the store did not write"}
	}
	return lines, bad, nil
}

// seal writes s.head to the head file. The caller holds s.mu.
func (s *FileStore) seal() error {
	if err := writeHead(s.path, s.head); err != nil {
		return err
	}
	s.sealed = true
	return nil
}

// splitLines splits data into its complete lines (without newlines) and
// the bytes after the last newline.
func splitLines(data []byte) (lines [][]byte, tail []byte) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return lines, data
		}
		lines = append(lines, data[:i:i])
		data = data[i+1:]
	}
	return lines, nil
}

// verifyLog checks data against h: the sealed prefix (h.Bytes bytes) holds
// exactly h.Records chained records ending in h.LastRecordHash; the
// records after it chain on. It returns every complete record line, those
// whose links hold but that do not decode as a Record, how many lines lie
// beyond the head, and the length of a torn tail.
func verifyLog(path string, data []byte, h Head) (lines [][]byte, bad []UnreadableRecord, extra, torn int, err error) {
	if int64(len(data)) < h.Bytes {
		return nil, nil, 0, 0, &LogError{Path: path, Kind: ErrTruncated, Reason: fmt.Sprintf("it holds %d bytes; its sealed head %d bytes in %d records", len(data), h.Bytes, h.Records)}
	}
	sealed, rest := data[:h.Bytes], data[h.Bytes:]
	lines, tail := splitLines(sealed)
	switch {
	case len(tail) > 0:
		return nil, nil, 0, 0, &LogError{Path: path, Kind: ErrHead, Reason: "its sealed head does not end on a record boundary"}
	case len(lines) < h.Records:
		return nil, nil, 0, 0, &LogError{Path: path, Kind: ErrTruncated, Reason: fmt.Sprintf("it holds %d records where its sealed head has %d", len(lines), h.Records)}
	case len(lines) > h.Records:
		return nil, nil, 0, 0, &LogError{Path: path, Kind: ErrHead, Reason: fmt.Sprintf("it holds %d records where its sealed head has %d", len(lines), h.Records)}
	}
	bad, err = verifyChainFrom(lines, GenesisHash, 0)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	if last := lastHash(lines); last != h.LastRecordHash {
		return nil, nil, 0, 0, &LogError{Path: path, Kind: ErrHead, Reason: "its last sealed record is not the one its head seals"}
	}
	more, tail := splitLines(rest)
	badMore, err := verifyChainFrom(more, h.LastRecordHash, len(lines))
	if err != nil {
		return nil, nil, 0, 0, err
	}
	return append(lines, more...), append(bad, badMore...), len(more), len(tail), nil
}

// lastHash is the record_hash of the last line (GenesisHash for none);
// the lines are verified.
func lastHash(lines [][]byte) string {
	if len(lines) == 0 {
		return GenesisHash
	}
	var r struct {
		RecordHash string `json:"record_hash"`
	}
	json.Unmarshal(lines[len(lines)-1], &r)
	return r.RecordHash
}

func sealedHead(h Head) Head {
	h.Version, h.Seal = headVersion, ""
	h.Seal, _ = canon.Digest(h) // a Head always has a canonical form
	return h
}

// readHead reads path's head file: nil when there is none, a *LogError
// (ErrHead) when it is not a sealed head.
func readHead(path string) (*Head, error) {
	b, err := os.ReadFile(path + ".head")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("decision: read record log head: %w", err)
	}
	return parseHead(path, b)
}

// parseHead decodes a head file's bytes: a *LogError (ErrHead) when they
// are not a sealed head.
func parseHead(path string, b []byte) (*Head, error) {
	bad := func(why string) error {
		return &LogError{Path: path, Kind: ErrHead, Reason: "the head file " + why}
	}
	var h Head
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil || dec.More() {
		return nil, bad("is not a head")
	}
	switch {
	case h.Version != headVersion:
		return nil, bad("has an unknown version")
	case h.Records < 0 || h.Bytes < 0 || (h.Records == 0) != (h.Bytes == 0):
		return nil, bad("has impossible counts")
	case h.LastRecordHash != GenesisHash && !canon.IsDigest(h.LastRecordHash), h.Records == 0 && h.LastRecordHash != GenesisHash:
		return nil, bad("has an invalid last_record_hash")
	case sealedHead(h).Seal != h.Seal:
		return nil, bad("is not sealed (its seal does not match its content)")
	}
	return &h, nil
}

// writeHead replaces path's head file with h, atomically: a temporary
// file, synced, renamed over the head, the directory synced.
func writeHead(path string, h Head) error {
	b, err := canon.JSON(sealedHead(h))
	if err != nil {
		return err
	}
	tmp := path + ".head.tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("decision: write record log head: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path+".head")
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("decision: write record log head: %w", err)
	}
	syncDir(path)
	return nil
}

// syncDir syncs the directory of path, so a created or renamed file
// survives a crash. Where directories cannot be synced, it does nothing.
func syncDir(path string) {
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
}

// RepairOptions tunes RepairFileStore.
type RepairOptions struct {
	// Logger receives what the repair changed. Default: discard.
	Logger *slog.Logger
	// SealUnsealed seals a log that has no head file — one written before
	// heads were kept, or whose head was lost — after its chain verifies.
	// Set it only once an operator has reviewed the log: without a head,
	// nothing shows whether the log was cut short.
	SealUnsealed bool
}

// Repair says what RepairFileStore changed.
type Repair struct {
	// Records is the number of records the log holds after the repair.
	Records int
	// RemovedBytes is the length of the incomplete last line removed, and
	// RemovedDigest its sha256 digest; the bytes are kept in TornPath.
	RemovedBytes  int
	RemovedDigest string
	TornPath      string
	// Sealed reports that the head file was written.
	Sealed bool
}

// RepairFileStore repairs what a crash can do to a record log, and nothing
// else, explicitly and with a log line for each change: it removes an
// incomplete last line (an append cut short; its bytes are kept in
// "<log>.torn-<digest>"), seals the record a crash left between its append
// and its seal, and, with SealUnsealed, seals a log that has no head. A
// log that is shorter than its head, edited, or has a broken chain is not
// repaired: the error is returned as OpenFileStore would. It takes the
// log's lock, so it refuses to run beside a writer (ErrLocked).
func RepairFileStore(path string, opts *RepairOptions) (*Repair, error) {
	var o RepairOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	lk, err := acquireLock(path + ".lock")
	if err != nil {
		return nil, err
	}
	defer lk.release()
	h, err := readHead(path)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &LogError{Path: path, Kind: ErrTruncated, Reason: "the log file is missing; a deleted log cannot be repaired (restore it from a backup)"}
	case err != nil:
		return nil, fmt.Errorf("decision: read record log: %w", err)
	}
	headless := h == nil
	if headless {
		if len(data) > 0 && !o.SealUnsealed {
			return nil, &LogError{Path: path, Kind: ErrHead, Reason: "the log has no head file; set SealUnsealed to seal it once it has been reviewed"}
		}
		h = &Head{Version: headVersion, LastRecordHash: GenesisHash}
	}
	lines, _, extra, torn, err := verifyLog(path, data, *h)
	if err != nil {
		return nil, err
	}
	if !headless && extra > 1 {
		return nil, &LogError{Path: path, Kind: ErrHead, Reason: fmt.Sprintf("it holds %d records beyond its sealed head; a crash leaves at most one", extra)}
	}
	rep := &Repair{Records: len(lines)}
	if torn > 0 {
		cut := data[len(data)-torn:]
		rep.RemovedBytes, rep.RemovedDigest = torn, canon.DigestBytes(cut)
		rep.TornPath = path + ".torn-" + rep.RemovedDigest[len("sha256:"):len("sha256:")+16]
		if err := os.WriteFile(rep.TornPath, cut, 0o600); err != nil {
			return nil, fmt.Errorf("decision: keep the torn record: %w", err)
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return nil, fmt.Errorf("decision: repair record log: %w", err)
		}
		err = f.Truncate(int64(len(data) - torn))
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("decision: repair record log: %w", err)
		}
		o.Logger.Warn("decision: removed an incomplete last record from the record log", "path", path,
			"removed_bytes", torn, "removed_digest", rep.RemovedDigest, "kept_in", rep.TornPath, "records", len(lines))
	}
	if headless || extra > 0 || torn > 0 {
		nh := Head{Version: headVersion, Records: len(lines), Bytes: int64(len(data) - torn), LastRecordHash: lastHash(lines)}
		if err := writeHead(path, nh); err != nil {
			return nil, err
		}
		rep.Sealed = true
		o.Logger.Warn("decision: sealed the record log's head", "path", path, "records", nh.Records,
			"last_record_hash", nh.LastRecordHash, "was_headless", headless, "unsealed_records", extra)
	} else {
		o.Logger.Info("decision: record log needs no repair", "path", path, "records", len(lines))
	}
	return rep, nil
}
