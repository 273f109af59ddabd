package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/contextos/contextos/decision"
)

// maxListRecords bounds GET /v1/records's answer.
const maxListRecords = 1000

// listRecords answers GET /v1/records[?run_id=…][&status=…][&limit=…]:
// the caller's tenant's records, in the order stored (the last limit of
// them; default and most 1000).
func (h *Handler) listRecords(w http.ResponseWriter, r *http.Request) {
	r, cancel := h.withTimeout(r)
	defer cancel()
	p, aerr := h.authenticate(r, false)
	if aerr != nil {
		writeProblem(w, aerr)
		return
	}
	q := r.URL.Query()
	for name := range q {
		switch name {
		case "run_id", "status", "limit":
		default:
			writeProblem(w, invalid(FieldError{Path: clip(name), Code: "unknown_parameter", Message: "is not a parameter of this list (run_id, status, limit)"}))
			return
		}
	}
	f := decision.Filter{TenantID: p.TenantID, RunID: q.Get("run_id")}
	if s := q.Get("status"); s != "" {
		if err := f.Status.UnmarshalText([]byte(s)); err != nil {
			writeProblem(w, invalid(FieldError{Path: "status", Code: "enum", Message: "must be DECIDED, DEFERRED, REJECTED, ESCALATED, IN_FLIGHT or CLOSED"}))
			return
		}
	}
	limit := maxListRecords
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxListRecords {
			writeProblem(w, invalid(FieldError{Path: "limit", Code: "range", Message: "must be an integer from 1 to 1000"}))
			return
		}
		limit = n
	}
	recs, err := h.stores.Records.List(r.Context(), f)
	if err != nil {
		writeProblem(w, h.storeError("list records", err))
		return
	}
	if len(recs) > limit {
		recs = recs[len(recs)-limit:]
	}
	writeJSON(w, http.StatusOK, map[string]any{"records": h.records(recs)})
}

// getRecord answers GET /v1/records/{record_id}: a record of the caller's
// tenant, as stored.
func (h *Handler) getRecord(w http.ResponseWriter, r *http.Request) {
	r, cancel := h.withTimeout(r)
	defer cancel()
	p, aerr := h.authenticate(r, false)
	if aerr != nil {
		writeProblem(w, aerr)
		return
	}
	rec, err := h.stores.Records.Get(r.Context(), r.PathValue("record_id"))
	if errors.Is(err, decision.ErrNotFound) || err == nil && rec.TenantID != p.TenantID {
		writeProblem(w, errorf(http.StatusNotFound, CodeNotFound, "no such record"))
		return
	}
	if err != nil {
		writeProblem(w, h.storeError("get record", err))
		return
	}
	writeJSON(w, http.StatusOK, h.record(rec))
}

// chainReport is what a verification found.
type chainReport struct {
	// Verified is true when every record of the store hashes to its
	// record_hash and links to the one before, and (with run_id) the
	// run's records are among them as stored.
	Verified bool `json:"verified"`
	// RunID is the run whose records were looked at, when one was named.
	RunID string `json:"run_id,omitempty"`
	// Records counts the run's records (with run_id).
	Records int `json:"records,omitempty"`
	// Broken says where the chain breaks: the index in the store and,
	// when it is the caller's tenant's, the record id.
	Broken *brokenLink `json:"broken,omitempty"`
}

type brokenLink struct {
	Index    int    `json:"index"`
	RecordID string `json:"record_id,omitempty"`
	Reason   string `json:"reason"`
}

// verifyRecords answers GET /v1/records/verify[?run_id=…].
func (h *Handler) verifyRecords(w http.ResponseWriter, r *http.Request) {
	r, cancel := h.withTimeout(r)
	defer cancel()
	p, aerr := h.authenticate(r, false)
	if aerr != nil {
		writeProblem(w, aerr)
		return
	}
	for name := range r.URL.Query() {
		if name != "run_id" {
			writeProblem(w, invalid(FieldError{Path: clip(name), Code: "unknown_parameter", Message: "is not a parameter of verify (run_id)"}))
			return
		}
	}
	rep, aerr := h.verify(r.Context(), p, r.URL.Query().Get("run_id"))
	if aerr != nil {
		writeProblem(w, aerr)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// verify verifies the store's record chain and, with runID, that the
// run's records hash to their record_hash. A run of another tenant is not
// found; a broken link is named by its index, and by its record id only
// when the record is the caller's tenant's.
func (h *Handler) verify(ctx context.Context, p *Principal, runID string) (*chainReport, *apiError) {
	rep := &chainReport{Verified: true, RunID: runID}
	if runID != "" {
		recs, err := h.stores.Records.List(ctx, decision.Filter{RunID: runID})
		if err != nil {
			return nil, h.storeError("list records", err)
		}
		if len(recs) == 0 || recs[0].TenantID != p.TenantID {
			return nil, errNoRun
		}
		rep.Records = len(recs)
		for _, rec := range recs {
			if sum, err := decision.Hash(rec); err != nil || sum != rec.RecordHash {
				rep.Verified = false
				rep.Broken = &brokenLink{Index: -1, RecordID: rec.RecordID, Reason: "the record does not hash to its record_hash"}
				return rep, nil
			}
		}
	}
	err := h.stores.Records.Verify(ctx)
	var ce *decision.ChainError
	switch {
	case errors.As(err, &ce):
		rep.Verified = false
		rep.Broken = &brokenLink{Index: ce.Index, Reason: ce.Reason}
		if rec, gerr := h.stores.Records.Get(ctx, ce.RecordID); gerr == nil && rec.TenantID == p.TenantID {
			rep.Broken.RecordID = ce.RecordID
		}
	case err != nil:
		return nil, h.storeError("verify records", err)
	}
	return rep, nil
}
