package contextos_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/replay"
)

// frozenStop is a checkpoint store whose first save of a stopped run
// waits until released before it reaches the store, as a runtime that
// died before that save.
type frozenStop struct {
	contextos.CheckpointStore
	frozen           atomic.Bool
	entered, release chan struct{}
}

func (s *frozenStop) Save(ctx context.Context, cp *contextos.Checkpoint) error {
	if st, err := contextos.DecodeCheckpoint(cp); err == nil && st.Stopped != "" && !s.frozen.Swap(true) {
		close(s.entered)
		<-s.release
	}
	return s.CheckpointStore.Save(ctx, cp)
}

// A runtime whose store failed a call and that died before its next
// checkpoint save (the one its hard stop makes) is taken over by another
// runtime on the same stores: the taken-over run's packet names the dead
// runtime's store failure (its takeover's store_failures: the runtime
// saved it as it failed), the refund is made once, and the packet
// replays equal. Before, the failure died with the runtime; and a write
// whose call entry the sink failed kept the refusal under its key, so the
// takeover met it as a duplicate, never made the refund, and its packet
// replayed as a mismatch.
func TestStoreFailureThenDeathThenTakeoverReplaysEqual(t *testing.T) {
	for _, tc := range []struct {
		name, store, op string
		opts            func(*contextostest.Options)
	}{
		{"claim", replay.StoreIdempotency, replay.StoreOpClaim, func(o *contextostest.Options) {
			o.Runtime.Gateway.Idempotency = &claimsDownOnce{MemoryIdempotency: gateway.NewMemoryIdempotency()}
		}},
		{"append", replay.StoreTranscript, replay.StoreOpAppend, func(o *contextostest.Options) {
			o.Runtime.Transcripts = &refundCallDown{Recorder: &gatewaytest.Recorder{}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			cps := contextos.NewInMemoryCheckpoints()
			cps.Now = clock.Now
			frozen := &frozenStop{CheckpointStore: cps, entered: make(chan struct{}), release: make(chan struct{})}
			var o contextostest.Options
			o.Now = clock.Now
			o.Runtime.Checkpoints = frozen
			tc.opts(&o)
			h := harness(t, newTurnPlanner(1200, 0), &o)
			req, rc := refundRequest(t, 1200, true)
			stalled := make(chan error, 1)
			go func() {
				_, err := h.Runtime.Invoke(context.Background(), req, rc)
				stalled <- err
			}()
			<-frozen.entered
			clock.Advance(contextos.DefaultHeartbeatTTL)
			res, err := h.Runtime.Resume(context.Background(), rc.RunID, contextos.ResumeInput{Takeover: true})
			if err != nil {
				t.Fatalf("takeover: %v", err)
			}
			close(frozen.release)
			if err := <-stalled; !errors.Is(err, contextos.ErrRunInProgress) {
				t.Errorf("the frozen runtime, back after the takeover = %v, want ErrRunInProgress", err)
			}
			contextostest.AssertStatus(t, res, decision.Decided)
			p, err := h.Replays.Get(context.Background(), res.ReplayPacketID)
			if err != nil {
				t.Fatal(err)
			}
			contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
			// The dead runtime's failure is the takeover's to name; the
			// replay does not meet it (it does not replay that part).
			if len(p.StoreFailures) != 0 {
				t.Errorf("store_failures %+v, want none the replay meets", p.StoreFailures)
			}
			var took *replay.Takeover
			if n := len(p.Resumes); n > 0 {
				took = p.Resumes[n-1].Takeover
			}
			if took == nil || len(took.StoreFailures) != 1 || took.StoreFailures[0].Store != tc.store || took.StoreFailures[0].Op != tc.op || took.StoreFailures[0].ToolCallID == "" {
				t.Errorf("takeover %+v, want it to name the dead runtime's %s %s", took, tc.store, tc.op)
			}
			rep, err := h.Runtime.Replay(context.Background(), p)
			if err != nil || rep.Status != replay.ReplayEqual {
				t.Fatalf("replay: %v %+v", err, rep)
			}
		})
	}
}

// frozenClaimDown is an idempotency store whose first claim waits until
// released and then fails, as a runtime frozen in a claim that its store
// fails once it comes back.
type frozenClaimDown struct {
	*gateway.MemoryIdempotency
	frozen           atomic.Bool
	entered, release chan struct{}
}

func (s *frozenClaimDown) Claim(ctx context.Context, key string) (*gateway.ToolResultEnvelope, bool, error) {
	if !s.frozen.Swap(true) {
		close(s.entered)
		<-s.release
		return nil, false, errors.New("store down: secret-dsn")
	}
	return s.MemoryIdempotency.Claim(ctx, key)
}

// A runtime whose store fails a call after a takeover has the run finds
// the save of that failure refused: it stops with ErrRunInProgress,
// recording nothing more, and the takeover's run is whole and replays
// equal (its packet names no failure: the takeover met none).
func TestStoreFailureAfterTheTakeoverStopsTheRuntime(t *testing.T) {
	clock := newFakeClock()
	cps := contextos.NewInMemoryCheckpoints()
	cps.Now = clock.Now
	idem := &frozenClaimDown{MemoryIdempotency: gateway.NewMemoryIdempotency(), entered: make(chan struct{}), release: make(chan struct{})}
	var o contextostest.Options
	o.Now = clock.Now
	o.Runtime.Checkpoints = cps
	o.Runtime.Gateway.Idempotency = idem
	h := harness(t, newTurnPlanner(1200, 0), &o)
	req, rc := refundRequest(t, 1200, true)
	stalled := make(chan error, 1)
	go func() {
		_, err := h.Runtime.Invoke(context.Background(), req, rc)
		stalled <- err
	}()
	<-idem.entered
	clock.Advance(contextos.DefaultHeartbeatTTL)
	res, err := h.Runtime.Resume(context.Background(), rc.RunID, contextos.ResumeInput{Takeover: true})
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	contextostest.AssertStatus(t, res, decision.Decided)
	close(idem.release)
	if err := <-stalled; !errors.Is(err, contextos.ErrRunInProgress) {
		t.Errorf("the frozen runtime, its claim failed after the takeover = %v, want ErrRunInProgress", err)
	}
	if _, err := gateway.VerifyTranscript(runEntries(t, h, rc.RunID)); err != nil {
		t.Errorf("the transcript does not verify: %v", err)
	}
	p, err := h.Replays.Get(context.Background(), res.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.StoreFailures) != 0 || p.Resumes[len(p.Resumes)-1].Takeover == nil || len(p.Resumes[len(p.Resumes)-1].Takeover.StoreFailures) != 0 {
		t.Errorf("packet store failures %+v, resumes %+v: want none", p.StoreFailures, p.Resumes)
	}
	rep, err := h.Runtime.Replay(context.Background(), p)
	if err != nil || rep.Status != replay.ReplayEqual {
		t.Fatalf("replay: %v %+v", err, rep)
	}
}
