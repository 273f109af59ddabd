package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/internal/sensitive"
	"github.com/contextos/contextos/replay"
)

// ErrPanic reports a host plug-in (planner, critic, evidence source,
// memory store, tokenizer, decision store) that panicked. The run ends
// ESCALATED with a record where it had started; the panic value and stack
// go to the log, never into a record, an error or a span. A decision store
// that panics fails the call it panicked in, as one that returns an error
// does: a run whose record could not be appended keeps it in its
// checkpoint, and a resume, a takeover or the same Invoke again stores
// that very record.
var ErrPanic = errors.New("contextos: a plug-in panicked")

// PanicError names the plug-in that panicked ("runtime" for a panic
// outside the plug-ins). It matches ErrPanic.
type PanicError struct {
	// Plugin is "planner", "critic", "evidence source", "memory store",
	// "tokenizer", "decision store" or "compile".
	Plugin string
}

func (e *PanicError) Error() string { return "contextos: the " + e.Plugin + " panicked" }

// Is matches ErrPanic.
func (e *PanicError) Is(target error) bool { return target == ErrPanic }

// recovered turns a recovered panic value into a *PanicError, logging the
// value's type and the stack (the only place they go).
func (rt *Runtime) recovered(p any, plugin, runID string) error {
	// The value's type, not the value: a panic value may hold anything,
	// a secret included.
	rt.opts.Logger.Error("plug-in panicked", "plugin", plugin, "run_id", runID, "panic_type", fmt.Sprintf("%T", p), "stack", string(debug.Stack()))
	return &PanicError{Plugin: plugin}
}

// storeTimeout bounds a record, checkpoint or packet write, which runs on
// a context detached from the caller's: a side effect that ran is followed
// by its record even when the caller has gone.
const storeTimeout = 30 * time.Second

// detached is ctx without its cancellation and deadline, bounded by
// storeTimeout.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
}

// pins wraps a run's evidence source and memory recall: it keeps what they
// returned to the run's compile (what a replay packet pins) and turns
// their panics into errors.
type pins struct {
	rt    *Runtime
	runID string

	mu       sync.Mutex
	evidence []compiler.EvidenceItem
	memory   []compiler.MemoryItem

	// wrapped are the run's wrapped sources (sources), set at its first
	// call and only read after: the compiles' Prepared point at them.
	wrapped struct {
		set bool
		ev  pinnedEvidence
		mem pinnedMemory
	}
}

type pinnedEvidence struct {
	p   *pins
	src compiler.EvidenceSource
}

func (e pinnedEvidence) Evidence(ctx context.Context, q compiler.EvidenceQuery) (items []compiler.EvidenceItem, err error) {
	defer func() {
		if p := recover(); p != nil {
			items, err = nil, e.p.rt.recovered(p, "evidence source", e.p.runID)
		}
	}()
	items, err = e.src.Evidence(ctx, q)
	if err == nil {
		// Evidence text comes from outside the run: a secret in it is
		// redacted before the compile reads it and the packet pins it.
		cloned := false
		known := redactedList(e.p.rt.evRedact.last())
		var seen []redacted // made at the first content the memo lacks
		for i := range items {
			r, hit := known.of(i, items[i].Content)
			if !hit && seen == nil {
				seen = make([]redacted, len(items))
				copy(seen, known[:i]) // the contents before i are the memo's
			}
			if seen != nil {
				seen[i] = r
			}
			if c, ch := r.out, r.changed; ch {
				if !cloned {
					items, cloned = slices.Clone(items), true // the source's list is not changed
				}
				items[i].Content = c
			}
		}
		if seen != nil {
			e.p.rt.evRedact.keep(seen)
		}
		// Its other members too (a ref, a source id that is a
		// pre-signed URL): the planner is sent them and the packet pins
		// them. Remembered as the contents are.
		metas := e.p.rt.evMeta.last()
		var mseen []metaRedacted // made at the first item the memo lacks
		for i := range items {
			it := &items[i]
			in := [4]string{it.EvidenceRef, it.Kind, it.SourceID, it.Snapshot}
			var r metaRedacted
			if i < len(metas) && metas[i].in == in {
				r = metas[i]
			} else {
				r.in, r.out = in, in
				r.changed = quietMembers(&r.out[0], &r.out[1], &r.out[2], &r.out[3])
				if mseen == nil {
					mseen = make([]metaRedacted, len(items))
					copy(mseen, metas[:i]) // the items before i are the memo's
				}
			}
			if mseen != nil {
				mseen[i] = r
			}
			if r.changed {
				if !cloned {
					items, cloned = slices.Clone(items), true
				}
				items[i].EvidenceRef, items[i].Kind, items[i].SourceID, items[i].Snapshot = r.out[0], r.out[1], r.out[2], r.out[3]
			}
		}
		if mseen != nil {
			e.p.rt.evMeta.keep(mseen)
		}
		// The run pins its own copy of what its compile saw: the list a
		// source returned may be the source's, which it may change later.
		// A list made here (a redaction's), or by the module's static
		// source (a fresh copy for every call), is the run's already:
		// the compile it goes to only reads it.
		pin := slices.Clip(items)
		if _, static := e.src.(compiler.StaticEvidence); !cloned && !static {
			pin = slices.Clone(items)
		}
		e.p.mu.Lock()
		e.p.evidence = pin
		e.p.mu.Unlock()
	}
	return items, quietError(err)
}

// redacted is one evidence content and what sensitive.Redact(in,
// sensitive.Secrets) returned for it.
type redacted struct {
	in, out string
	changed bool
}

// memo keeps what a runtime made of its last retrieval's items (their
// contents redacted, or their other members): a source that serves the
// same items to every run (a static corpus) has them scanned once, not
// at every compile. sensitive.Redact is a function of its text alone, so
// an item whose text is the remembered one at its position gets the
// remembered result; any other is scanned.
type memo[T any] struct {
	mu    sync.Mutex
	items []T
}

// last returns the items last kept, read only.
func (m *memo[T]) last() []T {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.items
}

// keep remembers items (which the caller no longer writes).
func (m *memo[T]) keep(items []T) {
	m.mu.Lock()
	m.items = items
	m.mu.Unlock()
}

// redactedList is a retrieval's remembered contents, read only.
type redactedList []redacted

// of returns the redaction of content, the item at i: the remembered one
// (hit) when its content is content, else sensitive.Redact's.
func (l redactedList) of(i int, content string) (r redacted, hit bool) {
	if i < len(l) && l[i].in == content {
		return l[i], true
	}
	out, changed := sensitive.Redact(content, sensitive.Secrets)
	return redacted{in: content, out: out, changed: changed}, false
}

// metaRedacted is an evidence item's ref, kind, source id and snapshot
// and what quietMembers made of them.
type metaRedacted struct {
	in, out [4]string
	changed bool
}

type pinnedMemory struct {
	p   *pins
	src compiler.MemoryRecall
}

func (m pinnedMemory) Recall(ctx context.Context, q compiler.MemoryQuery) (items []compiler.MemoryItem, err error) {
	defer func() {
		if p := recover(); p != nil {
			items, err = nil, m.p.rt.recovered(p, "memory store", m.p.runID)
		}
	}()
	items, err = m.src.Recall(ctx, q)
	if err == nil {
		// Memory text comes from outside the run, as evidence does: a
		// secret in an item (its content, ref or tier) is redacted
		// before the compile reads it and the packet pins it (the
		// store's list is not changed).
		cloned := false
		for i := range items {
			it := items[i]
			if quietMembers(&it.Content, &it.MemoryRef, &it.Tier) {
				if !cloned {
					items, cloned = slices.Clone(items), true
				}
				items[i] = it
			}
		}
		m.p.mu.Lock()
		m.p.memory = slices.Clone(items)
		m.p.mu.Unlock()
	}
	return items, quietError(err)
}

// quietMembers redacts the secrets in each non-empty string and reports
// whether it changed any.
func quietMembers(ss ...*string) bool {
	changed := false
	for _, s := range ss {
		if *s == "" {
			continue
		}
		if v, ch := sensitive.Redact(*s, sensitive.Secrets); ch {
			*s, changed = v, true
		}
	}
	return changed
}

// quietError is a plug-in's error as the run returns it (an evidence
// source's, a memory store's): its words come from outside the run (a
// driver's error quoting its connection string, an upstream's body), so
// its text is logWords', every built-in rule applied, and it still
// matches what the plug-in returned (errors.Is, errors.As).
func quietError(err error) error {
	if err == nil {
		return nil
	}
	if s, changed := sensitive.Redact(err.Error(), sensitive.All); changed {
		return &redactedError{text: s, err: err}
	}
	return err
}

// redactedError is an error whose text is redacted.
type redactedError struct {
	text string
	err  error
}

func (e *redactedError) Error() string { return e.text }
func (e *redactedError) Unwrap() error { return e.err }

// emptyMemory recalls nothing: a runtime without a memory store compiles
// with it, so a run and its replay (which recalls the pinned items) see
// the same memory input.
type emptyMemory struct{}

func (emptyMemory) Recall(context.Context, compiler.MemoryQuery) ([]compiler.MemoryItem, error) {
	return nil, nil
}

// sources are the run's wrapped sources: a runtime without an evidence
// source or a memory store compiles with empty ones.
// They are made once per run and kept in p, so a compile's sources are
// pointers into it rather than copies boxed anew; they depend only on the
// runtime's options, which do not change.
func (p *pins) sources() (compiler.EvidenceSource, compiler.MemoryRecall) {
	w := &p.wrapped
	if !w.set {
		var ev compiler.EvidenceSource = compiler.StaticEvidence(nil)
		if p.rt.opts.Evidence != nil {
			ev = p.rt.opts.Evidence
		}
		var mem compiler.MemoryRecall = emptyMemory{}
		if p.rt.opts.Memory != nil {
			mem = p.rt.opts.Memory
		}
		w.ev, w.mem, w.set = pinnedEvidence{p, ev}, pinnedMemory{p, mem}, true
	}
	return &w.ev, &w.mem
}

// fetched returns the evidence the run's compile saw, for reading only:
// the slice is replaced at each retrieval, never written to.
func (p *pins) fetched() []compiler.EvidenceItem {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.evidence
}

// pinned returns what the run's compile saw.
func (p *pins) pinned() ([]compiler.EvidenceItem, []compiler.MemoryItem) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.evidence), slices.Clone(p.memory)
}

// recordedMemory stands in for a run's memory store in a replay: it
// recalls the items the run's recall returned, as pinned (any that is not
// promoted included: the compiler omits it again, as it did), and
// discards proposals.
type recordedMemory []compiler.MemoryItem

func (m recordedMemory) Recall(ctx context.Context, q compiler.MemoryQuery) ([]compiler.MemoryItem, error) {
	return compiler.StaticMemory(m).Recall(ctx, q)
}

func (recordedMemory) Propose(ctx context.Context, _ []MemoryProposal) error { return ctx.Err() }

// guardedDecisions is the decision store as the runtime calls it: a call
// that panics returns a *PanicError instead (the value and stack logged
// by recovered), so a panicking Append is an append that failed — the
// run keeps its record unconfirmed and settles it later — and a
// panicking lookup or listing fails only its caller.
type guardedDecisions struct {
	rt *Runtime
	s  decision.Store
}

// Append gives the store a copy of r, which shares the run's compiled
// context and plan, and checks what the store returns (see below): a
// store that edits either later changes nothing the run enforces,
// records or replays.
func (g guardedDecisions) Append(ctx context.Context, r *decision.Record) (out *decision.Record, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, g.rt.recovered(p, pluginDecisions, r.RunID)
		}
	}()
	switch g.s.(type) {
	case *decision.MemoryStore, *decision.FileStore:
		// The module's own stores seal a copy of r, keep only its bytes
		// and hand back that copy: the run's own.
		return g.s.Append(ctx, r)
	}
	c, err := r.Clone()
	if err != nil {
		return nil, err
	}
	if out, err = g.s.Append(ctx, c); out == nil || err != nil {
		return out, err
	}
	// Another store's answer is checked, not trusted, as a failed
	// Append's lookup is (run.append): it must be r sealed after the
	// predecessor it names. The run goes on with its own sealed copy, so
	// a store that hands back a rewrite (another status or outcome)
	// changes nothing the run reports, checkpoints or replays.
	sealed, ok := sealedAs(r, out)
	if !ok {
		return nil, fmt.Errorf("contextos: the decision store's Append returned a record other than %s sealed after the prev_record_hash it names: %w", r.RecordID, decision.ErrChain)
	}
	return sealed, nil
}

func (g guardedDecisions) Get(ctx context.Context, id string) (out *decision.Record, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, g.rt.recovered(p, pluginDecisions, "")
		}
	}()
	return g.s.Get(ctx, id)
}

func (g guardedDecisions) List(ctx context.Context, f decision.Filter) (out []*decision.Record, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, g.rt.recovered(p, pluginDecisions, f.RunID)
		}
	}()
	return g.s.List(ctx, f)
}

func (g guardedDecisions) Verify(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = g.rt.recovered(p, pluginDecisions, "")
		}
	}()
	return g.s.Verify(ctx)
}

// pluginDecisions names the decision store in a *PanicError.
const pluginDecisions = "decision store"

// savePacket gives the packet store a copy of p, through its JSON: p
// shares the run's record, compiled context and tool results, which its
// result carries and a caller of Capture is returned, so a store that
// edits the packet it was given changes none of them.
func (rt *Runtime) savePacket(ctx context.Context, p *replay.Packet) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	var c replay.Packet
	if err := json.Unmarshal(b, &c); err != nil {
		return err
	}
	return rt.opts.Replays.Save(ctx, &c)
}
