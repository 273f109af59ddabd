package transport

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/contextos/contextos/gateway"
)

// NewHandler serves ex as a Tool Contract v1 endpoint for the external
// and webhook transports (the server side a host uses to expose its own
// tools): it takes a POSTed request envelope and answers 200 with the
// response ServeJSON gives, in its wire form (see Response). A response
// that cannot be written (its output has no JSON form) is answered with a
// non-retryable execution_failed instead, so a peer never repeats a call
// that ran because its reply did not arrive.
func NewHandler(ex Executor) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST a Tool Contract v1 request", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		resp := ServeJSON(r.Context(), ex, body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(headerContractVersion, ContractVersion)
		enc := json.NewEncoder(w)
		if encodeWire(enc, resp) != nil {
			// Nothing was written: the encoder writes a document only once
			// it is whole.
			enc.Encode(unwritable(resp))
		}
	})
}

// encodeWire writes resp's wire form with enc; an output without a JSON
// form, or a value whose encoding panics, is an error.
func encodeWire(enc *json.Encoder, resp *Response) (err error) {
	defer func() {
		if recover() != nil {
			err = errUnwritable
		}
	}()
	v, err := resp.wireValue()
	if err != nil {
		return err
	}
	return enc.Encode(v)
}

// marshalWire is resp's wire form (see Response), or, when resp cannot be
// written (its output has no JSON form, or encoding it panics), the wire
// form of the non-retryable execution_failed that reports it
// (unwritable). grpctransport.Register's codec writes responses with it.
func marshalWire(resp *Response) []byte {
	b, err := marshalChecked(resp)
	if err != nil {
		b, _ = json.Marshal(unwritable(resp))
	}
	return b
}

func marshalChecked(resp *Response) (b []byte, err error) {
	defer func() {
		if recover() != nil {
			b, err = nil, errUnwritable
		}
	}()
	v, err := resp.wireValue()
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// errUnwritable is a response whose encoding panicked.
var errUnwritable = errors.New("the response could not be encoded")

// unwritable is the response sent instead of resp when resp cannot be
// written: a non-retryable execution_failed (the tool ran; asking again
// would run it again) with resp's version, request id, attempt and trace,
// and nothing of its output.
func unwritable(resp *Response) *Response {
	r := responseFor(newError(gateway.CodeExecutionFailed, false, "the tool's response could not be encoded as JSON (its output has a value with no JSON form)", map[string]any{"field": "output"}))
	r.ToolContractVersion, r.RequestID = resp.ToolContractVersion, resp.RequestID
	if resp.Usage != nil {
		r.Usage = &AttemptUsage{DurationMS: resp.Usage.DurationMS, Attempt: resp.Usage.Attempt}
	}
	if resp.Trace != nil {
		r.Trace = &Trace{TraceID: resp.Trace.TraceID, SpanID: resp.Trace.SpanID}
	}
	return r
}

// ServeJSON answers one request document on the server side (NewHandler
// and grpctransport.Register use it): a request that does not normalise,
// or whose input_raw is not a JSON object, is refused without calling ex;
// otherwise ex runs with the arguments in Input. Every response, refusals
// included, is completed with the version, the request id, the attempt
// and the trace of the request. A document that is not a request
// envelope (not JSON, a duplicated member, a member of the wrong type) is
// refused with a non-retryable invalid_input response that echoes what
// could be read of it: its request id, trace and attempt. An executor
// that panics is answered with a non-retryable execution_failed (the call
// may have had effects) whose message is fixed: the panic value, which
// may hold anything the executor held, is never written or logged, and
// the process goes on serving. The response's JSON form is its wire form
// (see Response): encoded with encoding/json, it decodes with Orloj's
// types whatever its output holds.
func ServeJSON(ctx context.Context, ex Executor, body []byte) *Response {
	req, te := decodeRequest(body)
	if te == nil {
		return serve(ctx, ex, req)
	}
	resp := responseFor(te)
	resp.complete(req)
	return resp
}

// serve answers one decoded request (see ServeJSON).
func serve(ctx context.Context, ex Executor, req *Request) *Response {
	var resp *Response
	if te := normalize(req); te != nil {
		resp = responseFor(te)
	} else if te := decodeInput(req); te != nil {
		resp = responseFor(te)
	} else if resp = execute(ctx, ex, req); resp == nil {
		resp = responseFor(newError(gateway.CodeExecutionFailed, false, "the tool returned no response", nil))
	}
	resp.complete(req)
	return resp
}

// execute runs ex, answering a panic with a non-retryable
// execution_failed that says nothing of the panic's value.
func execute(ctx context.Context, ex Executor, req *Request) (resp *Response) {
	defer func() {
		if recover() != nil {
			resp = responseFor(newError(gateway.CodeExecutionFailed, false, "the tool failed while executing the call; its effects, if any, are unknown", nil))
		}
	}()
	return ex.Execute(ctx, req)
}

// responseFor is the response that reports te (status denied for
// permission_denied, else error).
func responseFor(te *gateway.ToolError) *Response {
	status := StatusError
	if te.Code == gateway.CodePermissionDenied {
		status = StatusDenied
	}
	return &Response{Status: status, Error: &Failure{Code: te.Code, Reason: te.Reason, Retryable: te.Retryable, Message: te.Message, Details: te.Details}}
}

// complete fills what every response carries from its request: the
// version, the request id, a status (ok when empty), the attempt and the
// trace ids the response lacks.
func (resp *Response) complete(req *Request) {
	resp.ToolContractVersion = ContractVersion
	resp.RequestID = req.RequestID
	if resp.Status == "" {
		resp.Status = StatusOK
	}
	if resp.Usage == nil && req.Trace != nil && resp.Trace == nil {
		// Both made here: one allocation.
		both := new(struct {
			usage AttemptUsage
			trace Trace
		})
		resp.Usage, resp.Trace = &both.usage, &both.trace
	}
	if resp.Usage == nil {
		resp.Usage = &AttemptUsage{}
	}
	if resp.Usage.Attempt < 1 {
		resp.Usage.Attempt = max(req.Attempt, 1)
	}
	if req.Trace != nil {
		if resp.Trace == nil {
			resp.Trace = &Trace{}
		}
		if resp.Trace.TraceID == "" {
			resp.Trace.TraceID = req.Trace.TraceID
		}
		if resp.Trace.SpanID == "" {
			resp.Trace.SpanID = req.Trace.SpanID
		}
	}
}
