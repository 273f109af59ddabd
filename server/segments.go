package server

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
)

// A run's events are kept by segment: the part of the run one start or
// one resume runs, which ends when the run pauses or ends with the
// record it writes (DEFERRED, or DECIDED, REJECTED, ESCALATED). When a
// segment ends, the handler that ran it stores the segment's events —
// the JSON its event stream sent, redacted — as one write-once ledger
// entry keyed by the run and the segment's record id: one store write
// per segment, none per event. Every replica lists the run's records
// anyway, so it derives the keys from them and needs no index: it
// streams a run it did not run (or ran before a restart) as the stored
// segments in order, and rebuilds from the stores (tool results, pause,
// records) only a segment whose entry is missing — the handler stopped
// between the record and the events' entry, or the store refused the
// entry. A replica therefore sends the events the running handler sent,
// byte for byte and with the same ids (an event's id is its index in the
// run's events from the start), for every segment stored.

// EventTruncated is the kind of the event that ends a segment's events
// past the bound (maxSegmentEvents events or maxSegmentBytes bytes):
// the segment keeps its events up to the bound, then this event, and
// drops the rest. The run's record and tool results are complete in its
// view and GET /v1/records.
const EventTruncated = "truncated"

// Bounds of a segment's events, which the handler keeps in memory and
// stores: events past either are replaced by one EventTruncated event.
const (
	maxSegmentEvents = 4096
	maxSegmentBytes  = 1 << 20
)

// segmentWriteTimeout bounds the write of a segment's events.
const segmentWriteTimeout = 10 * time.Second

// segmentKey is the ledger key of the events of the segment of run runID
// that ended with record recordID.
func segmentKey(tenantID, runID, recordID string) string {
	return ledgerKey("events", tenantID, runID, recordID)
}

// truncatedEvent is the event that ends a segment cut at the bound.
func truncatedEvent(runID string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Kind    string `json:"kind"`
		RunID   string `json:"run_id"`
		Message string `json:"message"`
	}{EventTruncated, runID, fmt.Sprintf("the events of this part of the run past %d events or %d bytes are not kept; its record and tool results are complete in the run's view and its records", maxSegmentEvents, maxSegmentBytes)})
	return b
}

// segmentEntry is a segment's events as the ledger keeps them.
type segmentEntry struct {
	RecordID string            `json:"record_id"`
	Events   []json.RawMessage `json:"events"`
}

// encodeSegment encodes a segment's entry; the events are JSON the
// handler encoded and are copied as they are.
func encodeSegment(recordID string, evs []json.RawMessage) json.RawMessage {
	id, _ := json.Marshal(recordID)
	n := len(id) + 32
	for _, ev := range evs {
		n += len(ev) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"record_id":`...)
	b = append(b, id...)
	b = append(b, `,"events":[`...)
	for i, ev := range evs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, ev...)
	}
	return append(b, ']', '}')
}

// storeSegment stores the events of e's segment, which ended with the
// record recordID, as one ledger entry. A failure is logged and nothing
// else: the run is not failed for it, and a replica rebuilds the
// segment's events from the stores.
func (h *Handler) storeSegment(e *runEntry, recordID string) {
	e.mu.Lock()
	evs := e.events[e.segStart:] // the part has ended: nothing appends to them while e runs
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(h.base), segmentWriteTimeout)
	defer cancel()
	_, created, err := h.ledger.putRaw(ctx, segmentKey(e.tenantID, e.runID, recordID), encodeSegment(recordID, evs))
	switch {
	case err != nil:
		h.o.Logger.Error("run events not stored: a replica rebuilds them from the stores", "run_id", e.runID, "record_id", recordID, "error", err.Error())
	case !created:
		h.o.Logger.Warn("run events already stored for this record: the stored ones are kept", "run_id", e.runID, "record_id", recordID)
	}
}

// segment is a part of a run as the stores keep it: the record it ended
// with (nil for the part still going, or stopped before its record), its
// records, and the tool results it got.
type segment struct {
	end     *decision.Record
	recs    []*decision.Record
	results []*gateway.ToolResultEnvelope
}

// endsSegment reports whether a record ends a segment: the record a
// pause or an end writes. IN_FLIGHT records are written within a
// segment, and CLOSED ones after the record of the segment that closes
// them.
func endsSegment(rec *decision.Record) bool {
	switch rec.Status {
	case decision.Deferred, decision.Decided, decision.Rejected, decision.Escalated:
		return true
	}
	return false
}

// segmentsOf splits a run's records (in the order stored) and transcript
// into its segments. A segment's results are the transcript's results up
// to the entry its record names (lineage.tool_transcript_chain_hash),
// after the previous segment's; a record naming an entry the transcript
// does not hold takes every result left.
func segmentsOf(recs []*decision.Record, entries []gateway.TranscriptEntry) []segment {
	pos := make(map[string]int, len(entries))
	for i, en := range entries {
		pos[en.ChainHash] = i + 1
	}
	var out []segment
	var cur segment
	prev := 0
	take := func(to int) {
		for _, en := range entries[prev:to] {
			if en.Kind == "result" && en.Result != nil {
				cur.results = append(cur.results, en.Result)
			}
		}
		prev = to
	}
	for _, rec := range recs {
		if rec.Status == decision.Closed && len(cur.recs) == 0 && len(out) > 0 {
			last := &out[len(out)-1]
			last.recs = append(last.recs, rec)
			continue
		}
		cur.recs = append(cur.recs, rec)
		if !endsSegment(rec) {
			continue
		}
		cur.end = rec
		cut := prev
		if hash := rec.Lineage.ToolTranscriptChainHash; hash != "" && hash != gateway.GenesisHash {
			if i, ok := pos[hash]; ok {
				cut = max(prev, i)
			} else {
				cut = len(entries)
			}
		}
		take(cut)
		out = append(out, cur)
		cur = segment{}
	}
	take(len(entries))
	if len(cur.recs) > 0 || len(cur.results) > 0 {
		out = append(out, cur)
	}
	return out
}

// storedEvents are the events of a run from its start as the stores keep
// them: each segment's stored events, in order, and for a segment with
// none stored its events rebuilt from its results and records. rebuilt
// reports whether a segment that ended was rebuilt: its entry may be
// stored later (the handler that ran it is still writing it), so events
// with a rebuilt segment are not the run's for good.
func (h *Handler) storedEvents(ctx context.Context, tenantID, runID string, recs []*decision.Record, entries []gateway.TranscriptEntry, seen results) (evs []json.RawMessage, rebuilt bool, aerr *apiError) {
	out := []json.RawMessage{}
	for _, seg := range segmentsOf(recs, entries) {
		if seg.end != nil && h.keepEvents {
			evs, ok, aerr := h.segmentEvents(ctx, tenantID, runID, seg.end.RecordID)
			if aerr != nil {
				return nil, false, aerr
			}
			if ok {
				out = append(out, evs...)
				continue
			}
			rebuilt = true
		}
		out = h.rebuildSegment(out, runID, seg, seen)
	}
	return out, rebuilt, nil
}

// segmentEvents reads the stored events of the segment that ended with
// record recordID; ok false when none are stored (or the entry does not
// decode, which is logged).
func (h *Handler) segmentEvents(ctx context.Context, tenantID, runID, recordID string) ([]json.RawMessage, bool, *apiError) {
	raw, ok, err := h.ledger.get(ctx, segmentKey(tenantID, runID, recordID))
	if err != nil {
		return nil, false, h.storeError("read run events", err)
	}
	if !ok {
		return nil, false, nil
	}
	var se segmentEntry
	if err := json.Unmarshal(raw, &se); err != nil || se.RecordID != recordID {
		h.o.Logger.Error("stored run events unreadable: rebuilt from the stores", "run_id", runID, "record_id", recordID)
		return nil, false, nil
	}
	// Redacted again by this handler's rules, as every answer is: the
	// handler that stored them may have had fewer (an older version, a
	// rule added since). Events its rules leave alone keep their bytes.
	for i, ev := range se.Events {
		se.Events[i] = h.redactJSON(ev)
	}
	return se.Events, true, nil
}

// rebuildSegment appends to out the events of a segment the stores keep
// without its events: a tool_result event per result, with a pause and a
// decision event after the paused call's result when the segment ends
// DEFERRED; then a decision event for each of its other records, in the
// order stored. Plans and verdicts are not in the stores.
func (h *Handler) rebuildSegment(out []json.RawMessage, runID string, seg segment, seen results) []json.RawMessage {
	emit := func(ev contextos.Event) {
		ev.RunID = runID
		out = append(out, h.event(ev, seen))
	}
	var paused *decision.Record
	if end := seg.end; end != nil && end.Status == decision.Deferred && end.Awaiting != nil && end.Awaiting.ToolCallID != "" {
		paused = end
	}
	pause := func(rec *decision.Record) {
		a := rec.Awaiting
		emit(contextos.Event{Kind: contextos.EventPause, Pause: &gateway.ApprovalRequest{GateID: a.GateID, ApproverRole: a.ApproverRole, TTLSeconds: a.TTLSeconds,
			ActionDigest: a.ActionDigest, EvidenceSnapshotHash: a.EvidenceSnapshotHash, ToolCallID: a.ToolCallID}})
		emit(contextos.Event{Kind: contextos.EventDecision, Record: rec})
	}
	done := false
	for _, res := range seg.results {
		emit(contextos.Event{Kind: contextos.EventToolResult, Result: res})
		if paused != nil && !done && res.Status == gateway.StatusPaused && res.ToolCallID == paused.Awaiting.ToolCallID {
			pause(paused)
			done = true
		}
	}
	for _, rec := range seg.recs {
		switch {
		case rec != paused:
			emit(contextos.Event{Kind: contextos.EventDecision, Record: rec})
		case !done:
			pause(rec)
		}
	}
	return out
}
