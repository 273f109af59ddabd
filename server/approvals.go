package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/engine"
	"github.com/contextos/contextos/internal/principal"
	"github.com/contextos/contextos/internal/sensitive"
	"github.com/contextos/contextos/runcontext"
)

// Decisions on a pending approval.
const (
	DecisionApprove = "approve"
	DecisionDeny    = "deny"
)

// MaxReasonBytes bounds a decision's reason.
const MaxReasonBytes = 1000

// approvalView is a pending approval as GET /v1/approvals and the inbox
// show it: PendingApproval's members (arguments redacted) with its expiry
// and the time left.
type approvalView struct {
	contextos.PendingApproval
	ExpiresAt   time.Time `json:"expires_at"`
	Expired     bool      `json:"expired"`
	SecondsLeft int64     `json:"seconds_left"`
	// Decide is the path a decision is posted to.
	Decide string `json:"decide"`
}

// decisionEntry is a decision on a pause, as the ledger keeps it: the
// first one stored is the pause's, on every replica. Its reason is
// redacted before it is stored, as the run's record keeps it.
type decisionEntry struct {
	RunID        string    `json:"run_id"`
	TenantID     string    `json:"tenant_id"`
	GateID       string    `json:"gate_id"`
	ToolCallID   string    `json:"tool_call_id"`
	ActionDigest string    `json:"action_digest"`
	RecordID     string    `json:"deferred_record_id"`
	Decision     string    `json:"decision"`
	Reason       string    `json:"reason,omitempty"`
	Approver     string    `json:"approver"`
	ApproverRole string    `json:"approver_role"`
	DecidedAt    time.Time `json:"decided_at"`
	ApprovalID   string    `json:"approval_id"`
}

// decisionKey is the ledger key of a pause's decision: one per DEFERRED
// record, gate, paused call and action.
func decisionKey(tenantID, runID, recordID, gateID, toolCallID, digest string) string {
	return ledgerKey("decision", tenantID, runID, recordID, gateID, toolCallID, digest)
}

func pendingKey(p contextos.PendingApproval) string {
	return decisionKey(p.TenantID, p.RunID, p.RecordID, p.GateID, p.ToolCallID, p.ActionDigest)
}

// expiresAt is when a pending approval stops being approvable: ttl
// seconds after the run paused.
func expiresAt(p contextos.PendingApproval) time.Time {
	return p.RequestedAt.Add(time.Duration(p.TTLSeconds) * time.Second)
}

func (h *Handler) view(p contextos.PendingApproval) approvalView {
	// The runtime redacts the arguments by the built-in rules and the
	// run's active ones; the handler's own rules apply to every answer,
	// whatever the run's pack activated.
	p.Args = h.redaction.args(p.Args)
	exp := expiresAt(p)
	left := exp.Sub(h.o.Now())
	v := approvalView{PendingApproval: p, ExpiresAt: exp.UTC(), Expired: left <= 0, Decide: h.path("/v1/runs/" + p.RunID + "/approvals/" + p.GateID)}
	if left > 0 {
		v.SecondsLeft = int64(left / time.Second)
	}
	return v
}

// decidable lists the pending approvals p may decide: of p's tenant, on a
// gate whose role p holds, of a run p did not request or start unless the
// gate allows self-approval.
func (h *Handler) decidable(ctx context.Context, p *Principal) ([]approvalView, *apiError) {
	list, err := h.pending.PendingApprovals(ctx, p.TenantID)
	if err != nil {
		return nil, h.storeError("pending approvals", err)
	}
	out := []approvalView{}
	for _, pa := range list {
		if pa.TenantID != p.TenantID || !p.HasRole(pa.ApproverRole) {
			continue
		}
		forbidden, err := h.selfForbidden(ctx, p, pa)
		if err != nil {
			return nil, h.storeError("run requesters", err)
		}
		if !forbidden {
			out = append(out, h.view(pa))
		}
	}
	return out, nil
}

func (h *Handler) listApprovals(w http.ResponseWriter, r *http.Request) {
	r, cancel := h.withTimeout(r)
	defer cancel()
	p, aerr := h.authenticate(r, false)
	if aerr != nil {
		writeProblem(w, aerr)
		return
	}
	list, aerr := h.decidable(r.Context(), p)
	if aerr != nil {
		writeProblem(w, aerr)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": list})
}

// selfForbidden reports whether the gate's self-approval rule keeps p
// from deciding pa: the gate does not allow self-approval and p requested
// or started the run. A gate that allows it lets the requester decide, as
// the gateway does.
func (h *Handler) selfForbidden(ctx context.Context, p *Principal, pa contextos.PendingApproval) (bool, error) {
	if pa.AllowSelfApproval {
		return false, nil
	}
	return h.isRequester(ctx, p, pa)
}

// isRequester reports whether p requested the paused run (its user, by
// the run's principal chain or the request the handler started it with)
// or started it through the handler: no principal approves its own run.
func (h *Handler) isRequester(ctx context.Context, p *Principal, pa contextos.PendingApproval) (bool, error) {
	names, err := h.requesters(ctx, pa)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(names, func(n string) bool { return principal.Same(p.Subject, n) }), nil
}

// requesters are the names of who asked for the paused run: the users of
// its principal chain (its DEFERRED record's), and who started it through
// the handler with which request user.
func (h *Handler) requesters(ctx context.Context, pa contextos.PendingApproval) ([]string, error) {
	var names []string
	if pa.RecordID != "" {
		rec, err := h.stores.Records.Get(ctx, pa.RecordID)
		if err != nil && !errors.Is(err, decision.ErrNotFound) {
			return nil, err
		}
		if rec != nil {
			for _, link := range rec.AgentIdentity.PrincipalChain {
				if link.Kind == runcontext.PrincipalUser {
					names = append(names, link.ID)
				}
			}
		}
	}
	raw, ok, err := h.ledger.get(ctx, runKey(pa.TenantID, pa.RunID))
	if err != nil {
		return nil, err
	}
	if ok {
		var s starter
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		names = append(names, s.Subject, s.UserID)
	}
	return names, nil
}

// decisionBody is a decision's body. ActionDigest, required, is the
// action digest of the pause the approver was shown (GET /v1/approvals'
// action_digest): the decision is refused unless that pause is the one
// the run awaits, so a decision meant for a call, or a client's retry of
// it, never lands on the next pause of the same gate.
type decisionBody struct {
	Decision     string `json:"decision"`
	Reason       string `json:"reason"`
	ActionDigest string `json:"action_digest"`
}

// maxDigestBytes bounds a decision's action digest.
const maxDigestBytes = 200

func (b *decisionBody) check() *apiError {
	if b.Decision != DecisionApprove && b.Decision != DecisionDeny {
		return invalid(FieldError{Path: "decision", Code: "enum", Message: `must be "approve" or "deny"`})
	}
	if len(b.Reason) > MaxReasonBytes || !utf8.ValidString(b.Reason) {
		return invalid(FieldError{Path: "reason", Code: "length", Message: "must be valid UTF-8 of at most 1000 bytes"})
	}
	if strings.ContainsFunc(b.Reason, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t' }) {
		return invalid(FieldError{Path: "reason", Code: "control", Message: "must not hold control characters"})
	}
	if b.ActionDigest == "" {
		return invalid(FieldError{Path: "action_digest", Code: "required", Message: "is required: the action digest of the pause decided on (GET /v1/approvals)"})
	}
	if len(b.ActionDigest) > maxDigestBytes || strings.ContainsFunc(b.ActionDigest, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		return invalid(FieldError{Path: "action_digest", Code: "format", Message: "must be an action digest (printable ASCII, at most 200 bytes)"})
	}
	b.Reason = strings.TrimSpace(b.Reason)
	return nil
}

func (h *Handler) postDecision(w http.ResponseWriter, r *http.Request) {
	r, cancel := h.withTimeout(r)
	defer cancel()
	p, aerr := h.authenticate(r, false)
	if aerr != nil {
		writeProblem(w, aerr)
		return
	}
	b, aerr := readBody(w, r, h.o.MaxBodyBytes)
	if aerr != nil {
		writeProblem(w, aerr)
		return
	}
	var body decisionBody
	if aerr := decodeStrict(b, &body); aerr != nil {
		writeProblem(w, aerr)
		return
	}
	if aerr := body.check(); aerr != nil {
		writeProblem(w, aerr)
		return
	}
	d, aerr := h.decide(r.Context(), p, r.PathValue("run_id"), r.PathValue("gate_id"), body)
	if aerr != nil {
		writeProblem(w, aerr)
		return
	}
	loc := h.path("/v1/runs/" + d.RunID)
	w.Header().Set("Location", loc)
	writeJSON(w, http.StatusAccepted, map[string]any{"run_id": d.RunID, "gate_id": d.GateID, "decision": d.Decision, "approver": d.Approver,
		"approver_role": d.ApproverRole, "decided_at": d.DecidedAt, "approval_id": d.ApprovalID, "location": loc})
}

// decide records p's decision on the approval runID awaits on gateID and
// resumes the run on a worker. It answers 404 for a run p's tenant does
// not hold, 403 for a principal without the gate's role or who asked for
// the run when the gate does not allow self-approval, 409 for a pause
// already decided (on any replica), no longer pending, not the one
// body.ActionDigest names or, to approve, expired.
func (h *Handler) decide(ctx context.Context, p *Principal, runID, gateID string, body decisionBody) (*decisionEntry, *apiError) {
	pend, err := h.rt.PendingApprovals(ctx, contextos.RunList{runID})
	if err != nil {
		return nil, h.storeError("pending approvals", err)
	}
	var pa *contextos.PendingApproval
	for i := range pend {
		if pend[i].RunID == runID {
			pa = &pend[i]
		}
	}
	if pa == nil {
		return nil, h.notPending(ctx, p, runID, gateID)
	}
	switch {
	case pa.TenantID != p.TenantID:
		return nil, errNoRun
	case pa.GateID != gateID:
		return nil, errorf(http.StatusConflict, CodeNotPending, "the run awaits no approval on %s", shownGate(gateID))
	case !p.HasRole(pa.ApproverRole):
		return nil, forbidden(RuleApproverRole, "deciding on %s needs the role %s", pa.GateID, pa.ApproverRole)
	}
	self, err := h.selfForbidden(ctx, p, *pa)
	if err != nil {
		return nil, h.storeError("run requesters", err)
	}
	if self {
		return nil, forbidden(RuleSelfApproval, "the caller requested or started this run and gate %s needs someone else to decide", pa.GateID)
	}
	if body.ActionDigest != pa.ActionDigest {
		return nil, h.otherPause(ctx, runID, gateID, body.ActionDigest)
	}
	now := h.o.Now()
	if body.Decision == DecisionApprove && !now.Before(expiresAt(*pa)) {
		return nil, errorf(http.StatusConflict, CodeApprovalExpired, "the approval expired at %s (%ds after the run paused); it can only be denied", expiresAt(*pa).UTC().Format(time.RFC3339), pa.TTLSeconds)
	}
	key := pendingKey(*pa)
	sum := sha256.Sum256([]byte(key))
	d := &decisionEntry{RunID: runID, TenantID: pa.TenantID, GateID: pa.GateID, ToolCallID: pa.ToolCallID, ActionDigest: pa.ActionDigest, RecordID: pa.RecordID,
		Decision: body.Decision, Reason: h.redactText(body.Reason), Approver: p.Subject, ApproverRole: pa.ApproverRole, DecidedAt: now.UTC(), ApprovalID: "apr_" + hex.EncodeToString(sum[:16])}
	raw, created, err := h.ledger.put(ctx, key, d)
	if err != nil {
		return nil, h.storeError("record decision", err)
	}
	if !created {
		return nil, alreadyDecided(raw)
	}
	h.o.Logger.Info("approval decided", "run_id", runID, "tenant_id", d.TenantID, "gate_id", d.GateID, "decision", d.Decision,
		"approver", d.Approver, "approver_role", d.ApproverRole, "approval_id", d.ApprovalID)
	h.resume(d)
	return d, nil
}

func alreadyDecided(raw json.RawMessage) *apiError {
	var prior decisionEntry
	if json.Unmarshal(raw, &prior) == nil && prior.Decision != "" {
		return errorf(http.StatusConflict, CodeAlreadyDecided, "this approval was already decided (%s at %s)", prior.Decision, prior.DecidedAt.UTC().Format(time.RFC3339))
	}
	return errorf(http.StatusConflict, CodeAlreadyDecided, "this approval was already decided")
}

// notPending answers a decision on a run that awaits nothing: 404 for a
// run p's tenant does not hold, 409 already decided when the run's last
// pause on gateID has a decision, 409 not pending otherwise.
func (h *Handler) notPending(ctx context.Context, p *Principal, runID, gateID string) *apiError {
	recs, err := h.stores.Records.List(ctx, decision.Filter{RunID: runID})
	if err != nil {
		return h.storeError("list records", err)
	}
	if len(recs) == 0 || recs[0].TenantID != p.TenantID {
		return errNoRun
	}
	for _, rec := range slices.Backward(recs) {
		a := rec.Awaiting
		if rec.Status != decision.Deferred || a == nil || a.GateID != gateID {
			continue
		}
		raw, ok, err := h.ledger.get(ctx, decisionKey(rec.TenantID, runID, rec.RecordID, a.GateID, a.ToolCallID, a.ActionDigest))
		if err != nil {
			return h.storeError("read decision", err)
		}
		if ok {
			return alreadyDecided(raw)
		}
		break
	}
	return errorf(http.StatusConflict, CodeNotPending, "the run awaits no approval on %s", shownGate(gateID))
}

// otherPause answers a decision naming the action digest of a pause the
// run no longer awaits on gateID: 409 already decided when the run paused
// on that action and the pause has a decision, 409 not pending otherwise.
func (h *Handler) otherPause(ctx context.Context, runID, gateID, digest string) *apiError {
	recs, err := h.stores.Records.List(ctx, decision.Filter{RunID: runID})
	if err != nil {
		return h.storeError("list records", err)
	}
	for _, rec := range slices.Backward(recs) {
		a := rec.Awaiting
		if rec.Status != decision.Deferred || a == nil || a.GateID != gateID || a.ActionDigest != digest {
			continue
		}
		raw, ok, err := h.ledger.get(ctx, decisionKey(rec.TenantID, runID, rec.RecordID, a.GateID, a.ToolCallID, a.ActionDigest))
		if err != nil {
			return h.storeError("read decision", err)
		}
		if ok {
			return alreadyDecided(raw)
		}
	}
	return errorf(http.StatusConflict, CodeNotPending, "the run awaits no approval of that action on %s", shownGate(gateID))
}

// resume continues the run with d on a worker, now when a slot is free
// (or, while a part of the run still runs, when that part ends at the
// pause d decides); else the sweep continues it.
func (h *Handler) resume(d *decisionEntry) { h.continueRun(d, false) }

// continueRun is resume; with takeover, the run is taken over from a
// runtime whose claim's lease lapsed (it died continuing the run).
func (h *Handler) continueRun(d *decisionEntry, takeover bool) {
	// A part of the run still ending holds a worker slot (perhaps the
	// last free one): parking the decision behind it takes none.
	if e := h.entry(d.RunID, "", false); e != nil && e.park(d) {
		return
	}
	if h.acquire() != nil {
		h.o.Logger.Warn("decided run left for the sweep: no worker free", "run_id", d.RunID)
		return
	}
	e := h.entry(d.RunID, d.TenantID, true)
	e.mu.Lock()
	if e.running {
		// A part started meanwhile.
		e.decided = append(e.decided, d)
		e.mu.Unlock()
		h.release()
		return
	}
	// The entry holds the run's events up to this pause when the
	// segment it ran last ended with the pause's record; else the stores
	// do (a replica ran the run, or a part of it since).
	complete := e.complete && e.view != nil && e.view.RecordID == d.RecordID
	e.running, e.view, e.err, e.complete = true, nil, nil, complete
	e.notify()
	e.mu.Unlock()
	if !complete {
		h.seed(e)
	}
	a := gateway.Approval{ApprovalID: d.ApprovalID, GateID: d.GateID, ActionDigest: d.ActionDigest, Approver: d.Approver, ApproverRole: d.ApproverRole,
		DecidedAt: d.DecidedAt, Denied: d.Decision == DecisionDeny, Reason: h.redactText(d.Reason)}
	h.work(e, func(ctx context.Context) iter.Seq2[contextos.Event, error] {
		// Pause: a decision taken up late (a sweep's listing, a worker's
		// parked decision) never lands on a later pause of the run.
		return h.rt.ResumeStream(ctx, d.RunID, contextos.ResumeInput{Approvals: []gateway.Approval{a}, Pause: d.RecordID, Takeover: takeover})
	})
}

// park keeps d for the worker of the part of the run still running
// (the part that paused the run is still ending, say): it takes the
// decision up when that part ends (work). It reports false when no part
// runs.
func (e *runEntry) park(d *decisionEntry) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.running {
		return false
	}
	e.decided = append(e.decided, d)
	return true
}

// awaits reports whether the run awaits the pause d decides, by the
// stores; true when they do not answer (the runtime refuses a resume of a
// pause the run no longer awaits).
func (h *Handler) awaits(d *decisionEntry) bool {
	ctx, cancel := context.WithTimeout(h.base, h.o.RequestTimeout)
	defer cancel()
	pend, err := h.rt.PendingApprovals(ctx, contextos.RunList{d.RunID})
	if err != nil {
		h.o.Logger.Error("pending approvals", "run_id", d.RunID, "error", err.Error())
		return true
	}
	return slices.ContainsFunc(pend, func(p contextos.PendingApproval) bool { return p.RunID == d.RunID && p.RecordID == d.RecordID })
}

// seed gives an entry of a run whose events up to now it does not hold
// the events the stores keep of it (its stored segments, rebuilt where
// none is stored), so its stream starts at the run's start with the ids
// every replica gives them. It returns the id of the run's last record
// ("" when the stores keep none, or fail).
func (h *Handler) seed(e *runEntry) (recordID string) {
	ctx, cancel := context.WithTimeout(h.base, h.o.RequestTimeout)
	defer cancel()
	var evs []json.RawMessage
	rebuilt := false
	v, st, aerr := h.storedView(ctx, &Principal{TenantID: e.tenantID}, e.runID, false)
	if aerr == nil && st != nil {
		evs, rebuilt, aerr = h.storedEvents(ctx, e.tenantID, e.runID, st.recs, st.entries, st.seen)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = nil
	if aerr == nil {
		e.events = evs
	}
	// With a segment rebuilt, the entry streams the run live as it can,
	// but once the part ends the run's events are the stores' (the
	// segment's entry may have been stored since by the handler that ran
	// it), as on every other replica.
	e.complete = aerr == nil && !rebuilt
	if aerr != nil {
		return ""
	}
	return v.RecordID
}

// sweepLoop continues, every SweepInterval, the decided pauses no worker
// continued.
func (h *Handler) sweepLoop() {
	defer h.wg.Done()
	t := time.NewTicker(h.o.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
			h.sweep(h.base)
		}
	}
}

// sweepGrace is how long a decision is left to the worker that recorded
// it before a sweep continues its run.
const sweepGrace = 5 * time.Second

// sweep resumes every pending run whose pause has a decision older than
// sweepGrace: its worker stopped (a replica went down) or never started.
// Each run is continued once: the runtime claims its checkpoint, so of
// the replicas that try, one goes on.
func (h *Handler) sweep(ctx context.Context) {
	list, err := h.pending.PendingApprovals(ctx, "")
	if err != nil {
		h.o.Logger.Error("sweep: pending approvals", "error", err.Error())
		return
	}
	for _, pa := range list {
		if ctx.Err() != nil {
			return
		}
		raw, ok, err := h.ledger.get(ctx, pendingKey(pa))
		if err != nil {
			h.o.Logger.Error("sweep: read decision", "run_id", pa.RunID, "error", err.Error())
			continue
		}
		if !ok {
			continue
		}
		var d decisionEntry
		if err := json.Unmarshal(raw, &d); err != nil || d.Decision == "" {
			h.o.Logger.Error("sweep: unreadable decision", "run_id", pa.RunID)
			continue
		}
		if h.o.Now().Sub(d.DecidedAt) < sweepGrace {
			continue
		}
		if e := h.entry(pa.RunID, "", false); e != nil {
			e.mu.Lock()
			running := e.running
			e.mu.Unlock()
			if running {
				continue
			}
		}
		h.o.Logger.Info("sweep: resuming a decided run", "run_id", d.RunID, "decision", d.Decision, "approver", d.Approver)
		h.resume(&d)
	}
	h.takeOver(ctx)
}

// takeOver takes over every run a runtime claimed to continue it with a
// decision of the ledger and then stopped (its replica died): the
// checkpoint is Active, still at the decided pause, and its claim's
// lease has lapsed on the checkpoint store's clock. A run whose runtime
// lives renews its lease with each save (and each heartbeat of a
// long_running run), so it is not taken. Each run is taken over once:
// the runtime's claim refuses a second takeover (ErrLeaseHeld, or the
// checkpoint moved on). It looks at the runs the store's pending index
// lists (every run the store lists, when it keeps none), when
// Stores.Checkpoints can load them.
func (h *Handler) takeOver(ctx context.Context) {
	store, ok := h.stores.Checkpoints.(contextos.CheckpointStore)
	if !ok {
		return
	}
	// A store that keeps the pending index lists the claimed runs with
	// the paused ones (Checkpoint.Awaiting): the pass costs in proportion
	// to the runs at a pause. Any other store is read run by run, as
	// PendingApprovals reads it.
	var ids []string
	var err error
	if idx, ok := h.stores.Checkpoints.(contextos.PendingIndex); ok {
		ids, err = idx.PendingRunIDs(ctx, "")
	} else {
		ids, err = h.stores.Checkpoints.RunIDs(ctx)
	}
	if err != nil {
		h.o.Logger.Error("sweep: list runs", "error", err.Error())
		return
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		if e := h.entry(id, "", false); e != nil {
			e.mu.Lock()
			running := e.running
			e.mu.Unlock()
			if running {
				continue
			}
		}
		c, err := store.Load(ctx, id)
		if err != nil || c == nil {
			if err != nil && !errors.Is(err, contextos.ErrNotFound) {
				h.o.Logger.Error("sweep: load checkpoint", "run_id", id, "error", err.Error())
			}
			continue
		}
		if c.Lease > 0 {
			continue // a runtime holds the run
		}
		cl, err := engine.ClaimedPauseOf(c)
		if err != nil {
			h.o.Logger.Error("sweep: read checkpoint", "run_id", id, "error", err.Error())
			continue
		}
		if cl == nil {
			continue
		}
		p := cl.Pending
		raw, ok, err := h.ledger.get(ctx, decisionKey(cl.TenantID, cl.RunID, cl.RecordID, p.GateID, p.ToolCallID, p.ActionDigest))
		if err != nil {
			h.o.Logger.Error("sweep: read decision", "run_id", id, "error", err.Error())
			continue
		}
		if !ok {
			continue // not a decision of the service's
		}
		var d decisionEntry
		if err := json.Unmarshal(raw, &d); err != nil || d.Decision == "" {
			h.o.Logger.Error("sweep: unreadable decision", "run_id", id)
			continue
		}
		h.o.Logger.Info("sweep: taking over a decided run whose runtime stopped", "run_id", d.RunID, "decision", d.Decision, "approver", d.Approver)
		h.continueRun(&d, true)
	}
}

// shownGate is a gate id from a request's path as an error may name it:
// clipped, or not shown when the secret detectors find a credential in
// it (an answer never echoes a value that may be a secret pasted into
// the wrong place).
func shownGate(id string) string {
	if _, found := sensitive.Detect(id, sensitive.Secrets); found {
		return "a gate not shown (it looks like a secret)"
	}
	return clip(id)
}
