package transport

import (
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/contextos/contextos/gateway"
)

// NewHandler serves ex as a Tool Contract v1 endpoint for the external
// and webhook transports (the server side a host uses to expose its own
// tools): it takes a POSTed request envelope and answers 200 with the
// response ServeJSON gives.
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
		json.NewEncoder(w).Encode(resp)
	})
}

// ServeJSON answers one request document on the server side (NewHandler
// and grpctransport.Register use it): a request that does not normalise,
// or whose input_raw is not a JSON object, is refused without calling ex;
// otherwise ex runs with the arguments in Input. Every response, refusals
// included, is completed with the version, the request id, the attempt
// and the trace of the request. A document that is not a request
// envelope (not JSON, a duplicated member, a member of the wrong type) is
// refused with a non-retryable invalid_input response that echoes what
// could be read of it: its request id, trace and attempt.
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
	} else if resp = ex.Execute(ctx, req); resp == nil {
		resp = responseFor(newError(gateway.CodeExecutionFailed, false, "the tool returned no response", nil))
	}
	resp.complete(req)
	return resp
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
