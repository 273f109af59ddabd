package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
)

// storeFailed is the run's gatewayhook.StoreFailed: a live run records
// each store request of a call that failed (replay.StoreFailure), so a
// replay fails the same requests; a replay notes the failures its own
// stores gave, which it compares with the packet's.
//
// A live run saves each failure at once, with its spend (saveSpent: the
// state last saved, byte for byte, with the failures since it as its
// store_failures_since_point member), so a takeover of a runtime that
// dies before its next checkpoint knows it and its packet names it
// (replay.Takeover.StoreFailures). A store failure stops the run (the
// gateway fails the call): its stop saves the checkpoint with the failure
// again, and the record and packet the run stores name it. The error is
// the save refused because a takeover has the run (ErrRunInProgress):
// the gateway joins it to the call's error and the run stops recording
// nothing more.
func (r *run) storeFailed(ctx context.Context, sf replay.StoreFailure) error {
	if r.rt.mode == ModeReplay {
		if fs := r.rt.replayed.failures; fs != nil {
			fs.met(sf)
		}
		return nil
	}
	r.cp.StoreFailures = append(r.cp.StoreFailures, sf)
	r.failedSince = append(r.failedSince, sf)
	r.spentUnsaved = true
	return r.saveSpent(ctx)
}

// errReplayedStoreFailure is what a replay's store returns where the
// packet's run's store failed: a fixed message (the live store's error is
// never recorded).
var errReplayedStoreFailure = errors.New("replay: the recorded run's store failed this request")

// replayedFailures are a packet's store failures, each failing the
// replay's matching store request once, and the failures the replay met.
type replayedFailures struct {
	mu      sync.Mutex
	pending []replay.StoreFailure
	used    []bool
	seen    []replay.StoreFailure
}

func newReplayedFailures(fs []replay.StoreFailure) *replayedFailures {
	return &replayedFailures{pending: slices.Clone(fs), used: make([]bool, len(fs))}
}

// take reports whether a recorded failure, not yet used, matches, and
// uses it.
func (f *replayedFailures) take(match func(replay.StoreFailure) bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, sf := range f.pending {
		if !f.used[i] && match(sf) {
			f.used[i] = true
			return true
		}
	}
	return false
}

func (f *replayedFailures) met(sf replay.StoreFailure) {
	f.mu.Lock()
	f.seen = append(f.seen, sf)
	f.mu.Unlock()
}

// diff reports the first difference between the packet's store failures
// and the ones the replay met, or nil.
func (f *replayedFailures) diff() *replay.Diff {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range max(len(f.pending), len(f.seen)) {
		switch {
		case i >= len(f.seen):
			return &replay.Diff{Kind: replay.DiffToolTranscript, Step: -1,
				Detail: fmt.Sprintf("the packet's store failure %d (%s %s of %s) was not met by the replay", i, f.pending[i].Store, f.pending[i].Op, f.pending[i].ToolCallID)}
		case i >= len(f.pending) || f.pending[i] != f.seen[i]:
			return &replay.Diff{Kind: replay.DiffToolTranscript, Step: -1,
				Detail: fmt.Sprintf("the replay's store failure %d (%s %s of %s) is not the packet's", i, f.seen[i].Store, f.seen[i].Op, f.seen[i].ToolCallID)}
		}
	}
	return nil
}

// failingIdempotency is a replay's idempotency store: the in-memory one,
// failing the claims and completions the packet's run's store failed.
type failingIdempotency struct {
	*gateway.MemoryIdempotency
	f *replayedFailures
}

func (s failingIdempotency) Claim(ctx context.Context, key string) (*gateway.ToolResultEnvelope, bool, error) {
	if s.f.take(func(sf replay.StoreFailure) bool {
		return sf.Store == replay.StoreIdempotency && sf.Op == replay.StoreOpClaim && sf.IdempotencyKey == key
	}) {
		return nil, false, errReplayedStoreFailure
	}
	return s.MemoryIdempotency.Claim(ctx, key)
}

func (s failingIdempotency) Complete(ctx context.Context, key string, res *gateway.ToolResultEnvelope) error {
	if s.f.take(func(sf replay.StoreFailure) bool {
		return sf.Store == replay.StoreIdempotency && sf.Op == replay.StoreOpComplete && sf.IdempotencyKey == key
	}) {
		return errReplayedStoreFailure
	}
	return s.MemoryIdempotency.Complete(ctx, key, res)
}

// failingTranscript is a replay's transcript: the in-memory one, failing
// the appends the packet's run's sink failed.
type failingTranscript struct {
	*gateway.MemoryTranscript
	f *replayedFailures
}

func (s failingTranscript) Append(ctx context.Context, e gateway.TranscriptEntry) error {
	id := ""
	switch {
	case e.Call != nil:
		id = e.Call.ToolCallID
	case e.Result != nil:
		id = e.Result.ToolCallID
	}
	if s.f.take(func(sf replay.StoreFailure) bool {
		return sf.Store == replay.StoreTranscript && sf.Op == replay.StoreOpAppend && sf.Kind == e.Kind && sf.Seq == e.Seq && sf.ToolCallID == id
	}) {
		return errReplayedStoreFailure
	}
	return s.MemoryTranscript.Append(ctx, e)
}
