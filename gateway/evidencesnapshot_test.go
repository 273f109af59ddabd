package gateway_test

import (
	"slices"
	"testing"
	"time"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/runcontext"
)

// A run's approvals are bound to its own compiled evidence manifest
// (evidence_snapshot_hash, its digest), whichever compiled context the
// gateway bound a run to before, though the gateway works the digest out
// only when a call at an approval gate first needs it: an edit the caller
// makes to its compiled context after NewRun changes neither the request
// a paused call carries nor the approved call's result.
func TestEvidenceSnapshotIsTheRunsOwn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if len(f.cc.Manifests.EvidenceManifest) == 0 {
		t.Fatal("the fixture's compile admitted no evidence")
	}
	other := f.cc.Clone()
	other.Manifests.EvidenceManifest = append(other.Manifests.EvidenceManifest, compiler.EvidenceManifestEntry{EvidenceRef: "ev_other", SourceID: "src_other", Hash: "sha256:0f"})
	ccs := []*compiler.CompiledContext{f.cc, other}
	want := make([]string, len(ccs))
	for i, cc := range ccs {
		d, err := canon.Digest(cc.Manifests.EvidenceManifest)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = d
	}
	if want[0] == want[1] {
		t.Fatal("the two manifests have one digest")
	}
	for i := range 4 {
		k := i % 2
		cc := ccs[k]
		rc := f.rc.Clone()
		rc.RunID = "run_snapshot_" + string(rune('a'+i))
		run, err := f.gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: cc, Request: f.req, RunContext: rc, Meter: runcontext.NewMeter(rc.RunBudget, f.now)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The caller edits its compiled context's manifest after NewRun.
		kept := slices.Clone(cc.Manifests.EvidenceManifest)
		cc.Manifests.EvidenceManifest[0].Hash = "sha256:edited"
		cc.Manifests.EvidenceManifest = append(cc.Manifests.EvidenceManifest, compiler.EvidenceManifestEntry{EvidenceRef: "ev_edited"})
		paused, err := run.Call(ctx, refundCall(4200))
		if err != nil || paused.Status != gateway.StatusPaused || paused.Approval == nil {
			t.Fatalf("run %d: refund = %+v, %v", i, paused, err)
		}
		if got := paused.Approval.EvidenceSnapshotHash; got != want[k] {
			t.Errorf("run %d: evidence_snapshot_hash %s, want %s (its compiled context's)", i, got, want[k])
		}
		req := refundCall(4200)
		req.Approval = approvalFor(paused, "finance_lead", f.now.Add(-time.Minute), "apr_"+rc.RunID)
		done, err := run.Call(ctx, req)
		if err != nil || done.Status != gateway.StatusCompleted {
			t.Fatalf("run %d: approved refund = %+v, %v", i, done, err)
		}
		if got := done.Metadata.ApprovalEvidenceSnapshotHash; got != want[k] {
			t.Errorf("run %d: approval_evidence_snapshot_hash %s, want %s", i, got, want[k])
		}
		cc.Manifests.EvidenceManifest = kept
	}
}
