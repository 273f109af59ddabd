package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/gatewayhook"
	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/internal/sensitive"
	"github.com/contextos/contextos/internal/storefail"
	"github.com/contextos/contextos/policy"
)

func init() {
	gatewayhook.ObserveShared = func(opts, observe any) {
		opts.(*RunOptions).observeShared = observe.(func(Attempt))
	}
	gatewayhook.SaveSpent = func(opts, saver any) {
		opts.(*RunOptions).saver = saver.(spendSaver)
	}
	gatewayhook.StoreFailed = func(opts, notify any) {
		opts.(*RunOptions).storeFailed = notify.(func(context.Context, storefail.StoreFailure) error)
	}
	gatewayhook.WithPolicy = func(cfg, eval any) {
		cfg.(*RunConfig).policy, _ = eval.(*policy.Evaluation)
	}
	gatewayhook.Owned = func(cfg any) {
		cfg.(*RunConfig).owned = true
	}
}

// Attempt is one adapter attempt as the gateway took it, reported to
// RunOptions.Observe after the gateway checked and redacted it: what a
// recorder keeps (a replay packet, a checkpoint) is never the adapter's
// raw value. Neither Outcome nor Error is set when the adapter panicked;
// Invalid names what made an outcome one the gateway refused, and Outcome
// then holds only its valid cost and tokens. Both are set for a failed
// attempt that spent something: Outcome then holds only that cost and
// those tokens.
type Attempt struct {
	RunID        string
	ToolCallID   string
	CapabilityID string
	// Attempt counts from 1.
	Attempt int
	// Outcome is the adapter's outcome, redacted, when the gateway took
	// it; for an outcome refused as Invalid or a failed attempt, only what
	// the attempt spent (CostCents and Tokens, when valid).
	Outcome *Outcome
	// Error is the attempt's failure, redacted: the adapter's (bounded by
	// max_payload_bytes) or the gateway's (a timeout, an outcome larger
	// than max_payload_bytes, no outcome).
	Error *ToolError
	// Panicked reports an adapter that panicked (its value is not kept).
	Panicked bool
	// Invalid names what made the outcome one the gateway refused:
	// "output" (a number that is not finite, an integer beyond
	// ±(2^53−1), or no JSON form), "cost_cents" (a cost that is not a
	// number of cents from 0 to 2^53−1) or "tokens" (a count that is
	// negative or above 2^53−1).
	Invalid []string
	// Canceled reports that the caller's context was done when the attempt
	// returned: the gateway made no further attempt.
	Canceled bool
	// Redacted reports that redaction changed the outcome or the error (or
	// that the adapter reported it had: see redactionReporter).
	Redacted bool
}

// copied returns a copy of a that shares nothing with what the gateway
// holds (the call's result and transcript entry are built from it).
func (a Attempt) copied() Attempt {
	if o := a.Outcome; o != nil {
		c := *o
		if c.Output != nil {
			c.Output = jsonv.CloneObject(c.Output)
		}
		c.Mutations, c.Artifacts, c.RiskTags, c.Signals = slices.Clone(c.Mutations), slices.Clone(c.Artifacts), slices.Clone(c.RiskTags), slices.Clone(c.Signals)
		c.Citations = slices.Clone(c.Citations)
		a.Outcome = &c
	}
	if e := a.Error; e != nil {
		c := *e
		if c.Details != nil {
			c.Details = jsonv.CloneObject(c.Details)
		}
		a.Error = &c
	}
	a.Invalid = slices.Clone(a.Invalid)
	return a
}

// redactionReporter is an optional, module-internal interface of an Adapter whose outcomes
// were redacted before it serves them (replay's playback serves recorded,
// already redacted outcomes): RedactedAttempt reports that redaction
// changed the attempt's outcome or error when it was recorded, so the
// result's metadata.redaction_applied is what the recorded run's was. The
// gateway still redacts what the adapter returns (redaction is
// idempotent); a report only ever sets the flag.
type redactionReporter interface {
	RedactedAttempt(call *Call) bool
}

func reportsRedaction(ad Adapter, call *Call) bool {
	rr, ok := ad.(redactionReporter)
	return ok && rr.RedactedAttempt(call)
}

// takenOutcome is the gateway's redacted copy of an outcome, with room for
// its short lists (see redactOutcome).
type takenOutcome struct {
	out  Outcome
	strs [2]string
}

// redactOutcome writes a redacted copy of out to dst: every member an
// adapter supplies text in (output values and keys, mutations, artifacts,
// citations, risk tags, signals) goes through the rules. The copy owns its
// lists (short ones in dst's room); the cost and tokens are kept as they
// are.
//
// clean, when known, is cleanSet of rules: an outcome in which none of its
// detectors finds anything (cleanValue, cleanStrings) is copied as it is
// (its output normalized), which is what the rules would return: the same
// copy, one detection pass over each string instead of one per rule.
func redactOutcome(dst *takenOutcome, out *Outcome, rules []Redactor, clean sensitive.Set, known bool) bool {
	changed, _ := redactOutcomeFlat(dst, out, rules, clean, known)
	return changed
}

// redactOutcomeFlat is redactOutcome, and reports too whether the copy's
// output is a non-nil object whose members are all JSON scalars (nil,
// bool, string, float64), so that a copy of that map is a deep copy. It is
// false whenever that is not known (an outcome redacted rule by rule).
func redactOutcomeFlat(dst *takenOutcome, out *Outcome, rules []Redactor, clean sensitive.Set, known bool) (changed, flat bool) {
	c := &dst.out
	*c = Outcome{CostCents: out.CostCents, Tokens: out.Tokens}
	if known {
		if isClean, scalars := cleanOutcomeFlat(out, clean); isClean {
			if scalars {
				// cleanOutcomeFlat has looked at every member: the map's own
				// copy is what jsonv.Normalize returns for it.
				c.Output = maps.Clone(out.Output)
			} else {
				c.Output, _ = jsonv.Normalize(out.Output).(map[string]any)
			}
			room := dst.strs[:]
			c.Mutations, c.Artifacts = copyStrings(out.Mutations, &room), copyStrings(out.Artifacts, &room)
			c.RiskTags, c.Signals = copyStrings(out.RiskTags, &room), copyStrings(out.Signals, &room)
			if len(out.Citations) > 0 {
				c.Citations = make([]Citation, len(out.Citations))
				copy(c.Citations, out.Citations)
			}
			return false, scalars
		}
	}
	v, changed := redactValue(out.Output, rules)
	c.Output, _ = v.(map[string]any)
	var ch [5]bool
	room := dst.strs[:]
	c.Mutations, ch[0] = redactStrings(out.Mutations, rules, &room)
	c.Artifacts, ch[1] = redactStrings(out.Artifacts, rules, &room)
	c.RiskTags, ch[2] = redactStrings(out.RiskTags, rules, &room)
	c.Signals, ch[3] = redactStrings(out.Signals, rules, &room)
	if len(out.Citations) > 0 {
		c.Citations = make([]Citation, len(out.Citations))
		for i, ct := range out.Citations {
			var cc bool
			c.Citations[i].EvidenceRef, cc = redactString(ct.EvidenceRef, rules)
			ch[4] = ch[4] || cc
		}
	}
	return changed || ch[0] || ch[1] || ch[2] || ch[3] || ch[4], false
}

// cleanOutcome reports whether redaction by rules of cleanSet set changes
// nothing in out (see redactOutcome).
func cleanOutcome(out *Outcome, set sensitive.Set) bool {
	clean, _ := cleanOutcomeFlat(out, set)
	return clean
}

// cleanOutcomeFlat is cleanOutcome, and reports too, when out is clean,
// whether its output is a non-nil object whose members are all JSON
// scalars (jsonv.Flat): one look at each member for both.
func cleanOutcomeFlat(out *Outcome, set sensitive.Set) (clean, flat bool) {
	if flat, clean = cleanObject(out.Output, set); !clean {
		return false, false
	}
	for _, s := range [...][]string{out.Mutations, out.Artifacts, out.RiskTags, out.Signals} {
		if !cleanStrings(s, set) {
			return false, false
		}
	}
	for _, ct := range out.Citations {
		if !cleanString(ct.EvidenceRef, set) {
			return false, false
		}
	}
	return true, flat
}

// copyStrings is redactStrings of a list no rule changes: a copy of s
// (nil for an empty s), in what is left of room when it fits.
func copyStrings(s []string, room *[]string) []string {
	if len(s) == 0 {
		return nil
	}
	return takeStrings(room, s)
}

// redactStrings returns a redacted copy of s (nil for an empty s), in what
// is left of room when it fits (see takeStrings).
func redactStrings(s []string, rules []Redactor, room *[]string) ([]string, bool) {
	if len(s) == 0 {
		return nil, false
	}
	out := takeStrings(room, s)
	changed := false
	for i, e := range s {
		var c bool
		out[i], c = redactString(e, rules)
		changed = changed || c
	}
	return out, changed
}

// redactError redacts a tool error in place (the gateway's own copy):
// its code, reason, message and details.
func redactError(te *ToolError, rules []Redactor) bool {
	var ch [4]bool
	te.Code, ch[0] = redactString(te.Code, rules)
	te.Reason, ch[1] = redactString(te.Reason, rules)
	te.Message, ch[2] = redactString(te.Message, rules)
	if len(te.Details) > 0 {
		v, c := redactValue(te.Details, rules)
		te.Details, _ = v.(map[string]any)
		if te.Details == nil {
			te.Details = map[string]any{}
		}
		ch[3] = c
	}
	return ch[0] || ch[1] || ch[2] || ch[3]
}

// maxNesting bounds how deep an adapter's output or error details nest,
// as the canonical encoder bounds what it reads (an in-process adapter can
// even return a map that contains itself).
const maxNesting = 1000

// sizeVerdict is what measuring a value found.
type sizeVerdict int

const (
	sizeOK        sizeVerdict = iota
	sizeTooLarge              // its JSON form is larger than the limit
	sizeTooDeep               // it nests deeper than maxNesting
	sizeNotFinite             // it holds a number that is not finite or an integer beyond ±(2^53−1), or has no JSON form
)

// meter measures the JSON form of adapter-supplied values without
// encoding them, and stops as soon as they are over its limit.
type meter struct {
	left    int64 // bytes left; meaningful only while limited
	limited bool
}

func newMeter(max int64) meter { return meter{left: max, limited: max > 0} }

func (m *meter) add(n int) sizeVerdict {
	if !m.limited {
		return sizeOK
	}
	if m.left -= int64(n); m.left < 0 {
		return sizeTooLarge
	}
	return sizeOK
}

// str charges a JSON string: its quotes, its bytes and their escapes.
func (m *meter) str(s string) sizeVerdict {
	if !m.limited {
		return sizeOK
	}
	n := len(s) + 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				n++
			case c < 0x20:
				n += 5
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			n += 2 // written as U+FFFD, three bytes
		}
		i += size
	}
	return m.add(n)
}

func (m *meter) strs(s []string) sizeVerdict {
	for _, e := range s {
		if v := m.str(e); v != sizeOK {
			return v
		}
		if v := m.add(1); v != sizeOK {
			return v
		}
	}
	return sizeOK
}

func (m *meter) float(f float64) sizeVerdict {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return sizeNotFinite
	}
	if !m.limited {
		return sizeOK
	}
	var buf [32]byte
	b, _ := canon.AppendFloat(buf[:0], f) // finite: cannot fail
	return m.add(len(b))
}

// value charges v (as jsonv.Finite reads it: JSON shapes, Go numbers,
// json.Number, and other values through their JSON form).
func (m *meter) value(v any, depth int) sizeVerdict {
	if depth > maxNesting {
		return sizeTooDeep
	}
	switch x := v.(type) {
	case nil:
		return m.add(4)
	case bool:
		return m.add(5)
	case string:
		return m.str(x)
	case float64:
		return m.float(x)
	case float32:
		return m.float(float64(x))
	case int:
		return m.int(int64(x))
	case int64:
		return m.int(x)
	case int32:
		return m.int(int64(x))
	case uint:
		return m.uint(uint64(x))
	case uint64:
		return m.uint(x)
	case uint32:
		return m.uint(uint64(x))
	case json.Number:
		if !jsonv.Finite(x) {
			return sizeNotFinite
		}
		return m.add(len(x))
	case map[string]any:
		if x == nil {
			return m.add(4) // written as null
		}
		if v := m.add(2); v != sizeOK {
			return v
		}
		for k, e := range x {
			if v := m.str(k); v != sizeOK {
				return v
			}
			if v := m.add(2); v != sizeOK {
				return v
			}
			if v := m.value(e, depth+1); v != sizeOK {
				return v
			}
		}
		return sizeOK
	case []any:
		if x == nil {
			return m.add(4) // written as null
		}
		if v := m.add(2); v != sizeOK {
			return v
		}
		for _, e := range x {
			if v := m.value(e, depth+1); v != sizeOK {
				return v
			}
			if v := m.add(1); v != sizeOK {
				return v
			}
		}
		return sizeOK
	case []string:
		if x == nil {
			return m.add(4) // written as null
		}
		if v := m.add(2); v != sizeOK {
			return v
		}
		return m.strs(x)
	case []float64:
		if x == nil {
			return m.add(4) // written as null
		}
		for _, e := range x {
			if v := m.float(e); v != sizeOK {
				return v
			}
		}
		return m.add(2 + len(x))
	case map[string]float64:
		if x == nil {
			return m.add(4) // written as null
		}
		for k, e := range x {
			if v := m.str(k); v != sizeOK {
				return v
			}
			if v := m.float(e); v != sizeOK {
				return v
			}
		}
		return m.add(2 + 2*len(x))
	}
	// Any other Go value goes through its canonical form (which refuses
	// NaN, integers beyond ±(2^53−1), cycles and what cannot be encoded).
	b, err := canon.JSON(v)
	if err != nil {
		return sizeNotFinite
	}
	return m.add(len(b))
}

// int charges an integer; one beyond ±(2^53−1) has no exact JSON form in
// a record (see canon.MaxSafeInteger).
func (m *meter) int(i int64) sizeVerdict {
	if i > canon.MaxSafeInteger || i < -canon.MaxSafeInteger {
		return sizeNotFinite
	}
	if !m.limited {
		return sizeOK
	}
	var buf [24]byte
	return m.add(len(strconv.AppendInt(buf[:0], i, 10)))
}

func (m *meter) uint(u uint64) sizeVerdict {
	if u > canon.MaxSafeInteger {
		return sizeNotFinite
	}
	if !m.limited {
		return sizeOK
	}
	var buf [24]byte
	return m.add(len(strconv.AppendUint(buf[:0], u, 10)))
}

// checkOutcome returns the error of an outcome the gateway refuses, and
// the fields it names when the outcome is invalid (as opposed to too
// large): one whose cost is not a number of cents from 0 to 2^53−1; whose
// tokens are negative or above 2^53−1; whose output holds a
// number that is not finite, an integer beyond ±(2^53−1), or a value
// that has no JSON form; whose output nests deeper
// than the gateway reads; or whose members together are larger than
// max_payload_bytes (max; ≤ 0: unbounded). An outcome is measured, not
// encoded, and measuring stops at the limit. Messages name the field and
// the limit, never a value.
func checkOutcome(out *Outcome, max int64) (*ToolError, []string) {
	if !validCost(out.CostCents) {
		return NewToolError(CodeExecutionFailed, false, "the adapter returned an invalid outcome: cost_cents must be a number from 0 to 2^53−1", map[string]any{"field": "cost_cents"}), []string{"cost_cents"}
	}
	if !validTokens(out.Tokens) {
		return NewToolError(CodeExecutionFailed, false, "the adapter returned an invalid outcome: tokens must be a count from 0 to 2^53−1", map[string]any{"field": "tokens"}), []string{"tokens"}
	}
	m := newMeter(max)
	v := m.value(out.Output, 0)
	for _, s := range [][]string{out.Mutations, out.Artifacts, out.RiskTags, out.Signals} {
		if v == sizeOK {
			v = m.strs(s)
		}
	}
	for i := 0; v == sizeOK && i < len(out.Citations); i++ {
		v = m.str(out.Citations[i].EvidenceRef)
	}
	switch v {
	case sizeNotFinite:
		return NewToolError(CodeExecutionFailed, false, "the adapter returned an invalid outcome: its output holds a number that is not finite (NaN or ±Inf) or an integer beyond ±(2^53−1)", map[string]any{"field": "output"}), []string{"output"}
	case sizeTooDeep:
		return NewToolError(CodeExecutionFailed, false, fmt.Sprintf("the adapter returned an outcome whose output nests deeper than %d levels; it was not kept", maxNesting),
			map[string]any{"field": "output", "max_depth": maxNesting}), nil
	case sizeTooLarge:
		return NewToolError(CodeExecutionFailed, false, fmt.Sprintf("the adapter returned an outcome larger than max_payload_bytes (%d); it was not kept", max),
			map[string]any{"max_payload_bytes": max}), nil
	}
	return nil, nil
}

// boundError returns te when its code, reason, message and details fit
// max_payload_bytes (max; ≤ 0: unbounded) and its details have a JSON
// form; otherwise an error in its place that keeps only its code (when it
// is a Tool Contract code) and whether it is retryable, and names the
// limit it broke, never a value.
func boundError(te *ToolError, max int64) *ToolError {
	m := newMeter(max)
	v := m.str(te.Code)
	for _, s := range []string{te.Reason, te.Message} {
		if v == sizeOK {
			v = m.str(s)
		}
	}
	if v == sizeOK && te.Details != nil {
		v = m.value(te.Details, 0)
	}
	if v == sizeOK {
		return te
	}
	code := te.Code
	if ReasonFor(code) == "" {
		code = CodeExecutionFailed
	}
	switch v {
	case sizeTooLarge:
		return NewToolError(code, te.Retryable, fmt.Sprintf("the adapter returned an error larger than max_payload_bytes (%d); its message and details were not kept", max),
			map[string]any{"max_payload_bytes": max})
	case sizeTooDeep:
		return NewToolError(code, te.Retryable, fmt.Sprintf("the adapter returned an error whose details nest deeper than %d levels; its message and details were not kept", maxNesting),
			map[string]any{"field": "details", "max_depth": maxNesting})
	}
	return NewToolError(code, te.Retryable, "the adapter returned an error whose details hold a number that is not finite or an integer beyond ±(2^53−1), or have no JSON form; its message and details were not kept",
		map[string]any{"field": "details"})
}

// orEmpty returns s, or an empty list for nil: results always carry their
// lists.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
