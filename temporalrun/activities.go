package temporalrun

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/engine"
	"github.com/contextos/contextos/internal/sensitive"
	"github.com/contextos/contextos/replay"
)

// planAnswer is a planner turn's activity result: the plan, or the
// planner's failure as the runtime classifies it. A planner failure is a
// result, not an activity error: the runtime governs it (the run stops
// with a record), and Temporal does not ask the planner again.
type planAnswer struct {
	Plan    *contextos.Plan      `json:"plan,omitempty"`
	Error   string               `json:"error,omitempty"`
	Timeout bool                 `json:"timeout,omitempty"`
	Usage   *contextos.PlanUsage `json:"usage,omitempty"`
}

// plan is the planner-turn activity.
func (h *Host) plan(ctx context.Context, wire []byte) (planAnswer, error) {
	req, err := engine.DecodePlanRequest(wire)
	if err != nil {
		return planAnswer{}, temporal.NewNonRetryableApplicationError(err.Error(), "invalid_plan_request", nil)
	}
	plan, err := h.cfg.Planner.Plan(ctx, req)
	if err == nil {
		return planAnswer{Plan: plan}, nil
	}
	if ctx.Err() != nil {
		return planAnswer{}, ctx.Err() // the attempt was cancelled or timed out: Temporal decides
	}
	// The planner's own words may carry a secret (an upstream error with
	// a key in it): they go to the worker's log with secrets redacted, as
	// the runtime logs them, and the answer, which
	// the workflow's history keeps in the clear, carries none of them
	// (the runtime records the failure in its own words).
	activity.GetLogger(ctx).Error("planner failed", "error", redacted(err))
	ans := planAnswer{Error: "the planner returned an error"}
	var te interface{ Timeout() bool }
	ans.Timeout = errors.As(err, &te) && te.Timeout()
	var ue *contextos.PlanUsageError
	if errors.As(err, &ue) {
		u := ue.Usage
		ans.Usage = &u
	}
	return ans, nil
}

// attemptCall is one gateway attempt, as its activity gets it: the call
// carries its idempotency key, the same on every activity attempt.
type attemptCall struct {
	AdapterID string        `json:"adapter_id"`
	Call      *gateway.Call `json:"call"`
}

// attemptAnswer is a gateway attempt's activity result: what the adapter
// returned, its error as a tool error or as text, or its panic.
type attemptAnswer struct {
	Outcome   *gateway.Outcome   `json:"outcome,omitempty"`
	ToolError *gateway.ToolError `json:"tool_error,omitempty"`
	Error     string             `json:"error,omitempty"`
	Panicked  bool               `json:"panicked,omitempty"`
	// Redacted: the tool error's text held secrets, redacted before the
	// answer reached the history (see secretFree).
	Redacted bool `json:"redacted,omitempty"`
}

// attempt is the gateway-attempt activity: the adapter called once. A
// worker that dies inside it, or an attempt that outlives its timeout,
// is retried by Temporal with the same call and idempotency key; what
// the adapter answers (an error included) goes back to the gateway,
// whose own retries are attempts of their own.
func (h *Host) attempt(ctx context.Context, in attemptCall) (ans attemptAnswer, err error) {
	ad, ok := h.adapters[in.AdapterID]
	if !ok || in.Call == nil {
		return attemptAnswer{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("temporalrun: no adapter %q on this worker", in.AdapterID), "unknown_adapter", nil)
	}
	defer func() {
		if p := recover(); p != nil {
			activity.GetLogger(ctx).Error("adapter panicked", "adapter_id", in.AdapterID, "panic_type", fmt.Sprintf("%T", p))
			ans, err = attemptAnswer{Panicked: true}, nil
		}
	}()
	out, cerr := ad.Call(ctx, in.Call)
	if cerr == nil {
		return attemptAnswer{Outcome: out}, nil
	}
	out = spendOnly(out)
	if ctx.Err() != nil {
		return attemptAnswer{}, ctx.Err()
	}
	var te *gateway.ToolError
	if errors.As(cerr, &te) {
		safe, redacted := secretFree(te)
		return attemptAnswer{Outcome: out, ToolError: safe, Redacted: redacted}, nil
	}
	// A plain error's text may carry backend output: the gateway never
	// echoes it, and the answer, which the workflow's history keeps in
	// the clear, does not carry it either.
	activity.GetLogger(ctx).Error("adapter failed", "adapter_id", in.AdapterID, "error", redacted(cerr))
	return attemptAnswer{Outcome: out, Error: "the adapter failed"}, nil
}

// appendRecord is the record activity: it appends the record to the
// host's store. An attempt retried after its worker died finds the
// record stored and returns the stored copy, once it has checked that
// copy is this record sealed after its predecessor.
func (h *Host) appendRecord(ctx context.Context, rec *decision.Record) (*decision.Record, error) {
	stored, err := h.cfg.Decisions.Append(ctx, rec)
	if err == nil {
		return stored, nil
	}
	if !errors.Is(err, decision.ErrDuplicate) {
		return nil, err
	}
	got, gerr := h.cfg.Decisions.Get(ctx, rec.RecordID)
	if gerr != nil {
		return nil, err
	}
	sealed, _, serr := decision.Seal(rec, got.PrevRecordHash)
	if serr != nil || sealed.RecordHash != got.RecordHash {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("temporalrun: record %s is stored with other content", rec.RecordID), "record_conflict", err)
	}
	return got, nil
}

// verifyRecords verifies the host's record store.
func (h *Host) verifyRecords(ctx context.Context) error { return h.cfg.Decisions.Verify(ctx) }

// appendTranscript is the transcript activity. A retried attempt whose
// entry the host's transcript already holds (its worker died after the
// append) does not append it again.
func (h *Host) appendTranscript(ctx context.Context, e gateway.TranscriptEntry) error {
	if activity.GetInfo(ctx).Attempt > 1 {
		if r, ok := h.cfg.Transcripts.(gateway.TranscriptReader); ok {
			entries, err := r.RunEntries(ctx, e.RunID)
			if err != nil {
				return err
			}
			for _, x := range entries {
				if x.Seq == e.Seq && x.ChainHash == e.ChainHash {
					return nil
				}
			}
		}
	}
	return h.cfg.Transcripts.Append(ctx, e)
}

// savePacket is the replay-packet activity.
func (h *Host) savePacket(ctx context.Context, p *replay.Packet) error {
	return h.cfg.Packets.Save(ctx, p)
}

// redacted is err's text with the secrets in it redacted, as the
// runtime's logger writes an error.
func redacted(err error) string {
	s, _ := sensitive.Redact(err.Error(), sensitive.Secrets)
	return s
}

// secretFree returns a copy of te with the secrets in its text (code,
// reason, message and details) redacted as every run's secret rule
// redacts them, and whether it changed anything: a tool error is the
// adapter's own text, which the workflow's history keeps in the clear.
// The gateway redacts what the answer carries by the run's rules again,
// and the workflow's adapter reports this redaction to it
// (wfAdapter.RedactedAttempt), so the result's redaction_applied is what
// it would be without it.
func secretFree(te *gateway.ToolError) (*gateway.ToolError, bool) {
	c := *te
	changed := false
	for _, s := range []*string{&c.Code, &c.Reason, &c.Message} {
		if v, ch := sensitive.RedactSecrets(*s); ch {
			*s, _ = v.(string)
			changed = true
		}
	}
	if len(c.Details) > 0 {
		if v, ch := sensitive.RedactSecrets(c.Details); ch {
			c.Details, _ = v.(map[string]any)
			if c.Details == nil {
				c.Details = map[string]any{}
			}
			changed = true
		}
	}
	return &c, changed
}

// spendOnly is what the gateway reads of a failed attempt's outcome: its
// cost and tokens, charged to the run. The rest (its output and lists)
// stays out of the answer, which the workflow's history keeps in the
// clear.
func spendOnly(out *gateway.Outcome) *gateway.Outcome {
	if out == nil {
		return nil
	}
	return &gateway.Outcome{CostCents: out.CostCents, Tokens: out.Tokens}
}
