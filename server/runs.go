package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/wire"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

// CodeRunRefused: the runtime refused to start the run (its packs, its
// compile, its budget).
const CodeRunRefused = "run_refused"

// Run states (a run view's "state").
const (
	StateRunning = "running"
	StatePaused  = "paused"
	StateEnded   = "ended"
)

// runView is a run as the API shows it: the members contextos run prints
// (run_id, status, decision_record, tool_results, events,
// pending_approvals) with the run's tenant and state.
type runView struct {
	RunID            string                     `json:"run_id"`
	TenantID         string                     `json:"tenant_id"`
	State            string                     `json:"state"`
	Status           decision.Status            `json:"status,omitempty"`
	Record           json.RawMessage            `json:"decision_record"`
	ToolResults      []json.RawMessage          `json:"tool_results"`
	Events           []json.RawMessage          `json:"events"`
	PendingApprovals []*gateway.ApprovalRequest `json:"pending_approvals"`
	// RecordID and Outcome are the record's, for pages.
	RecordID string `json:"-"`
	Outcome  string `json:"-"`
}

// setRecord makes rec the view's record.
func (h *Handler) setRecord(v *runView, rec *decision.Record) {
	if rec == nil {
		v.Record = json.RawMessage("null")
		return
	}
	v.Record, v.RecordID, v.Outcome, v.Status = h.record(rec), rec.RecordID, rec.Outcome, rec.Status
}

// starter is who started a run through the handler: the ledger's entry
// for the run, which the self-approval rule reads.
type starter struct {
	TenantID string `json:"tenant_id"`
	Subject  string `json:"sub"`
	UserID   string `json:"user_id,omitempty"`
}

func runKey(tenantID, runID string) string { return ledgerKey("run", tenantID, runID) }

// runEntry is a run this handler ran (or continued): its events, redacted,
// and the outcome of its last part.
type runEntry struct {
	runID, tenantID string

	mu sync.Mutex
	// events are the run's events as JSON, redacted; from its start when
	// complete. Each segment's are bounded (maxSegmentEvents,
	// maxSegmentBytes).
	events   []json.RawMessage
	complete bool
	// segStart is the index in events of the segment running or last run
	// here, segBytes the size of its events, and segCut whether they
	// reached the bound (its last event is then the EventTruncated one).
	segStart, segBytes int
	segCut             bool
	// retell marks a part that is the same request again: the runtime
	// answers it from the stores, and its events are the entry's only if
	// it writes a record (a run it settles); retellTo is the record the
	// entry's events run to.
	retell   bool
	retellTo string
	running  bool
	// decided are the decisions recorded while a part of the run was
	// running (their pause saved and pending, the worker not yet done):
	// when its part ends, the worker continues the run with the one whose
	// pause the run awaits.
	decided []*decisionEntry
	changed chan struct{} // closed (and replaced) on every change
	view    *runView      // the last part's outcome; nil while running or failed
	err     *apiError     // the last part's failure to start
}

func (e *runEntry) notify() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// add appends an event of the running segment, up to the segment's
// bound; the first event past it is replaced by the EventTruncated one,
// and the others are dropped.
func (e *runEntry) add(ev json.RawMessage) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.segCut:
		return
	case len(e.events)-e.segStart >= maxSegmentEvents || e.segBytes+len(ev) > maxSegmentBytes:
		e.events = append(e.events, truncatedEvent(e.runID))
		e.segCut = true
	default:
		e.events = append(e.events, ev)
		e.segBytes += len(ev)
	}
	e.notify()
}

// snapshot returns the entry's events from index from, whether it is
// running, its outcome, and the channel its next change closes.
func (e *runEntry) snapshot(from int) ([]json.RawMessage, bool, *runView, *apiError, <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var evs []json.RawMessage
	if from < len(e.events) {
		evs = slices.Clone(e.events[from:])
	}
	return evs, e.running, e.view, e.err, e.changed
}

// entry returns the handler's entry for runID, creating it when create.
func (h *Handler) entry(runID, tenantID string, create bool) *runEntry {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.runs[runID]
	if e == nil && create {
		e = &runEntry{runID: runID, tenantID: tenantID, changed: make(chan struct{})}
		h.runs[runID] = e
	}
	return e
}

// ended records that e's part ended, forgetting the oldest ended entries
// over RetainRuns.
func (h *Handler) endedEntry(e *runEntry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ended = slices.DeleteFunc(h.ended, func(id string) bool { return id == e.runID })
	h.ended = append(h.ended, e.runID)
	for len(h.ended) > h.o.RetainRuns {
		old := h.ended[0]
		h.ended = h.ended[1:]
		if x := h.runs[old]; x != nil {
			x.mu.Lock()
			running := x.running
			x.mu.Unlock()
			if !running {
				delete(h.runs, old)
			}
		}
	}
}

// runBody is POST /v1/runs's body.
type runBody struct {
	Request    json.RawMessage `json:"request"`
	RunContext json.RawMessage `json:"run_context"`
}

func (h *Handler) postRun(w http.ResponseWriter, r *http.Request) {
	p, aerr := h.authenticate(r, false)
	if aerr != nil {
		writeProblem(w, aerr)
		return
	}
	if len(h.o.InvokeRoles) > 0 && !slices.ContainsFunc(h.o.InvokeRoles, p.HasRole) {
		writeProblem(w, forbidden(RuleInvokeRole, "starting a run needs one of the roles %s", strings.Join(h.o.InvokeRoles, ", ")))
		return
	}
	b, aerr := readBody(w, r, h.o.MaxBodyBytes)
	if aerr != nil {
		writeProblem(w, aerr)
		return
	}
	req, rc, aerr := decodeRun(b)
	if aerr != nil {
		writeProblem(w, aerr)
		return
	}
	if req.TenantID != p.TenantID {
		writeProblem(w, forbidden(RuleTenant, "request.tenant_id is not the caller's tenant"))
		return
	}
	if aerr := h.startRun(r.Context(), p, req, rc); aerr != nil {
		writeProblem(w, aerr)
		return
	}
	async := preferAsync(r)
	e := h.entry(rc.RunID, p.TenantID, false)
	if !async {
		wait := time.NewTimer(h.o.SyncWait)
		defer wait.Stop()
		for {
			_, running, view, rerr, changed := e.snapshot(math.MaxInt)
			if !running {
				if rerr != nil {
					writeProblem(w, rerr)
					return
				}
				if view != nil {
					v := h.withEvents(e, view)
					if v == nil {
						// The part answered the run as stored (the same
						// request again): its events are the stores'.
						ctx, cancel := context.WithTimeout(r.Context(), h.o.RequestTimeout)
						v, rerr = h.runOf(ctx, p, rc.RunID, true)
						cancel()
						if rerr != nil {
							writeProblem(w, rerr)
							return
						}
					}
					writeView(w, http.StatusOK, v)
					return
				}
			}
			select {
			case <-changed:
				continue
			case <-wait.C:
			case <-r.Context().Done():
				return // the run goes on; its result is at its Location
			}
			break
		}
	}
	loc := h.path("/v1/runs/" + rc.RunID)
	w.Header().Set("Location", loc)
	w.Header().Set("Preference-Applied", "respond-async")
	writeJSON(w, http.StatusAccepted, map[string]string{"run_id": rc.RunID, "tenant_id": p.TenantID, "state": StateRunning, "location": loc, "events": loc + "/events"})
}

// preferAsync reports "Prefer: respond-async".
func preferAsync(r *http.Request) bool {
	for _, v := range r.Header.Values("Prefer") {
		for _, pref := range strings.Split(v, ",") {
			name, _, _ := strings.Cut(strings.TrimSpace(pref), "=")
			if strings.EqualFold(strings.TrimSpace(name), "respond-async") {
				return true
			}
		}
	}
	return false
}

// decodeRun decodes and checks POST /v1/runs's body: the request, the
// run context, and the run id the handler gives the run (derived from
// tenant and request id, so no caller can take another tenant's).
func decodeRun(b []byte) (*runcontext.InvokeRequest, *runcontext.RunContext, *apiError) {
	var body runBody
	if aerr := decodeStrict(b, &body); aerr != nil {
		return nil, nil, aerr
	}
	if len(body.Request) == 0 || string(body.Request) == "null" {
		return nil, nil, invalid(FieldError{Path: "request", Code: "required", Message: "is required (an invokeAgent request)"})
	}
	req, err := runcontext.DecodeInvokeRequest(body.Request)
	if err != nil {
		if fs, ok := fieldsOf("request", err); ok {
			return nil, nil, invalid(fs...)
		}
		return nil, nil, invalid(FieldError{Path: "request", Code: "decode", Message: clipMsg(err.Error())})
	}
	rc := &runcontext.RunContext{}
	if len(body.RunContext) > 0 && string(body.RunContext) != "null" {
		if err := wire.Strict(body.RunContext); err != nil {
			return nil, nil, invalid(FieldError{Path: "run_context", Code: "decode", Message: clipMsg(err.Error())})
		}
		if err := json.Unmarshal(body.RunContext, rc); err != nil {
			f := decodeField(err)
			f.Path = strings.TrimSuffix("run_context."+f.Path, ".")
			return nil, nil, invalid(f)
		}
	}
	derived, err := runcontext.Materialize(req, &runcontext.RunContext{TenantID: req.TenantID}, nil)
	if err != nil {
		if fs, ok := fieldsOf("request", err); ok {
			return nil, nil, invalid(fs...)
		}
		return nil, nil, invalid(FieldError{Path: "request", Code: "invalid", Message: clipMsg(err.Error())})
	}
	if rc.RunID != "" && rc.RunID != derived.RunID {
		return nil, nil, invalid(FieldError{Path: "run_context.run_id", Code: "run_id", Message: "the service derives run ids from tenant_id and request_id; leave run_id out"})
	}
	rc.RunID = derived.RunID
	// The run context is checked as the run will be materialized.
	if _, err := runcontext.Materialize(req, rc, nil); err != nil {
		if fs, ok := fieldsOf("run_context", err); ok {
			return nil, nil, invalid(fs...)
		}
		return nil, nil, invalid(FieldError{Path: "run_context", Code: "invalid", Message: clipMsg(err.Error())})
	}
	return req, rc, nil
}

// startRun records who starts the run and starts it on a worker, or
// joins the worker already running it.
func (h *Handler) startRun(ctx context.Context, p *Principal, req *runcontext.InvokeRequest, rc *runcontext.RunContext) *apiError {
	_, created, err := h.ledger.put(ctx, runKey(p.TenantID, rc.RunID), starter{TenantID: p.TenantID, Subject: p.Subject, UserID: req.User.UserID})
	if err != nil {
		h.o.Logger.Error("run starter not recorded", "run_id", rc.RunID, "error", err.Error())
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "the state store does not answer")
	}
	e := h.entry(rc.RunID, p.TenantID, true)
	e.mu.Lock()
	if e.running {
		e.mu.Unlock()
		return nil // the same request again: its caller waits for the same run
	}
	e.mu.Unlock()
	if aerr := h.acquire(); aerr != nil {
		return aerr
	}
	e.mu.Lock()
	if e.running {
		e.mu.Unlock()
		h.release()
		return nil
	}
	if created {
		e.running, e.view, e.err, e.events, e.complete = true, nil, nil, nil, true
		e.notify()
		e.mu.Unlock()
		h.work(e, func(ctx context.Context) iter.Seq2[contextos.Event, error] { return h.rt.Stream(ctx, req, rc) })
		return nil
	}
	// The same request again (here or on a replica): the runtime answers
	// the run as stored, re-telling a part of it. The entry keeps the
	// run's events (those it holds when its last part ended here, else
	// the stores'), so a stream read meanwhile sends the run's events,
	// not the re-telling's.
	held := e.complete && e.view != nil
	to := ""
	if held {
		to = e.view.RecordID
	}
	e.running, e.view, e.err, e.retell, e.complete = true, nil, nil, true, held
	e.notify()
	e.mu.Unlock()
	if !held {
		to = h.seed(e)
	}
	e.mu.Lock()
	e.retellTo = to
	e.mu.Unlock()
	h.work(e, func(ctx context.Context) iter.Seq2[contextos.Event, error] { return h.rt.Stream(ctx, req, rc) })
	return nil
}

// work runs a part of e's run (its start or a resume: a segment) on a
// worker: its events are redacted into e, its result becomes e's view.
// When the part wrote the record it ended with (its last event is that
// record's decision event), the segment's events are stored before the
// result is published. A part that answered the run as stored wrote
// nothing: e then no longer holds the run's events, the stores do. The
// worker holds a slot, taken by the caller.
func (h *Handler) work(e *runEntry, part func(ctx context.Context) iter.Seq2[contextos.Event, error]) {
	e.mu.Lock()
	e.segStart, e.segBytes, e.segCut = len(e.events), 0, false
	retell, retellTo := e.retell, e.retellTo
	e.retell, e.retellTo = false, ""
	e.mu.Unlock()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		// A decision that came while this part ran is taken up once the
		// part's worker slot is free (the deferred calls run in reverse):
		// at once when the part ended at the pause it decides, else when
		// the stores say the run awaits that pause (the part failed, say,
		// or ended at an earlier pause a replica has continued since).
		var next []*decisionEntry
		var sure int // next[:sure] decide the pause the part ended at
		defer func() {
			for i, d := range next {
				if i < sure || h.awaits(d) {
					h.resume(d)
				}
			}
		}()
		defer h.release()
		var view *runView
		var aerr *apiError
		seen := results{}
		wrote, ended := "", ""
		var told []json.RawMessage // a re-telling's events
		for ev, err := range part(h.base) {
			if err != nil {
				aerr = h.runError(e.runID, err)
				break
			}
			if ev.Kind == contextos.EventResult {
				view = h.viewOf(e.tenantID, ev.Final, seen)
				if rec := ev.Final.Record; rec != nil && rec.RecordID == wrote {
					ended = wrote
				}
				continue
			}
			wrote = ""
			if ev.Kind == contextos.EventDecision && ev.Record != nil {
				wrote = ev.Record.RecordID
			}
			if retell {
				told = append(told, h.event(ev, seen))
				continue
			}
			e.add(h.event(ev, seen))
		}
		if view == nil && aerr == nil {
			aerr = errorf(http.StatusInternalServerError, CodeInternal, "the run ended without a result")
		}
		if retell && ended != "" {
			// The re-telling wrote the record it ended with: its events
			// are the run's next segment.
			for _, ev := range told {
				e.add(ev)
			}
		}
		if view != nil && ended != "" && h.keepEvents {
			h.storeSegment(e, ended)
		}
		e.mu.Lock()
		e.running, e.view, e.err = false, view, aerr
		for _, d := range e.decided {
			if view != nil && view.RecordID == d.RecordID {
				next = slices.Insert(next, 0, d)
				sure++
			} else {
				next = append(next, d)
			}
		}
		e.decided = nil
		switch {
		case retell && ended != "":
			e.complete = false // the part before it may not be the stores'
		case retell:
			// The entry holds the run's events when they run to the
			// record the stores answered with.
			e.complete = e.complete && view != nil && retellTo != "" && view.RecordID == retellTo
		case view != nil && ended == "":
			e.complete = false
		}
		e.notify()
		e.mu.Unlock()
		h.endedEntry(e)
	}()
}

// runError maps the runtime's refusal to start or continue a run.
func (h *Handler) runError(runID string, err error) *apiError {
	switch {
	case errors.Is(err, contextos.ErrRequestConflict):
		return errorf(http.StatusConflict, CodeRunConflict, "request_id was already used with another request")
	case errors.Is(err, contextos.ErrRunInProgress):
		return errorf(http.StatusConflict, CodeRunConflict, "the run is in progress")
	case errors.Is(err, contextos.ErrNotResumable), errors.Is(err, contextos.ErrCheckpointConflict):
		return errorf(http.StatusConflict, CodeNotPending, "the run is not paused (it was continued elsewhere)")
	}
	if fs, ok := fieldsOf("request", err); ok {
		return invalid(fs...)
	}
	for _, s := range refusals {
		if errors.Is(err, s) {
			return errorf(http.StatusUnprocessableEntity, CodeRunRefused, "%s", clipMsg(err.Error()))
		}
	}
	h.o.Logger.Error("run failed", "run_id", runID, "error", err.Error())
	return errorf(http.StatusInternalServerError, CodeInternal, "the run failed; the service log has the cause")
}

// refusals are the errors of a run the runtime refuses for what it was
// given: its packs, context, policy or budget.
var refusals = []error{
	pack.ErrUnpinnedRef, pack.ErrInvalid, pack.ErrSignature, pack.ErrIncompatible, pack.ErrNotFound, pack.ErrNotUsable, pack.ErrOverlay,
	compiler.ErrInput, compiler.ErrMerge, compiler.ErrTenant, compiler.ErrConflict, compiler.ErrIntent, compiler.ErrPolicy, compiler.ErrEvidence,
	compiler.ErrBudget, compiler.ErrOverlayVersion, policy.ErrPrepare, policy.ErrEvaluation, policy.ErrBudget,
	runcontext.ErrInvalid, runcontext.ErrConflict, runcontext.ErrClaim, runcontext.ErrBudgetExceeded, runcontext.ErrTraceContext, runcontext.ErrUnknownKey,
	contextos.ErrResumeInput,
}

// viewOf is a run's view from its result.
func (h *Handler) viewOf(tenantID string, res *contextos.Result, seen results) *runView {
	v := &runView{RunID: res.RunID, TenantID: tenantID, State: StateEnded, ToolResults: h.results(res.ToolResults, seen),
		Events: []json.RawMessage{}, PendingApprovals: []*gateway.ApprovalRequest{}}
	h.setRecord(v, res.Record)
	v.Status = res.Status
	if res.Pending != nil {
		v.State = StatePaused
		v.PendingApprovals = append(v.PendingApprovals, res.Pending)
	}
	return v
}

// withEvents is view with e's events; nil when e does not hold the
// run's events from its start.
func (h *Handler) withEvents(e *runEntry, view *runView) *runView {
	e.mu.Lock()
	complete := e.complete
	e.mu.Unlock()
	if !complete {
		return nil
	}
	evs, _, _, _, _ := e.snapshot(0)
	v := *view
	v.Events = evs
	if v.Events == nil {
		v.Events = []json.RawMessage{}
	}
	return &v
}

// getRun answers GET /v1/runs/{run_id}.
func (h *Handler) getRun(w http.ResponseWriter, r *http.Request) {
	r, cancel := h.withTimeout(r)
	defer cancel()
	p, aerr := h.authenticate(r, false)
	if aerr != nil {
		writeProblem(w, aerr)
		return
	}
	v, aerr := h.runOf(r.Context(), p, r.PathValue("run_id"), true)
	if aerr != nil {
		writeProblem(w, aerr)
		return
	}
	writeView(w, http.StatusOK, v)
}

var errNoRun = errorf(http.StatusNotFound, CodeNotFound, "no such run")

// runOf is the run as the caller may see it: while this handler runs it,
// what it has so far; else the view the stores give (they say whether a
// replica continued the run), with this handler's events when it ran the
// run up to the record the stores hold, else the events the stores keep
// (withEvents; without it, the view's events are left empty). A run of
// another tenant is not found.
func (h *Handler) runOf(ctx context.Context, p *Principal, runID string, withEvents bool) (*runView, *apiError) {
	e := h.entry(runID, "", false)
	if e != nil && e.tenantID != p.TenantID {
		e = nil
	}
	var evs []json.RawMessage
	var local *runView
	var failed *apiError
	if e != nil {
		var running bool
		evs, running, local, failed, _ = e.snapshot(0)
		if running {
			return &runView{RunID: runID, TenantID: e.tenantID, State: StateRunning, Record: json.RawMessage("null"), Events: nonNil(evs), ToolResults: []json.RawMessage{},
				PendingApprovals: []*gateway.ApprovalRequest{}}, nil
		}
	}
	v, st, aerr := h.storedView(ctx, p, runID, failed == nil)
	if aerr != nil {
		if aerr == errNoRun && failed != nil {
			return nil, failed // the run never started here: why
		}
		return nil, aerr
	}
	complete := false
	if e != nil {
		e.mu.Lock()
		complete = e.complete
		e.mu.Unlock()
	}
	switch {
	case complete && local != nil && local.RecordID != "" && local.RecordID == v.RecordID:
		v.Events = nonNil(evs)
	case withEvents && st != nil:
		if v.Events, _, aerr = h.storedEvents(ctx, p.TenantID, runID, st.recs, st.entries, st.seen); aerr != nil {
			return nil, aerr
		}
	}
	return v, nil
}

// stored is what the stores keep of a run: its records, in the order
// stored, its transcript, and its results as its view redacted them.
type stored struct {
	recs    []*decision.Record
	entries []gateway.TranscriptEntry
	seen    results
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// storedView builds the run's view from the stores: its records, its
// pending approval and its transcript's results, without its events
// (storedEvents reads them from what it returns; nil for a run with no
// record yet).
//
// A run with no record yet is running when started is set and the ledger
// says the handler or a replica started it.
func (h *Handler) storedView(ctx context.Context, p *Principal, runID string, started bool) (*runView, *stored, *apiError) {
	recs, err := h.stores.Records.List(ctx, decision.Filter{RunID: runID})
	if err != nil {
		return nil, nil, h.storeError("list records", err)
	}
	v := &runView{RunID: runID, TenantID: p.TenantID, Record: json.RawMessage("null"), Events: []json.RawMessage{}, ToolResults: []json.RawMessage{}, PendingApprovals: []*gateway.ApprovalRequest{}}
	if len(recs) == 0 {
		// Started here or on a replica, with no record yet.
		if !started {
			return nil, nil, errNoRun
		}
		raw, ok, err := h.ledger.get(ctx, runKey(p.TenantID, runID))
		if err != nil {
			return nil, nil, h.storeError("read run", err)
		}
		if !ok || raw == nil {
			return nil, nil, errNoRun
		}
		v.State = StateRunning
		return v, nil, nil
	}
	if recs[0].TenantID != p.TenantID {
		return nil, nil, errNoRun
	}
	last := recs[len(recs)-1]
	for _, rec := range recs {
		if rec.Status != decision.Closed {
			last = rec
		}
	}
	h.setRecord(v, last)
	switch v.Status {
	case decision.Deferred:
		v.State = StateRunning // resumed, unless it still awaits its approval
		pend, err := h.rt.PendingApprovals(ctx, contextos.RunList{runID})
		if err != nil {
			return nil, nil, h.storeError("pending approvals", err)
		}
		for _, pa := range pend {
			if pa.RunID == runID && last.Awaiting != nil {
				v.State = StatePaused
				v.PendingApprovals = append(v.PendingApprovals, approvalRequest(pa, last.Awaiting))
			}
		}
	case decision.InFlight:
		v.State = StateRunning
	default:
		v.State = StateEnded
	}
	st := &stored{recs: recs, seen: results{}}
	var found []*gateway.ToolResultEnvelope
	if h.stores.Transcripts != nil {
		if st.entries, err = h.stores.Transcripts.RunEntries(ctx, runID); err != nil {
			return nil, nil, h.storeError("read transcript", err)
		}
		for _, en := range st.entries {
			if en.Kind == "result" && en.Result != nil {
				found = append(found, en.Result)
			}
		}
	}
	v.ToolResults = h.results(found, st.seen)
	return v, st, nil
}

// approvalRequest is the pending approval as the run's result names it.
func approvalRequest(p contextos.PendingApproval, a *decision.Awaiting) *gateway.ApprovalRequest {
	return &gateway.ApprovalRequest{GateID: p.GateID, ApproverRole: p.ApproverRole, TTLSeconds: p.TTLSeconds, ActionDigest: p.ActionDigest,
		EvidenceSnapshotHash: a.EvidenceSnapshotHash, ToolCallID: p.ToolCallID, RequestedAt: p.RequestedAt}
}

func (h *Handler) storeError(what string, err error) *apiError {
	h.o.Logger.Error("store failed", "what", what, "error", err.Error())
	if errors.Is(err, context.DeadlineExceeded) {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "the stores did not answer in time")
	}
	return errorf(http.StatusServiceUnavailable, CodeUnavailable, "the stores did not answer")
}

// keepAlive is how often an idle event stream gets a comment.
const keepAlive = 15 * time.Second

// runEvents answers GET /v1/runs/{run_id}/events as server-sent events:
// the run's events from the start (or after Last-Event-ID), live while
// this handler runs the run, then a result event with the run's view.
func (h *Handler) runEvents(w http.ResponseWriter, r *http.Request) {
	p, aerr := h.authenticate(r, false)
	if aerr != nil {
		writeProblem(w, aerr)
		return
	}
	runID := r.PathValue("run_id")
	from := 0
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		n, err := strconv.Atoi(id)
		if err != nil || n < 0 {
			writeProblem(w, invalid(FieldError{Path: "Last-Event-ID", Code: "header", Message: "must be an event id this stream sent"}))
			return
		}
		from = n + 1
	}
	e := h.entry(runID, "", false)
	var live, held bool
	if e != nil && e.tenantID == p.TenantID {
		e.mu.Lock()
		live, held = e.running, e.complete
		e.mu.Unlock()
	}
	var static *runView
	if !live {
		ctx, cancel := context.WithTimeout(r.Context(), h.o.RequestTimeout)
		v, aerr := h.runOf(ctx, p, runID, true)
		cancel()
		if aerr != nil {
			writeProblem(w, aerr)
			return
		}
		static = v
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's write timeout
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(id int, kind string, data []byte) bool {
		var b strings.Builder
		if id >= 0 {
			fmt.Fprintf(&b, "id: %d\n", id)
		}
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", kind, data)
		if _, err := w.Write([]byte(b.String())); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	sendResult := func(v *runView) {
		x := *v
		x.Events = nil
		b, _ := json.Marshal(x)
		send(-1, string(contextos.EventResult), b)
	}
	sendStatic := func(v *runView) {
		for i := from; i < len(v.Events); i++ {
			if !send(i, eventKind(v.Events[i]), v.Events[i]) {
				return
			}
		}
		sendResult(v)
	}
	sendError := func(aerr *apiError) {
		b, _ := json.Marshal(map[string]any{"code": aerr.Code, "detail": aerr.Detail, "status": aerr.Status})
		send(-1, string(contextos.EventError), b)
	}
	if static != nil {
		sendStatic(static)
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	if !held {
		// The handler runs a part of the run without holding its events
		// before it (a replica ran them, and reading them failed or
		// rebuilt one): the ids of the part's events are not the run's.
		// The stream waits for the part's end and sends the run's events
		// as the stores keep them.
		for {
			_, running, _, _, changed := e.snapshot(math.MaxInt)
			if !running {
				break
			}
			select {
			case <-changed:
			case <-tick.C:
				if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil || rc.Flush() != nil {
					return
				}
			case <-r.Context().Done():
				return
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), h.o.RequestTimeout)
		v, aerr := h.runOf(ctx, p, runID, true)
		cancel()
		if aerr != nil {
			sendError(aerr)
			return
		}
		sendStatic(v)
		return
	}
	next := from
	for {
		evs, running, _, _, changed := e.snapshot(next)
		for _, ev := range evs {
			if !send(next, eventKind(ev), ev) {
				return
			}
			next++
		}
		if !running {
			ctx, cancel := context.WithTimeout(r.Context(), h.o.RequestTimeout)
			v, aerr := h.runOf(ctx, p, runID, false)
			cancel()
			if aerr != nil {
				sendError(aerr)
				return
			}
			sendResult(v)
			return
		}
		select {
		case <-changed:
		case <-tick.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil || rc.Flush() != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// eventKind reads an event's kind.
func eventKind(ev json.RawMessage) string {
	var k struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(ev, &k) != nil || k.Kind == "" || strings.ContainsAny(k.Kind, "\r\n") {
		return "message"
	}
	return k.Kind
}
