package gateway

import (
	"encoding/binary"
	"math"

	"github.com/contextos/contextos/runcontext"
)

// The in-memory stores keep what they hold encoded, in byte slices the
// collector does not scan: a run's transcript entries as struct values
// hold a few dozen pointers each (strings, maps, lists, envelopes), and
// the collector would mark every one of them, for every run kept, on
// every cycle. The encoding is this package's own and is read back only
// by the store that wrote it (a resume, a takeover, a replay capture,
// a test): it gives back exactly the values it was given (nil and empty
// lists and maps told apart, every float's bits), as new maps and lists;
// an entry it cannot give back exactly (a value in args, metadata, output
// or error details that is not JSON-shaped — nil, bool, string, float64,
// map[string]any, []any —, an approval request, whose time carries a
// location) is kept as it is.
//
// Lengths are uvarints; a list or map's length is its length plus one,
// nil being zero; a pointer is a presence byte then its value.

// JSON-shaped value tags.
const (
	tagNil byte = iota
	tagFalse
	tagTrue
	tagString
	tagFloat
	tagObject
	tagArray
)

// maxEncodeDepth bounds the nesting the encoding follows; deeper values
// are kept as they are.
const maxEncodeDepth = 64

// entryEncoder appends encodings to b; ok turns false at the first value
// the encoding cannot give back exactly.
type entryEncoder struct {
	b  []byte
	ok bool
}

// appendEntry appends the encoding of e to b. It reports false (and
// returns b as it was) when e holds what the encoding cannot give back
// exactly.
func appendEntry(b []byte, e *TranscriptEntry) ([]byte, bool) {
	if e.Result != nil && e.Result.Approval != nil {
		return b, false
	}
	w := entryEncoder{b: b, ok: true}
	w.str(e.RunID)
	w.int(int64(e.Seq))
	w.str(e.Kind)
	w.str(e.EntryHash)
	w.str(e.PrevHash)
	w.str(e.ChainHash)
	if w.present(e.Call != nil) {
		w.call(e.Call)
	}
	if w.present(e.Result != nil) {
		w.result(e.Result)
	}
	if !w.ok {
		return b, false
	}
	return w.b, true
}

// appendResult appends the encoding of r (not nil) to b, as appendEntry.
func appendResult(b []byte, r *ToolResultEnvelope) ([]byte, bool) {
	if r.Approval != nil {
		return b, false
	}
	w := entryEncoder{b: b, ok: true}
	w.result(r)
	if !w.ok {
		return b, false
	}
	return w.b, true
}

func (w *entryEncoder) call(c *ToolCallEnvelope) {
	w.str(c.EnvelopeVersion)
	w.str(c.ToolCallID)
	w.str(c.RunID)
	w.str(c.TraceID)
	w.str(c.SessionID)
	w.str(c.CapabilityID)
	w.object(c.Args, 0)
	w.len(len(c.PrincipalChain), c.PrincipalChain == nil)
	for _, p := range c.PrincipalChain {
		w.str(string(p.Kind))
		w.str(p.ID)
		w.str(p.TenantID)
		w.str(p.Display)
	}
	w.str(string(c.ApprovalModeRequested))
	w.str(string(c.ApprovalModeEffective))
	w.str(string(c.ApprovalModeHighest))
	w.optStr(c.PolicyDecisionID)
	w.strs(c.EvidenceRefs)
	w.optStr(c.IdempotencyKey)
	w.optStr(c.AuthRef)
	w.object(c.Metadata, 0)
}

func (w *entryEncoder) result(r *ToolResultEnvelope) {
	w.str(r.EnvelopeVersion)
	w.str(r.ToolCallID)
	w.str(r.RunID)
	w.str(r.TraceID)
	w.str(r.SessionID)
	w.str(r.CapabilityID)
	w.str(string(r.Status))
	w.object(r.Output, 0)
	if w.present(r.Error != nil) {
		w.str(r.Error.Code)
		w.str(r.Error.Reason)
		w.bool(r.Error.Retryable)
		w.str(r.Error.Message)
		w.object(r.Error.Details, 0)
	}
	w.strs(r.Artifacts)
	w.len(len(r.Citations), r.Citations == nil)
	for _, c := range r.Citations {
		w.str(c.EvidenceRef)
	}
	w.strs(r.Mutations)
	w.strs(r.RiskTags)
	w.optStr(r.PolicyDecisionID)
	w.int(r.LatencyMS)
	m := &r.Metadata
	w.str(m.Approver)
	w.str(m.ApprovalID)
	w.str(m.ApprovalGateID)
	w.str(m.ApprovedAt)
	w.str(m.ApprovalEvidenceSnapshotHash)
	w.str(m.ToolTranscriptID)
	w.bool(m.RedactionApplied)
	w.int(int64(m.Retries))
	w.int(int64(m.Attempts))
	w.float(m.CostCents)
	w.int(int64(m.Tokens))
	w.str(m.IdempotencyKey)
	w.bool(m.Duplicate)
	w.strs(m.Signals)
	w.strs(m.EvidenceHashes)
	w.str(m.ToolStatus)
	w.str(m.ToolCode)
	w.str(m.ToolReason)
	if w.present(m.Retryable != nil) {
		w.bool(*m.Retryable)
	}
}

func (w *entryEncoder) str(s string) {
	w.b = append(appendLen(w.b, uint64(len(s))), s...)
}

// appendLen appends n as a uvarint, one byte for the short lengths most
// are without a call.
func appendLen(b []byte, n uint64) []byte {
	if n < 0x80 {
		return append(b, byte(n))
	}
	return binary.AppendUvarint(b, n)
}

func (w *entryEncoder) int(n int64) { w.b = binary.AppendVarint(w.b, n) }

func (w *entryEncoder) float(f float64) {
	w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(f))
}

func (w *entryEncoder) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

// present writes whether a pointer is set and returns it.
func (w *entryEncoder) present(set bool) bool {
	w.bool(set)
	return set
}

// len writes a list or map's length (plus one; nil is zero).
func (w *entryEncoder) len(n int, isNil bool) {
	if isNil {
		w.b = append(w.b, 0)
		return
	}
	w.b = appendLen(w.b, uint64(n)+1)
}

func (w *entryEncoder) optStr(p *string) {
	if w.present(p != nil) {
		w.str(*p)
	}
}

func (w *entryEncoder) strs(l []string) {
	w.len(len(l), l == nil)
	for _, s := range l {
		w.str(s)
	}
}

func (w *entryEncoder) object(m map[string]any, depth int) {
	w.len(len(m), m == nil)
	for k, v := range m {
		w.str(k)
		w.value(v, depth+1)
	}
}

func (w *entryEncoder) value(v any, depth int) {
	if depth > maxEncodeDepth {
		w.ok = false
		return
	}
	switch x := v.(type) {
	case nil:
		w.b = append(w.b, tagNil)
	case bool:
		if x {
			w.b = append(w.b, tagTrue)
		} else {
			w.b = append(w.b, tagFalse)
		}
	case string:
		w.b = append(w.b, tagString)
		w.str(x)
	case float64:
		w.b = append(w.b, tagFloat)
		w.float(x)
	case map[string]any:
		w.b = append(w.b, tagObject)
		w.object(x, depth)
	case []any:
		w.b = append(w.b, tagArray)
		w.len(len(x), x == nil)
		for _, e := range x {
			w.value(e, depth+1)
		}
	default:
		// Not JSON-shaped (an int, a typed nil, a struct): kept as is.
		w.ok = false
	}
}

// entryDecoder reads encodings from s, the store's bytes copied into one
// string: every string it gives back is a part of it (one allocation for
// them all, shared with no store).
type entryDecoder struct {
	s string
	i int
}

func (d *entryDecoder) entry() TranscriptEntry {
	var e TranscriptEntry
	e.RunID = d.str()
	e.Seq = int(d.int())
	e.Kind = d.str()
	e.EntryHash = d.str()
	e.PrevHash = d.str()
	e.ChainHash = d.str()
	if d.bool() {
		e.Call = d.call()
	}
	if d.bool() {
		e.Result = d.result()
	}
	return e
}

func (d *entryDecoder) call() *ToolCallEnvelope {
	c := &ToolCallEnvelope{}
	c.EnvelopeVersion = d.str()
	c.ToolCallID = d.str()
	c.RunID = d.str()
	c.TraceID = d.str()
	c.SessionID = d.str()
	c.CapabilityID = d.str()
	c.Args = d.object()
	if n, ok := d.len(); ok {
		c.PrincipalChain = make([]runcontext.Principal, n)
		for i := range c.PrincipalChain {
			p := &c.PrincipalChain[i]
			p.Kind = runcontext.PrincipalKind(d.str())
			p.ID = d.str()
			p.TenantID = d.str()
			p.Display = d.str()
		}
	}
	c.ApprovalModeRequested = runcontext.ApprovalMode(d.str())
	c.ApprovalModeEffective = runcontext.ApprovalMode(d.str())
	c.ApprovalModeHighest = runcontext.ApprovalMode(d.str())
	c.PolicyDecisionID = d.optStr()
	c.EvidenceRefs = d.strs()
	c.IdempotencyKey = d.optStr()
	c.AuthRef = d.optStr()
	c.Metadata = d.object()
	return c
}

func (d *entryDecoder) result() *ToolResultEnvelope {
	r := &ToolResultEnvelope{}
	r.EnvelopeVersion = d.str()
	r.ToolCallID = d.str()
	r.RunID = d.str()
	r.TraceID = d.str()
	r.SessionID = d.str()
	r.CapabilityID = d.str()
	r.Status = Status(d.str())
	r.Output = d.object()
	if d.bool() {
		te := &ToolError{}
		te.Code = d.str()
		te.Reason = d.str()
		te.Retryable = d.bool()
		te.Message = d.str()
		te.Details = d.object()
		r.Error = te
	}
	r.Artifacts = d.strs()
	if n, ok := d.len(); ok {
		r.Citations = make([]Citation, n)
		for i := range r.Citations {
			r.Citations[i].EvidenceRef = d.str()
		}
	}
	r.Mutations = d.strs()
	r.RiskTags = d.strs()
	r.PolicyDecisionID = d.optStr()
	r.LatencyMS = d.int()
	m := &r.Metadata
	m.Approver = d.str()
	m.ApprovalID = d.str()
	m.ApprovalGateID = d.str()
	m.ApprovedAt = d.str()
	m.ApprovalEvidenceSnapshotHash = d.str()
	m.ToolTranscriptID = d.str()
	m.RedactionApplied = d.bool()
	m.Retries = int(d.int())
	m.Attempts = int(d.int())
	m.CostCents = d.float()
	m.Tokens = int(d.int())
	m.IdempotencyKey = d.str()
	m.Duplicate = d.bool()
	m.Signals = d.strs()
	m.EvidenceHashes = d.strs()
	m.ToolStatus = d.str()
	m.ToolCode = d.str()
	m.ToolReason = d.str()
	if d.bool() {
		v := d.bool()
		m.Retryable = &v
	}
	return r
}

// The reads below trust the bytes: they are the store's own, written by
// the encoder above, and a malformed encoding is a bug (an index out of
// range), not an input.

func (d *entryDecoder) uvarint() uint64 {
	var x uint64
	for shift := 0; ; shift += 7 {
		c := d.s[d.i]
		d.i++
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return x
		}
	}
}

func (d *entryDecoder) str() string {
	n := int(d.uvarint())
	s := d.s[d.i : d.i+n]
	d.i += n
	return s
}

func (d *entryDecoder) int() int64 {
	u := d.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (d *entryDecoder) float() float64 {
	s := d.s[d.i : d.i+8]
	d.i += 8
	return math.Float64frombits(uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56)
}

func (d *entryDecoder) bool() bool {
	v := d.s[d.i] != 0
	d.i++
	return v
}

// len reads a list or map's length; ok false for nil.
func (d *entryDecoder) len() (int, bool) {
	n := d.uvarint()
	if n == 0 {
		return 0, false
	}
	return int(n - 1), true
}

func (d *entryDecoder) optStr() *string {
	if !d.bool() {
		return nil
	}
	s := d.str()
	return &s
}

func (d *entryDecoder) strs() []string {
	n, ok := d.len()
	if !ok {
		return nil
	}
	l := make([]string, n)
	for i := range l {
		l[i] = d.str()
	}
	return l
}

func (d *entryDecoder) object() map[string]any {
	n, ok := d.len()
	if !ok {
		return nil
	}
	m := make(map[string]any, n)
	for range n {
		k := d.str()
		m[k] = d.value()
	}
	return m
}

func (d *entryDecoder) value() any {
	t := d.s[d.i]
	d.i++
	switch t {
	case tagFalse:
		return false
	case tagTrue:
		return true
	case tagString:
		return d.str()
	case tagFloat:
		return d.float()
	case tagObject:
		return d.object()
	case tagArray:
		n, ok := d.len()
		if !ok {
			return []any(nil)
		}
		l := make([]any, n)
		for i := range l {
			l[i] = d.value()
		}
		return l
	}
	return nil
}
