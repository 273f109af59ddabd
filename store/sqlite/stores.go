package sqlite

import (
	"context"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
)

// Configure sets every store a runtime keeps in o to this database's:
// checkpoints, replay packets, decision records, transcripts, memory, and
// the gateway's idempotency claims and used approvals.
func (s *Store) Configure(o *contextos.Options) {
	o.Checkpoints = s.Checkpoints()
	o.Replays = s.Packets()
	o.Decisions = s.Records()
	o.Transcripts = s.Transcripts()
	o.Memory = s.Memory()
	o.Gateway.Idempotency = s.Idempotency()
	o.Gateway.Approvals = s.Approvals()
}

// Checkpoints returns the checkpoint store: a save succeeds only over the
// revision it was loaded at, so one runtime at a time continues a run.
// It also lists stored runs (RunIDs) and keeps the index of those that
// await an approval (contextos.PendingIndex), for Runtime.PendingApprovals.
func (s *Store) Checkpoints() contextos.ListingCheckpointStore { return s.db.Checkpoints() }

// Packets returns the replay packet store.
func (s *Store) Packets() contextos.PacketStore { return s.db.Packets() }

// Records returns the decision record store: append-only and
// hash-chained, one chain across every process sharing the database.
func (s *Store) Records() decision.Store { return s.db.Records() }

// Idempotency returns the idempotency claim store: one execution per key
// across every process; a claim its holder neither completes nor releases
// within Options.ClaimTTL is handed to the next caller.
func (s *Store) Idempotency() gateway.IdempotencyStore { return s.db.Idempotency() }

// Approvals returns the log of used approvals: each is used once across
// every process.
func (s *Store) Approvals() gateway.ApprovalLog { return s.db.Approvals() }

// Transcripts returns the transcript store (append and read back); one
// run's chain cannot fork.
func (s *Store) Transcripts() contextos.TranscriptStore { return s.db.Transcripts() }

// Memory returns the memory store: Recall returns the tenant's promoted
// items (see PutMemory); proposals are kept for review (see Proposals).
func (s *Store) Memory() contextos.MemoryStore { return s.db.Memory() }

// PutMemory stores memory items for a tenant, replacing an item of the
// same memory_ref; runs of that tenant recall the promoted ones.
func (s *Store) PutMemory(ctx context.Context, tenantID string, items ...compiler.MemoryItem) error {
	return s.db.Memory().Put(ctx, tenantID, items...)
}

// Proposals returns every memory proposal kept, oldest first.
func (s *Store) Proposals(ctx context.Context) ([]contextos.MemoryProposal, error) {
	return s.db.Memory().Proposals(ctx)
}

// Registry returns the pack registry; opts validates the packs it stores
// (nil: pack's defaults) and names the review roles it requires. The value
// is also a pack.LifecycleRegistry: it records review sign-offs and each
// environment's pin history (pack.NewDeployments pins, promotes and rolls
// back over it), each change in one transaction, safe across processes.
func (s *Store) Registry(opts *pack.ValidateOptions) pack.Registry { return s.db.Registry(opts) }
