package contextos_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/replay"
)

// claimsDown is an idempotency store whose claims fail.
type claimsDown struct{ *gateway.MemoryIdempotency }

func (claimsDown) Claim(context.Context, string) (*gateway.ToolResultEnvelope, bool, error) {
	return nil, false, errors.New("store down: secret-dsn")
}

// completesDown is an idempotency store whose completions fail.
type completesDown struct{ *gateway.MemoryIdempotency }

func (completesDown) Complete(context.Context, string, *gateway.ToolResultEnvelope) error {
	return errors.New("store down: secret-dsn")
}

// refundCallDown is a transcript sink that fails the append of the
// refund's call entry, once.
type refundCallDown struct {
	*gatewaytest.Recorder
	mu     sync.Mutex
	failed bool
}

func (s *refundCallDown) Append(ctx context.Context, e gateway.TranscriptEntry) error {
	s.mu.Lock()
	fail := !s.failed && e.Call != nil && e.Call.CapabilityID == "adp_payments.issue_refund"
	s.failed = s.failed || fail
	s.mu.Unlock()
	if fail {
		return errors.New("sink down: secret-dsn")
	}
	return s.Recorder.Append(ctx, e)
}

// storeFailureRun runs the refund with o and returns the result and its
// packet; the harness's cleanup replays the packet and fails the test
// unless it is replay_equal.
func storeFailureRun(t *testing.T, o *contextostest.Options) (*contextostest.Harness, *contextos.Result, *replay.Packet) {
	t.Helper()
	h := harness(t, newTurnPlanner(1200, 0), o)
	req, rc := refundRequest(t, 1200, true)
	res, err := h.Runtime.Invoke(context.Background(), req, rc)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "ESCALATED" {
		t.Fatalf("status %s, want ESCALATED (a store failure stops the run)", res.Status)
	}
	p, err := h.Replays.Get(context.Background(), res.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	return h, res, p
}

// checkStoreFailureReplay replays p and checks it is replay_equal, that
// the packet says which store failed and holds no store error text.
func checkStoreFailureReplay(t *testing.T, h *contextostest.Harness, p *replay.Packet, store, op string) {
	t.Helper()
	if len(p.StoreFailures) != 1 || p.StoreFailures[0].Store != store || p.StoreFailures[0].Op != op || p.StoreFailures[0].ToolCallID == "" {
		t.Fatalf("store_failures %+v, want one %s %s", p.StoreFailures, store, op)
	}
	b, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if bytesContain(b, "secret-dsn") {
		t.Fatal("the packet holds the store's error text")
	}
	rep, err := h.Runtime.Replay(context.Background(), p)
	if err != nil || rep.Status != replay.ReplayEqual {
		t.Fatalf("replay: %v %+v", err, rep)
	}
}

func bytesContain(b []byte, s string) bool { return strings.Contains(string(b), s) }

func TestStoreFailureIdempotencyClaimReplaysEqual(t *testing.T) {
	var o contextostest.Options
	o.Runtime.Gateway.Idempotency = claimsDown{gateway.NewMemoryIdempotency()}
	h, _, p := storeFailureRun(t, &o)
	checkStoreFailureReplay(t, h, p, replay.StoreIdempotency, replay.StoreOpClaim)
}

func TestStoreFailureIdempotencyCompleteReplaysEqual(t *testing.T) {
	var o contextostest.Options
	o.Runtime.Gateway.Idempotency = completesDown{gateway.NewMemoryIdempotency()}
	h, _, p := storeFailureRun(t, &o)
	checkStoreFailureReplay(t, h, p, replay.StoreIdempotency, replay.StoreOpComplete)
}

func TestStoreFailureTranscriptAppendReplaysEqual(t *testing.T) {
	var o contextostest.Options
	o.Runtime.Transcripts = &refundCallDown{Recorder: &gatewaytest.Recorder{}}
	h, _, p := storeFailureRun(t, &o)
	checkStoreFailureReplay(t, h, p, replay.StoreTranscript, replay.StoreOpAppend)
}

// A packet whose store failure was edited is refused unless resealed, and
// resealed without it replays as a mismatch (the replay makes the call).
func TestStoreFailureTampered(t *testing.T) {
	var o contextostest.Options
	o.Runtime.Gateway.Idempotency = claimsDown{gateway.NewMemoryIdempotency()}
	h, _, p := storeFailureRun(t, &o)
	edited := *p
	edited.StoreFailures = nil
	rep, err := h.Runtime.Replay(context.Background(), &edited)
	if !errors.Is(err, replay.ErrTamper) || rep == nil || rep.Status != replay.Invalid {
		t.Fatalf("edited packet: %v %+v, want tamper", err, rep)
	}
	if err := edited.Seal(); err != nil {
		t.Fatal(err)
	}
	rep, err = h.Runtime.Replay(context.Background(), &edited)
	if err != nil || rep.Status != replay.ReplayMismatch {
		t.Fatalf("resealed packet: %v %+v, want replay_mismatch", err, rep)
	}
	moved := *p
	moved.StoreFailures = []replay.StoreFailure{p.StoreFailures[0]}
	moved.StoreFailures[0].ToolCallID = "tc_other"
	if err := moved.Seal(); err != nil {
		t.Fatal(err)
	}
	if rep, err = h.Runtime.Replay(context.Background(), &moved); err != nil || rep.Status != replay.ReplayMismatch {
		t.Fatalf("resealed packet with another call's failure: %v %+v, want replay_mismatch", err, rep)
	}
}

// claimsDownOnce is an idempotency store whose first claim fails.
type claimsDownOnce struct {
	*gateway.MemoryIdempotency
	mu     sync.Mutex
	failed bool
}

func (s *claimsDownOnce) Claim(ctx context.Context, key string) (*gateway.ToolResultEnvelope, bool, error) {
	s.mu.Lock()
	fail := !s.failed
	s.failed = true
	s.mu.Unlock()
	if fail {
		return nil, false, errors.New("store down: secret-dsn")
	}
	return s.MemoryIdempotency.Claim(ctx, key)
}

// A run a store failure stopped and that was resumed once the store was
// back replays equal: its checkpoint carried the failure into the
// resumed run's packet, and the replay's claim fails once, then succeeds.
func TestStoreFailureThenResumeReplaysEqual(t *testing.T) {
	var o contextostest.Options
	o.Runtime.Gateway.Idempotency = &claimsDownOnce{MemoryIdempotency: gateway.NewMemoryIdempotency()}
	h, res, _ := storeFailureRun(t, &o)
	next, err := h.Runtime.Resume(context.Background(), res.RunID, contextos.ResumeInput{})
	if err != nil {
		t.Fatal(err)
	}
	if next.Status == "ESCALATED" || next.ReplayPacketID == "" {
		t.Fatalf("resumed: %s packet %q, want the refund made", next.Status, next.ReplayPacketID)
	}
	p, err := h.Replays.Get(context.Background(), next.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	checkStoreFailureReplay(t, h, p, replay.StoreIdempotency, replay.StoreOpClaim)
}

// A write whose call entry the transcript sink failed was not run: its
// idempotency key is given up, not kept with the refusal, so the run's
// resume makes the write (once) and replays equal. The key kept the
// refusal before, and every later call of the write met it as a
// duplicate: the resumed run never made the refund.
func TestStoreFailureTranscriptAppendThenResumeMakesTheWrite(t *testing.T) {
	var o contextostest.Options
	o.Runtime.Transcripts = &refundCallDown{Recorder: &gatewaytest.Recorder{}}
	h, res, _ := storeFailureRun(t, &o)
	next, err := h.Runtime.Resume(context.Background(), res.RunID, contextos.ResumeInput{})
	if err != nil {
		t.Fatal(err)
	}
	if next.Status != "DECIDED" || next.ReplayPacketID == "" {
		t.Fatalf("resumed: %s packet %q, want the refund made", next.Status, next.ReplayPacketID)
	}
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	p, err := h.Replays.Get(context.Background(), next.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	checkStoreFailureReplay(t, h, p, replay.StoreTranscript, replay.StoreOpAppend)
}

// evalResultDown is a transcript sink that fails the append of the
// policy check's result entry, once.
type evalResultDown struct {
	*gatewaytest.Recorder
	mu     sync.Mutex
	failed bool
}

func (s *evalResultDown) Append(ctx context.Context, e gateway.TranscriptEntry) error {
	s.mu.Lock()
	fail := !s.failed && e.Result != nil && e.Result.CapabilityID == "adp_policy.eval"
	s.failed = s.failed || fail
	s.mu.Unlock()
	if fail {
		return errors.New("sink down: secret-dsn")
	}
	return s.Recorder.Append(ctx, e)
}

// A read whose result entry the transcript sink failed is not part of
// the run: the run stops, and its resume reads again (the policy check
// runs a second time and is recorded) rather than decide on a result the
// transcript never shows. Before, the stopped run's checkpoint kept the
// unrecorded result and the resumed run refunded on it: the decided
// run's tool results held a policy check with no result entry in the
// transcript.
func TestStoreFailureOfAReadsResultIsNotEvidence(t *testing.T) {
	var o contextostest.Options
	sink := &evalResultDown{Recorder: &gatewaytest.Recorder{}}
	o.Runtime.Transcripts = sink
	h, res, p := storeFailureRun(t, &o)
	h.Transcript = sink.Recorder
	checkStoreFailureReplay(t, h, p, replay.StoreTranscript, replay.StoreOpAppend)
	for _, r := range res.ToolResults {
		if r.CapabilityID == "adp_policy.eval" {
			t.Errorf("the stopped run's results hold the policy check whose result entry was not recorded (%s)", r.Status)
		}
	}
	next, err := h.Runtime.Resume(context.Background(), res.RunID, contextos.ResumeInput{})
	if err != nil {
		t.Fatal(err)
	}
	if next.Status != "DECIDED" {
		t.Fatalf("resumed: %s, want DECIDED", next.Status)
	}
	recorded := map[string]bool{}
	for _, e := range runEntries(t, h, res.RunID) {
		if e.Result != nil {
			recorded[e.Result.ToolCallID] = true
		}
	}
	for _, r := range next.ToolResults {
		if !recorded[r.ToolCallID] {
			t.Errorf("the decided run rests on the result of %s (%s, %s), which its transcript does not hold", r.CapabilityID, r.ToolCallID, r.Status)
		}
	}
	contextostest.AssertCalls(t, h.Adapter("adp_policy"), "eval", 2)
	contextostest.AssertCalls(t, h.Adapter("adp_payments"), "issue_refund", 1)
	if _, err := gateway.VerifyTranscript(runEntries(t, h, res.RunID)); err != nil {
		t.Errorf("the transcript does not verify: %v", err)
	}
	np, err := h.Replays.Get(context.Background(), next.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	checkStoreFailureReplay(t, h, np, replay.StoreTranscript, replay.StoreOpAppend)
}
