package server

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/sensitive"
	"github.com/contextos/contextos/internal/sortedkeys"
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

// redaction is how answers are redacted: every built-in rule and the
// host's (a host rule of a built-in name replaces it). The built-in rules
// the host keeps are merged into one rule finding all their kinds in one
// pass (each kind is looked for as by its own rule, and base64-wrapped
// data, which every built-in rule looks into, once instead of once per
// rule); with the secret rule kept, secret-named members are redacted too.
// Rules are deterministic, so what a string redacts to is remembered:
// hashes, ids and names recur across a run's events, results and records.
type redaction struct {
	rules      []func(string) (string, bool)
	secretKeys bool

	mu   sync.Mutex
	memo map[string]memoized
	keys map[string]bool // member names: whether a secret name
}

type memoized struct {
	out     string
	changed bool
}

// Bounds of the memo: strings longer than maxMemoString are not kept, and
// the memo is emptied when it holds maxMemo strings.
const (
	maxMemoString = 512
	maxMemo       = 1 << 14
)

func newRedaction(host map[string]gateway.Redactor) *redaction {
	rd := &redaction{memo: map[string]memoized{}, keys: map[string]bool{}}
	var kinds sensitive.Set
	for _, name := range sensitive.RuleNames() {
		if _, replaced := host[name]; replaced {
			continue
		}
		set, _ := sensitive.Rule(name)
		kinds |= set
		if name == sensitive.SecretRule {
			rd.secretKeys = true
		}
	}
	if kinds != 0 {
		rd.rules = append(rd.rules, func(s string) (string, bool) { return sensitive.Redact(s, kinds) })
	}
	for _, name := range sortedkeys.Of(host) {
		rd.rules = append(rd.rules, host[name])
	}
	return rd
}

// redactString is one round of every rule over s, remembered.
func (rd *redaction) redactString(s string) (string, bool) {
	if len(s) > maxMemoString {
		return rd.apply(s)
	}
	rd.mu.Lock()
	m, ok := rd.memo[s]
	rd.mu.Unlock()
	if ok {
		return m.out, m.changed
	}
	out, changed := rd.apply(s)
	rd.mu.Lock()
	if len(rd.memo) >= maxMemo {
		clear(rd.memo)
	}
	rd.memo[s] = memoized{out, changed}
	rd.mu.Unlock()
	return out, changed
}

func (rd *redaction) apply(s string) (string, bool) {
	changed := false
	for _, r := range rd.rules {
		var c bool
		if s, c = r(s); c {
			changed = true
		}
	}
	return s, changed
}

// changedBytes reports whether a round of the rules changes the string
// b holds, remembered as redactString is.
func (rd *redaction) changedBytes(b []byte) bool {
	if len(b) <= maxMemoString {
		rd.mu.Lock()
		m, ok := rd.memo[string(b)] // no copy for a look-up
		rd.mu.Unlock()
		if ok {
			return m.changed
		}
	}
	_, changed := rd.redactString(string(b))
	return changed
}

// secretKey is sensitive.IsSecretKey of a member name, remembered: names
// recur in every document.
func (rd *redaction) secretKey(name []byte) bool {
	rd.mu.Lock()
	secret, ok := rd.keys[string(name)]
	rd.mu.Unlock()
	if ok {
		return secret
	}
	s := string(name)
	secret = sensitive.IsSecretKey(s)
	if len(s) <= maxMemoString {
		rd.mu.Lock()
		if len(rd.keys) >= maxMemo {
			clear(rd.keys)
		}
		rd.keys[s] = secret
		rd.mu.Unlock()
	}
	return secret
}

// clean reports whether redacting the JSON document b (as value does)
// changes nothing, reading its strings in place: no string or key a rule
// changes, no member a secret name makes redacted, no number long enough
// to hold a card number. It answers false for what it does not read
// (a document that is not valid JSON, an escaped string it cannot
// decode): value then decides.
func (rd *redaction) clean(b []byte) bool {
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			end, escaped := stringEnd(b, i)
			if end < 0 {
				return false
			}
			lit := b[i+1 : end]
			if escaped {
				var s string
				if json.Unmarshal(b[i:end+1], &s) != nil {
					return false
				}
				lit = []byte(s)
			}
			j := end + 1
			for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\n' || b[j] == '\r') {
				j++
			}
			if j < len(b) && b[j] == ':' && rd.secretKeys && rd.secretKey(lit) {
				return false // a member whose value a secret name redacts
			}
			if rd.changedBytes(lit) {
				return false
			}
			i = end + 1
		case c == '-' || c >= '0' && c <= '9':
			// The integer part's digits: ten or more is at least 1e9,
			// which may hold a card number; an exponent is left to value.
			j, digits := i, 0
			if b[j] == '-' {
				j++
			}
			for j < len(b) && b[j] >= '0' && b[j] <= '9' {
				j++
				digits++
			}
			if digits >= 10 {
				return false
			}
			for j < len(b) && (b[j] == '.' || b[j] >= '0' && b[j] <= '9') {
				j++
			}
			if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
				return false
			}
			i = j
		default:
			i++
		}
	}
	return true
}

// stringEnd returns the index of the quote closing the JSON string that
// opens at b[i], and whether it holds an escape; -1 when it is not closed.
func stringEnd(b []byte, i int) (int, bool) {
	escaped := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j, escaped
		}
	}
	return -1, escaped
}

// value redacts a JSON-shaped value (see gateway.RedactValue).
func (rd *redaction) value(v any) (any, bool) {
	return sensitive.RedactValue(v, []func(string) (string, bool){rd.redactString}, rd.secretKeys)
}

// args redacts a pending approval's arguments: a when no rule changes
// them, else the redacted copy.
func (rd *redaction) args(a map[string]any) map[string]any {
	v, changed := rd.value(a)
	if !changed {
		return a
	}
	m, _ := v.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	return m
}

// redactText redacts a text by every rule the handler knows.
func (h *Handler) redactText(s string) string {
	if v, changed := h.redaction.value(s); changed {
		out, _ := v.(string)
		return out
	}
	return s
}

// redactJSON redacts a JSON document by every rule the handler knows.
func (h *Handler) redactJSON(b []byte) json.RawMessage {
	if h.redaction.clean(b) {
		return b
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return json.RawMessage(`{}`)
	}
	if out, changed := h.redaction.value(v); changed {
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
	// The record and the result, redacted on their own, are spliced in
	// (their bytes are not decoded and encoded again).
	raw = bytes.TrimRight(raw, " \t\r\n")
	if len(raw) < 2 || raw[len(raw)-1] != '}' {
		return raw
	}
	out := make([]byte, 0, len(raw)+4096)
	out = append(out, raw[:len(raw)-1]...)
	if rec != nil {
		out = appendMember(out, "record", h.record(rec))
	}
	if res != nil {
		out = appendMember(out, "result", h.result(res, seen))
	}
	return append(out, '}')
}

// appendMember appends the member name: v to the object dst holds open.
func appendMember(dst []byte, name string, v json.RawMessage) []byte {
	if dst[len(dst)-1] != '{' {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return append(dst, v...)
}
