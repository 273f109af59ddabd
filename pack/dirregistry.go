package pack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/contextos/contextos/internal/packref"
)

// DirRegistry is a Registry and LifecycleRegistry in a directory: one file
// per version, <root>/<pack_id>/<version>.json holding the document and
// <root>/<pack_id>/<version>.state.json holding state, reason, content
// hash and review sign-offs; <root>/.pins/<env>/<pack_id>/<seq>.json is
// one entry of an environment's pin history of a pack. Writes are atomic
// (a temporary file renamed into place; a new version, and each pin
// history entry, is linked in, so two writers never both create it). All
// file access goes through os.Root, so no pack id or environment can
// reach outside the directory. Every write is a read-modify-write under a
// writer lock (an flock(2) on <root>/.lock on Linux, macOS and the BSDs),
// so any number of processes may write one directory; elsewhere only the
// in-process lock and the exclusive creation of new files guard it, and
// one process should write a directory at a time. Reads are safe from any
// number.
type DirRegistry struct {
	opts *ValidateOptions
	root *os.Root
	// sem is the in-process writer lock: a one-slot semaphore, so a
	// writer waiting for it still honours its ctx.
	sem chan struct{}
}

var (
	_ LifecycleRegistry = (*DirRegistry)(nil)
	_ StateReader       = (*DirRegistry)(nil)
)

// OpenDirRegistry opens (creating it if needed) a directory registry that
// validates the packs it stores with opts (nil: the defaults of
// ValidateOptions).
func OpenDirRegistry(dir string, opts *ValidateOptions) (*DirRegistry, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pack: open registry: %w", err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("pack: open registry: %w", err)
	}
	return &DirRegistry{opts: opts.clone(), root: r, sem: make(chan struct{}, 1)}, nil
}

// lock takes the in-process writer lock and then the directory's writer
// lock (an flock on <root>/.lock where the system has one), so a
// read-modify-write of a state file or a pin history cannot interleave
// with another process's. Waiting for either ends when ctx is done.
func (d *DirRegistry) lock(ctx context.Context) (func(), error) {
	select {
	case d.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	unlock, err := d.lockWriters(ctx)
	if err != nil {
		<-d.sem
		return nil, err
	}
	return func() { unlock(); <-d.sem }, nil
}

// Close releases the directory.
func (d *DirRegistry) Close() error { return d.root.Close() }

type stateFile struct {
	State       State     `json:"state"`
	Reason      string    `json:"reason,omitempty"`
	ContentHash string    `json:"content_hash"`
	Signed      bool      `json:"signed"`
	Reviews     []Signoff `json:"reviews,omitempty"`
}

// packDir validates a pack id for use as a directory name.
func packDir(id string) (string, error) {
	if id == "" || strings.HasPrefix(id, ".") || strings.ContainsAny(id, `/\`) || !fs.ValidPath(id) {
		return "", fmt.Errorf("%w: pack id %s cannot name a registry directory", ErrNotFound, packref.Show(id))
	}
	return id, nil
}

func files(ref Ref) (doc, state string, err error) {
	dir, err := packDir(ref.ID)
	if err != nil {
		return "", "", err
	}
	return path.Join(dir, ref.Version()+".json"), path.Join(dir, ref.Version()+".state.json"), nil
}

// Put implements Registry.
func (d *DirRegistry) Put(ctx context.Context, doc []byte) (Entry, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	next, err := inspect(doc, d.opts)
	if err != nil {
		return Entry{}, err
	}
	unlock, err := d.lock(ctx)
	if err != nil {
		return Entry{}, err
	}
	defer unlock()
	docPath, statePath, err := files(next.Ref)
	if err != nil {
		return Entry{}, err
	}
	if cur, err := d.read(next.Ref); err == nil {
		e, changed, err := merge(cur, next)
		if err != nil {
			return Entry{}, err
		}
		if changed {
			if err := d.writeAtomic(docPath, e.Document); err != nil {
				return Entry{}, err
			}
			if err := d.writeState(statePath, e); err != nil {
				return Entry{}, err
			}
		}
		return e, nil
	} else if !errors.Is(err, ErrNotFound) {
		return Entry{}, err
	}
	if err := d.root.MkdirAll(path.Dir(docPath), 0o755); err != nil {
		return Entry{}, fmt.Errorf("pack: registry: %w", err)
	}
	// The document is linked in first; a version without its state file is
	// not yet visible (read reports it not found, Versions skips it), so a
	// crash in between leaves nothing half-applied that a reader could use.
	// A Put of the same content completes such a version. Other content is
	// refused: a document without its state file may also be a version
	// whose state file was lost (deleted, left out of a restore), which
	// pins and records still name.
	if _, err := d.root.Stat(statePath); errors.Is(err, fs.ErrNotExist) {
		if orphan, err := d.root.ReadFile(docPath); err == nil {
			if o, err := inspect(orphan, d.opts); err != nil || o.ContentHash != next.ContentHash || o.Ref != next.Ref {
				return Entry{}, fmt.Errorf("%w: %s has a document on disk with other content and no state file; restore its state file or remove the document", ErrImmutable, next.Ref)
			}
			if err := d.writeAtomic(docPath, next.Document); err != nil {
				return Entry{}, err
			}
			if err := d.writeState(statePath, next); err != nil {
				return Entry{}, err
			}
			return next, nil
		}
	}
	if err := d.createExclusive(docPath, next.Document); err != nil {
		return Entry{}, err
	}
	if err := d.writeState(statePath, next); err != nil {
		return Entry{}, err
	}
	return next, nil
}

// Get implements Registry.
func (d *DirRegistry) Get(ctx context.Context, ref Ref) (Entry, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	return d.read(ref)
}

func (d *DirRegistry) read(ref Ref) (Entry, error) {
	docPath, statePath, err := files(ref)
	if err != nil {
		return Entry{}, err
	}
	doc, err := d.root.ReadFile(docPath)
	if errors.Is(err, fs.ErrNotExist) {
		return Entry{}, fmt.Errorf("%w: %s", ErrNotFound, packref.Show(ref.String()))
	}
	if err != nil {
		return Entry{}, fmt.Errorf("pack: registry: %w", err)
	}
	e, err := d.readState(ref, statePath)
	if err != nil {
		return Entry{}, err
	}
	e.Document = doc
	// The stored document must still be what the state file describes.
	check, err := inspect(doc, d.opts)
	if err != nil || check.ContentHash != e.ContentHash || check.Ref != ref {
		return Entry{}, fmt.Errorf("%w: %s on disk does not match its recorded content hash", ErrImmutable, ref)
	}
	// The state file may not claim more than the document holds: a
	// signature it does not carry. (A signed document under an unsigned
	// state is a Put cut off between its two writes; the entry stays
	// unsigned until the signed file is Put again.)
	if e.Signed && !check.Signed {
		return Entry{}, fmt.Errorf("%w: the state of %s records a signed document but the document on disk is unsigned", ErrImmutable, ref)
	}
	return e, nil
}

// readState reads ref's state file: the entry without its document. A
// state file that records a sign-off no Review could record is corrupt.
func (d *DirRegistry) readState(ref Ref, statePath string) (Entry, error) {
	sb, err := d.root.ReadFile(statePath)
	if errors.Is(err, fs.ErrNotExist) {
		return Entry{}, fmt.Errorf("%w: %s (its state is not written yet)", ErrNotFound, packref.Show(ref.String()))
	}
	if err != nil {
		return Entry{}, fmt.Errorf("pack: registry: state of %s: %w", ref, err)
	}
	var st stateFile
	if err := json.Unmarshal(sb, &st); err != nil {
		return Entry{}, fmt.Errorf("pack: registry: state of %s is corrupt: %w", ref, err)
	}
	for i, r := range st.Reviews {
		if !reviewerPattern.MatchString(r.Reviewer) || checkRoleName(r.Role) != nil {
			return Entry{}, fmt.Errorf("%w: the state of %s is corrupt: review %d is not a valid sign-off", ErrImmutable, ref, i)
		}
	}
	return Entry{Ref: ref, State: st.State, Reason: st.Reason, ContentHash: st.ContentHash, Signed: st.Signed, Reviews: st.Reviews}, nil
}

// Stat implements StateReader: it reads ref's state file only.
func (d *DirRegistry) Stat(ctx context.Context, ref Ref) (Entry, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	_, statePath, err := files(ref)
	if err != nil {
		return Entry{}, err
	}
	return d.readState(ref, statePath)
}

// SetState implements Registry.
func (d *DirRegistry) SetState(ctx context.Context, ref Ref, to State, reason string) (Entry, error) {
	return d.update(ctx, ref, func(e Entry) (Entry, error) { return transition(e, to, reason, d.opts) })
}

// Review implements LifecycleRegistry.
func (d *DirRegistry) Review(ctx context.Context, ref Ref, signoffs ...Signoff) (Entry, error) {
	return d.update(ctx, ref, func(e Entry) (Entry, error) { return e.SignOff(d.opts, signoffs...) })
}

// update applies f to ref's stored entry under the writer lock and
// stores the state of the entry it returns.
func (d *DirRegistry) update(ctx context.Context, ref Ref, f func(Entry) (Entry, error)) (Entry, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	unlock, err := d.lock(ctx)
	if err != nil {
		return Entry{}, err
	}
	defer unlock()
	e, err := d.read(ref)
	if err != nil {
		return Entry{}, err
	}
	if e, err = f(e); err != nil {
		return Entry{}, err
	}
	_, statePath, _ := files(ref)
	if err := d.writeState(statePath, e); err != nil {
		return Entry{}, err
	}
	return e, nil
}

// pinsDir is the directory of env's pin histories.
func pinsDir(env string) (string, error) {
	if err := CheckEnvironment(env); err != nil {
		return "", err
	}
	return path.Join(".pins", env), nil
}

// historyDir is the directory of env's pin history of packID: one file
// per entry, <seq>.json.
func historyDir(env, packID string) (string, error) {
	dir, err := pinsDir(env)
	if err != nil {
		return "", err
	}
	if _, err := packDir(packID); err != nil {
		return "", err
	}
	return path.Join(dir, packID), nil
}

// names lists the names in dir; ok is false when dir does not exist.
func (d *DirRegistry) names(dir string) (names []string, ok bool, err error) {
	f, err := d.root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("pack: registry: %w", err)
	}
	defer f.Close()
	if names, err = f.Readdirnames(-1); err != nil {
		return nil, false, fmt.Errorf("pack: registry: %w", err)
	}
	return names, true, nil
}

// readPins reads the history in dir, oldest first.
func (d *DirRegistry) readPins(dir string) ([]Pin, error) {
	names, ok, err := d.names(dir)
	if err != nil || !ok {
		return nil, err
	}
	var h []Pin
	for _, n := range names {
		num, ok := strings.CutSuffix(n, ".json")
		seq, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || strings.HasPrefix(n, ".") {
			continue
		}
		b, err := d.root.ReadFile(path.Join(dir, n))
		if err != nil {
			return nil, fmt.Errorf("pack: registry: %w", err)
		}
		var p Pin
		if err := json.Unmarshal(b, &p); err != nil || p.Seq != seq {
			return nil, fmt.Errorf("pack: registry: pin history entry %s/%s is corrupt", dir, n)
		}
		h = append(h, p)
	}
	slices.SortFunc(h, func(a, b Pin) int {
		if a.Seq < b.Seq {
			return -1
		}
		if a.Seq > b.Seq {
			return 1
		}
		return 0
	})
	for i, p := range h {
		if p.Seq != int64(i+1) {
			return nil, fmt.Errorf("pack: registry: pin history %s is missing entry %d", dir, i+1)
		}
	}
	return h, nil
}

// ApplyPin implements LifecycleRegistry. Each history entry is a file
// created exclusively, so two processes appending the same position
// cannot both succeed: the loser decides again on the longer history (a
// pin lands after the other; a promotion or rollback then fails with
// ErrPinConflict).
func (d *DirRegistry) ApplyPin(ctx context.Context, c PinChange) (Pin, error) {
	dir, err := historyDir(c.Env(), c.Ref().ID)
	if err != nil {
		return Pin{}, err
	}
	unlock, err := d.lock(ctx)
	if err != nil {
		return Pin{}, err
	}
	defer unlock()
	for {
		if err := ctx.Err(); err != nil {
			return Pin{}, err
		}
		target, err := d.read(c.Ref())
		if err != nil {
			return Pin{}, err
		}
		hist, err := d.readPins(dir)
		if err != nil {
			return Pin{}, err
		}
		next, e, write, err := c.Apply(currentPin(hist), target)
		if err != nil || !write {
			return next, err
		}
		b, err := json.Marshal(next)
		if err != nil {
			return Pin{}, err
		}
		if err := d.root.MkdirAll(dir, 0o755); err != nil {
			return Pin{}, fmt.Errorf("pack: registry: %w", err)
		}
		// The entry's state moves first: a crash before the history
		// entry is written leaves a version marked pinned that no
		// environment pins yet, never a pin of a version still marked
		// published.
		if e.State != target.State {
			_, statePath, _ := files(e.Ref)
			if err := d.writeState(statePath, e); err != nil {
				return Pin{}, err
			}
		}
		err = d.createExclusive(path.Join(dir, strconv.FormatInt(next.Seq, 10)+".json"), b)
		if errors.Is(err, ErrImmutable) {
			continue // another process appended this position first
		}
		if err != nil {
			return Pin{}, err
		}
		return next, nil
	}
}

// PinHistory implements LifecycleRegistry.
func (d *DirRegistry) PinHistory(ctx context.Context, slot Slot) ([]Pin, error) {
	env, packID := slot.Env, slot.PackID
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir, err := historyDir(env, packID)
	if errors.Is(err, ErrNotFound) {
		return nil, nil // no such pack id can have been pinned
	}
	if err != nil {
		return nil, err
	}
	return d.readPins(dir)
}

// Pins implements LifecycleRegistry.
func (d *DirRegistry) Pins(ctx context.Context, env string) ([]Pin, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir, err := pinsDir(env)
	if err != nil {
		return nil, err
	}
	names, _, err := d.names(dir)
	if err != nil {
		return nil, err
	}
	out := []Pin{}
	for _, n := range names {
		if _, err := packDir(n); err != nil {
			continue
		}
		h, err := d.readPins(path.Join(dir, n))
		if err != nil {
			return nil, err
		}
		if len(h) > 0 {
			out = append(out, currentPin(h))
		}
	}
	sortPins(out)
	return out, nil
}

// Versions implements Registry.
func (d *DirRegistry) Versions(ctx context.Context, packID string) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir, err := packDir(packID)
	if err != nil {
		return nil, err
	}
	names, ok, err := d.names(dir)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: no versions of %s", ErrNotFound, packref.Show(packID))
	}
	var out []Entry
	for _, n := range names {
		ver, ok := strings.CutSuffix(n, ".json")
		if !ok || strings.HasSuffix(ver, ".state") || strings.HasPrefix(n, ".") {
			continue
		}
		ref, err := ParseRef(packID + "@" + ver)
		if err != nil {
			continue
		}
		e, err := d.read(ref)
		if errors.Is(err, ErrNotFound) {
			continue // its state is not written: not a version yet
		}
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no versions of %s", ErrNotFound, packref.Show(packID))
	}
	slices.SortFunc(out, func(a, b Entry) int { return a.Ref.Compare(b.Ref) })
	return out, nil
}

func (d *DirRegistry) writeState(name string, e Entry) error {
	b, err := json.Marshal(stateFile{State: e.State, Reason: e.Reason, ContentHash: e.ContentHash, Signed: e.Signed, Reviews: e.Reviews})
	if err != nil {
		return err
	}
	return d.writeAtomic(name, b)
}

// writeTemp writes data to a new temporary file beside name and syncs it.
func (d *DirRegistry) writeTemp(name string, data []byte) (string, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	tmp := path.Join(path.Dir(name), ".tmp-"+hex.EncodeToString(rnd[:]))
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", fmt.Errorf("pack: registry: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		d.root.Remove(tmp)
		return "", fmt.Errorf("pack: registry: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		d.root.Remove(tmp)
		return "", fmt.Errorf("pack: registry: %w", err)
	}
	if err := f.Close(); err != nil {
		d.root.Remove(tmp)
		return "", fmt.Errorf("pack: registry: %w", err)
	}
	return tmp, nil
}

// writeAtomic replaces name with data atomically.
func (d *DirRegistry) writeAtomic(name string, data []byte) error {
	tmp, err := d.writeTemp(name, data)
	if err != nil {
		return err
	}
	if err := d.root.Rename(tmp, name); err != nil {
		d.root.Remove(tmp)
		return fmt.Errorf("pack: registry: %w", err)
	}
	return nil
}

// createExclusive creates name with data atomically, failing with
// ErrImmutable if it exists (a hard link never replaces a file).
func (d *DirRegistry) createExclusive(name string, data []byte) error {
	tmp, err := d.writeTemp(name, data)
	if err != nil {
		return err
	}
	defer d.root.Remove(tmp)
	if err := d.root.Link(tmp, name); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s was created concurrently", ErrImmutable, name)
		}
		return fmt.Errorf("pack: registry: %w", err)
	}
	return nil
}
