package server

import (
	"encoding/json"
	"sync"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
)

// What the handler answers is redacted by every rule it knows (every
// built-in rule and Options.Redactors), whatever rules a run's packs
// activated: plans and tool calls carry the arguments the planner chose,
// which only the gateway's results redact, and a pack may activate fewer
// rules than the service shows. A record is redacted the same way; one
// that holds nothing to redact (the common case) is shown byte for byte
// as stored, so its record_hash verifies; GET /v1/records/verify checks
// the stored records themselves.

// redacted caches the redacted form of records, which never change, by
// record_hash.
type redacted struct {
	mu      sync.Mutex
	records map[string]json.RawMessage
}

// maxRedactedRecords bounds the cache.
const maxRedactedRecords = 4096

// redactJSON redacts a JSON document by every rule the handler knows.
func (h *Handler) redactJSON(b []byte) json.RawMessage {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return json.RawMessage(`{}`)
	}
	if out, changed := gateway.RedactValue(v, h.rules); changed {
		if rb, err := json.Marshal(out); err == nil {
			return rb
		}
		return json.RawMessage(`{}`)
	}
	return b
}

// record is rec as answers carry it.
func (h *Handler) record(rec *decision.Record) json.RawMessage {
	if rec == nil {
		return nil
	}
	if rec.RecordHash != "" {
		h.cache.mu.Lock()
		raw, ok := h.cache.records[rec.RecordHash]
		h.cache.mu.Unlock()
		if ok {
			return raw
		}
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	raw := h.redactJSON(b)
	if rec.RecordHash != "" {
		h.cache.mu.Lock()
		if len(h.cache.records) >= maxRedactedRecords {
			clear(h.cache.records)
		}
		h.cache.records[rec.RecordHash] = raw
		h.cache.mu.Unlock()
	}
	return raw
}

func (h *Handler) records(recs []*decision.Record) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(recs))
	for _, r := range recs {
		out = append(out, h.record(r))
	}
	return out
}

// results redacts tool results, remembering each in seen (a run's
// results appear in its events and again in its result).
type results map[*gateway.ToolResultEnvelope]json.RawMessage

func (h *Handler) result(r *gateway.ToolResultEnvelope, seen results) json.RawMessage {
	if raw, ok := seen[r]; ok {
		return raw
	}
	b, err := json.Marshal(r)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	raw := h.redactJSON(b)
	if seen != nil {
		seen[r] = raw
	}
	return raw
}

func (h *Handler) results(rs []*gateway.ToolResultEnvelope, seen results) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(rs))
	for _, r := range rs {
		out = append(out, h.result(r, seen))
	}
	return out
}

// event is ev as JSON, redacted; its record and result are redacted (and
// cached) on their own.
func (h *Handler) event(ev contextos.Event, seen results) json.RawMessage {
	rec, res := ev.Record, ev.Result
	ev.Record, ev.Result, ev.Final = nil, nil, nil
	b, err := json.Marshal(ev)
	if err != nil {
		b, _ = json.Marshal(map[string]any{"kind": ev.Kind, "run_id": ev.RunID})
		return b
	}
	raw := h.redactJSON(b)
	if rec == nil && res == nil {
		return raw
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return raw
	}
	if rec != nil {
		m["record"] = h.record(rec)
	}
	if res != nil {
		m["result"] = h.result(res, seen)
	}
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}
