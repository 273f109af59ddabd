package transport

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/contextos/contextos/internal/jsonv"
)

// The request envelope is encoded on every attempt (external, webhook,
// grpc). appendRequest writes it without reflection: exactly the bytes
// json.Marshal writes for the same *Request, member for member and escape
// for escape (TestEnvelopeEncodingIsEncodingJSON,
// FuzzEnvelopeEncodingIsEncodingJSON; TestEnvelopeEncoderKnowsEveryField
// fails when a member is added to Request or the types it holds without
// being added here).

// envelopeSize is the first buffer an envelope is written into: a
// typical request fits, so it is one allocation.
const envelopeSize = 512

// marshalRequest is json.Marshal(r), written by appendRequest.
func marshalRequest(r *Request) ([]byte, error) {
	return appendRequest(make([]byte, 0, envelopeSize), r)
}

// appendRequest appends r's JSON form (json.Marshal's bytes) to b. It
// fails, as json.Marshal does, when the input holds a value with no JSON
// form.
func appendRequest(b []byte, r *Request) ([]byte, error) {
	var err error
	o := object{b: append(b, '{')}
	o.str(`"tool_contract_version":`, r.ToolContractVersion)
	o.str(`"request_id":`, r.RequestID)
	o.str(`"task_id":`, r.TaskID)
	o.str(`"namespace":`, r.Namespace)
	o.str(`"agent":`, r.Agent)
	o.key(`"tool":`)
	o.b = appendTool(o.b, &r.Tool)
	if len(r.Input) > 0 {
		o.key(`"input":`)
		if o.b, err = appendMap(o.b, r.Input, 1); err != nil {
			return nil, err
		}
	}
	o.str(`"input_raw":`, r.InputRaw)
	if rt := r.Runtime; rt != nil {
		o.key(`"runtime":`)
		ro := object{b: append(o.b, '{')}
		ro.str(`"mode":`, rt.Mode)
		ro.int(`"timeout_ms":`, rt.TimeoutMS)
		ro.int(`"max_attempts":`, int64(rt.MaxAttempts))
		ro.str(`"backoff":`, rt.Backoff)
		ro.int(`"max_backoff_ms":`, rt.MaxBackoffMS)
		if rt.Jitter {
			ro.key(`"jitter":`)
			ro.b = append(ro.b, "true"...)
		}
		o.b = append(ro.b, '}')
	}
	if a := r.Auth; a != nil {
		o.key(`"auth":`)
		ao := object{b: append(o.b, '{')}
		ao.str(`"profile":`, a.Profile)
		ao.str(`"secret_ref":`, a.SecretRef)
		ao.strs(`"scopes":`, a.Scopes)
		o.b = append(ao.b, '}')
	}
	if t := r.Trace; t != nil {
		o.key(`"trace":`)
		to := object{b: append(o.b, '{')}
		to.str(`"trace_id":`, t.TraceID)
		to.str(`"span_id":`, t.SpanID)
		o.b = append(to.b, '}')
	}
	o.int(`"attempt":`, int64(r.Attempt))
	o.str(`"idempotency_key":`, r.IdempotencyKey)
	return append(o.b, '}'), nil
}

// appendTool appends the tool member's object (its name is always
// written: it has no omitempty).
func appendTool(b []byte, t *Tool) []byte {
	o := object{b: append(b, '{')}
	o.key(`"name":`)
	o.b = jsonv.AppendString(o.b, t.Name)
	o.str(`"operation":`, t.Operation)
	o.strs(`"capabilities":`, t.Capabilities)
	o.str(`"risk_level":`, t.RiskLevel)
	return append(o.b, '}')
}

// object writes the members of one JSON object, as encoding/json writes
// a struct's: names need no escaping (they are this file's constants,
// given quoted and with their colon), and an omitempty member that is
// empty is left out.
type object struct {
	b    []byte
	more bool // a member was written: the next needs a comma
}

// key writes a member's name, given as it is written: quoted, with its
// colon.
func (o *object) key(name string) {
	if o.more {
		o.b = append(o.b, ',')
	}
	o.more = true
	o.b = append(o.b, name...)
}

// str writes an omitempty string member.
func (o *object) str(name, v string) {
	if v != "" {
		o.key(name)
		o.b = jsonv.AppendString(o.b, v)
	}
}

// int writes an omitempty integer member.
func (o *object) int(name string, v int64) {
	if v != 0 {
		o.key(name)
		o.b = strconv.AppendInt(o.b, v, 10)
	}
}

// strs writes an omitempty []string member.
func (o *object) strs(name string, v []string) {
	if len(v) == 0 {
		return
	}
	o.key(name)
	o.b = append(o.b, '[')
	for i, s := range v {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		o.b = jsonv.AppendString(o.b, s)
	}
	o.b = append(o.b, ']')
}

// maxDirectDepth is how deep appendValue nests before it hands a value to
// json.Marshal, which detects cycles (a map that holds itself).
const maxDirectDepth = 64

// appendValue appends v's JSON form as json.Marshal writes it: the types
// JSON decodes into (and int, int64) directly, any other through
// json.Marshal (whose bytes for a value are the same alone as inside a
// document).
func appendValue(b []byte, v any, depth int) ([]byte, error) {
	if depth > maxDirectDepth {
		return appendMarshal(b, v)
	}
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return jsonv.AppendString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return appendMarshal(b, v) // json.Marshal's error
		}
		return appendFloat(b, x), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case map[string]any:
		if x == nil {
			return append(b, "null"...), nil
		}
		return appendMap(b, x, depth)
	case []any:
		if x == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, e, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	return appendMarshal(b, v)
}

// appendMap appends a non-nil map as json.Marshal does: members in the
// byte order of their names.
func appendMap(b []byte, m map[string]any, depth int) ([]byte, error) {
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonv.AppendString(b, k)
		b = append(b, ':')
		var err error
		if b, err = appendValue(b, m[k], depth+1); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendMarshal appends json.Marshal(v).
func appendMarshal(b []byte, v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, raw...), nil
}

// appendFloat writes a finite float64 as encoding/json does: like
// JavaScript's Number to string, 'e' notation below 1e-6 and from 1e21,
// with a one-digit negative exponent unpadded (1e-7, not 1e-07).
func appendFloat(b []byte, f float64) []byte {
	if f != 0 && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		// A whole number every integer next to which is a float64 too: its
		// shortest form is its digits (0 is left to AppendFloat, which
		// writes -0 as -0).
		return strconv.AppendInt(b, int64(f), 10)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
