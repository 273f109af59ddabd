package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/runcontext"
)

// marshalCheckpoint writes st's JSON: the bytes json.Marshal(st) writes
// (a checkpoint written here reads as every earlier one does, and the
// test holds the two to the same bytes), with the run's request and run
// context encoded once per run rather than once per save. A run saves
// its checkpoint at its claim and at its end (and more often when it is
// long_running), and those two members are about half of every save.
//
// The cache is keyed by the pointers: a run's request and run context
// are never changed in place (a resume with a new budget replaces the
// run context).
func marshalCheckpoint(st *checkpointState) ([]byte, error) {
	w := checkpointBufs.Get().(*objectWriter)
	defer func() {
		if cap(w.b) <= maxCheckpointBuf {
			clear(w.keys)
			w.b, w.err, w.keys = w.b[:0], nil, w.keys[:0]
			checkpointBufs.Put(w)
		}
	}()
	w.str("run_id", st.RunID)
	if st.Active {
		w.key("active")
		w.b = append(w.b, "true"...)
	}
	w.key("request")
	st.enc.request(w, st.Request)
	w.key("run_context")
	st.enc.runContext(w, st.Run, &st.enc.rc, &st.enc.rcJSON)
	if st.LedgerPacks != "" {
		w.str("ledger_packs", st.LedgerPacks)
	}
	w.int("turn", st.Turn)
	w.int("replans", st.Replans)
	w.key("plan")
	w.plan(st.Plan)
	w.int("step_index", st.StepIndex)
	w.key("results")
	w.results(st.Results)
	w.key("usage")
	w.planUsage(&st.Usage)
	w.key("meter_usage")
	w.meterUsage(&st.MeterUsage)
	w.str("started_at", st.StartedAt)
	if st.Pending != nil {
		w.value("pending", &st.Pending)
	}
	if st.Deferred != "" {
		w.str("deferred_record_id", st.Deferred)
	}
	if len(st.Open) > 0 {
		w.key("open_record_ids")
		w.strings(st.Open)
	}
	if st.InFlight != "" {
		w.str("in_flight_record_id", st.InFlight)
	}
	if st.LeaseUntil != "" {
		w.str("lease_until", st.LeaseUntil)
	}
	w.key("plans")
	w.plans(st.Plans)
	w.int("seq", st.Seq)
	if st.Terminal {
		w.key("terminal")
		w.b = append(w.b, "true"...)
	}
	w.key("chain")
	w.chain(&st.Chain)
	if len(st.Outcomes) > 0 {
		w.key("outcomes")
		w.outcomes(st.Outcomes)
	}
	if len(st.Clock) > 0 {
		w.times("clock", st.Clock)
	}
	if len(st.Resumes) > 0 {
		w.value("resumes", &st.Resumes)
	}
	if len(st.Denials) > 0 {
		w.value("denials", &st.Denials)
	}
	if st.Stopped != "" {
		w.str("stopped", st.Stopped)
	}
	if st.Origin != nil {
		w.key("origin_run_context")
		st.enc.runContext(w, st.Origin, &st.enc.org, &st.enc.orgJSON)
	}
	w.int("planner_calls", st.PlannerCalls)
	if len(st.PlannerErrors) > 0 {
		w.value("planner_errors", &st.PlannerErrors)
	}
	w.int("checks", st.Checks)
	if len(st.Interrupts) > 0 {
		w.value("interrupts", &st.Interrupts)
	}
	if len(st.StoreFailures) > 0 {
		w.value("store_failures", &st.StoreFailures)
	}
	if st.Unconfirmed != nil {
		w.value("unconfirmed_record", &st.Unconfirmed)
	}
	if st.Points != 0 {
		w.int("points", st.Points)
	}
	if len(st.Priors) > 0 {
		w.value("prior_results", &st.Priors)
	}
	if st.InputsLost {
		w.key("inputs_lost")
		w.b = append(w.b, "true"...)
	}
	st.enc.cut = len(w.b)
	if st.SpentSincePoint != nil {
		w.key("spent_since_point")
		w.spent(st.SpentSincePoint)
	}
	if st.CallInProgress != nil {
		w.key("call_in_progress")
		w.callInProgress(st.CallInProgress)
	}
	if len(st.FailedSincePoint) > 0 {
		w.value("store_failures_since_point", &st.FailedSincePoint)
	}
	w.b = append(w.b, '}')
	if verifyCheckpointEncoding.Load() {
		checkEncoding(st, w.b, w.err)
	}
	if w.err != nil {
		st.enc.settle(nil)
		return nil, w.err
	}
	out := bytes.Clone(w.b)
	st.enc.settle(out)
	return out, nil
}

// checkpointBufs pools marshalCheckpoint's writers (their buffers); one
// whose buffer grew past maxCheckpointBuf is left to the collector.
var checkpointBufs = sync.Pool{New: func() any { return &objectWriter{b: make([]byte, 0, 8<<10)} }}

const maxCheckpointBuf = 256 << 10

// appendWriter appends what is written to a byte slice.
type appendWriter struct{ b *[]byte }

func (a appendWriter) Write(p []byte) (int, error) {
	*a.b = append(*a.b, p...)
	return len(p), nil
}

// verifyCheckpointEncoding is VerifyCheckpointEncoding's switch.
var verifyCheckpointEncoding atomic.Bool

// checkEncoding panics when b is not json.Marshal(st)'s bytes, or err not
// its error.
func checkEncoding(st *checkpointState, b []byte, err error) {
	want, werr := json.Marshal(st)
	if (err == nil) != (werr == nil) || err == nil && !bytes.Equal(b, want) {
		panic(fmt.Sprintf("contextos: checkpoint of %s encoded as\n%s (%v)\njson.Marshal writes\n%s (%v)", st.RunID, b, err, want, werr))
	}
}

// checkpointCache keeps the JSON of a run's request, run context and
// original run context between its checkpoint saves (marshalCheckpoint).
type checkpointCache struct {
	// cut is where the last encoding's spent_since_point member starts
	// (or its closing brace): checkpointState.cut.
	cut     int
	req     *runcontext.InvokeRequest
	rc, org *runcontext.RunContext
	reqJSON []byte
	rcJSON  []byte
	orgJSON []byte
	// pending are the members an encoding wrote into its (pooled)
	// buffer and keeps: settle points each at its bytes in the
	// encoding's own copy, the Data a save sends, which nothing writes to
	// (a store keeps a copy of it, and the runtime reads it back as the
	// state it last saved: checkpointState.saved), rather than copy them
	// once more.
	pending [3]pendingMember
	npend   int
}

// pendingMember is a member's JSON kept from the encoding in progress:
// *dst is set to its bytes, from to to, in the encoding's copy.
type pendingMember struct {
	dst      *[]byte
	from, to int
}

// keep marks w.b[from:] as the JSON *dst keeps.
func (c *checkpointCache) keep(dst *[]byte, w *objectWriter, from int) {
	c.pending[c.npend] = pendingMember{dst: dst, from: from, to: len(w.b)}
	c.npend++
}

// settle points the members kept from the encoding at their bytes in
// out, its copy; nil out (a failed encoding) forgets them.
func (c *checkpointCache) settle(out []byte) {
	for _, p := range c.pending[:c.npend] {
		if out == nil {
			*p.dst = nil
			continue
		}
		*p.dst = out[p.from:p.to:p.to]
	}
	if out == nil && c.npend > 0 {
		c.req, c.rc, c.org = nil, nil, nil
	}
	c.pending, c.npend = [3]pendingMember{}, 0
}

// request writes the request member's value: the JSON kept from an
// earlier save of r, or r's JSON, written into the checkpoint and kept.
func (c *checkpointCache) request(w *objectWriter, r *runcontext.InvokeRequest) {
	switch {
	case r == nil:
		w.null()
	case r == c.req:
		w.b = append(w.b, c.reqJSON...)
	default:
		mark := len(w.b)
		if len(r.Extensions) == 0 && w.plain(func() { w.request(r) }) {
			c.req = r
			c.keep(&c.reqJSON, w, mark)
			return
		}
		b, err := r.MarshalJSON()
		if err != nil {
			w.fail(&json.MarshalerError{Type: reflect.TypeFor[*runcontext.InvokeRequest](), Err: err})
			w.null()
			return
		}
		c.req, c.reqJSON = r, b
		w.b = append(w.b, b...)
	}
}

// runContext writes rc's JSON as request does r's, kept in *at for the
// pointer *key.
func (c *checkpointCache) runContext(w *objectWriter, rc *runcontext.RunContext, key **runcontext.RunContext, at *[]byte) {
	switch {
	case rc == nil:
		w.null()
	case rc == *key:
		w.b = append(w.b, *at...)
	default:
		mark := len(w.b)
		if len(rc.Extensions) == 0 && w.plain(func() { w.runContext(rc) }) {
			*key = rc
			c.keep(at, w, mark)
			return
		}
		b, err := rc.MarshalJSON()
		if err != nil {
			w.fail(&json.MarshalerError{Type: reflect.TypeFor[*runcontext.RunContext](), Err: err})
			w.null()
			return
		}
		*key, *at = rc, b
		w.b = append(w.b, b...)
	}
}

// objectWriter writes a JSON object's members as encoding/json writes a
// struct's: keys in order, values as json.Marshal writes them.
type objectWriter struct {
	b    []byte
	enc  *json.Encoder // writes to b; made when first needed
	err  error
	keys []string // the writer's scratch for sorting map keys (object)
}

func (w *objectWriter) key(k string) {
	if len(w.b) == 0 {
		w.b = append(w.b, '{')
	} else {
		w.b = append(w.b, ',')
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

func (w *objectWriter) int(k string, v int) {
	w.key(k)
	w.b = strconv.AppendInt(w.b, int64(v), 10)
}

// str writes a string member as encoding/json does (jsonv.AppendString).
func (w *objectWriter) str(k, s string) {
	w.key(k)
	w.b = jsonv.AppendString(w.b, s)
}

// times writes a list of times as json.Marshal does: each as its
// MarshalJSON writes it, quoted RFC 3339 with sub-second precision
// (AppendText's bytes; encoding/json's compaction leaves them as they
// are: digits, "-", ":", ".", "T", "Z" and "+"), without the reflection
// and the compaction. A time that has no such form is left to
// json.Marshal, for its error.
func (w *objectWriter) times(k string, ts []time.Time) {
	w.key(k)
	if ts == nil {
		w.b = append(w.b, "null"...)
		return
	}
	mark := len(w.b)
	w.b = append(w.b, '[')
	for i, t := range ts {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		b, err := t.AppendText(append(w.b, '"'))
		if err != nil {
			w.b = w.b[:mark]
			bad := ts // on the heap only for a time with no JSON form
			w.marshal(&bad)
			return
		}
		w.b = append(b, '"')
	}
	w.b = append(w.b, ']')
}

// value writes *v, given by pointer so methods on pointer receivers apply
// as they do to an addressable struct field.
func (w *objectWriter) value(k string, v any) {
	w.key(k)
	w.marshal(v)
}

// marshal appends json.Marshal(v): the encoder writes the same bytes
// and a newline, or nothing when it fails.
func (w *objectWriter) marshal(v any) {
	if w.enc == nil {
		w.enc = json.NewEncoder(appendWriter{&w.b})
	}
	if err := w.enc.Encode(v); err != nil {
		w.fail(err)
		return
	}
	w.b = w.b[:len(w.b)-1]
}

// fail keeps the first error.
func (w *objectWriter) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}
