package transport

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/contextos/contextos/gateway"
)

// NewHandler serves ex as a Tool Contract v1 endpoint for the external
// and webhook transports (the server side a host uses to expose its own
// tools): it takes a POSTed request envelope, refuses what does not
// normalise without calling ex, and answers 200 with the completed
// response (version, request id, attempt and trace echoed).
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
		req, te := DecodeRequest(body)
		var resp *Response
		if te != nil {
			req = &Request{}
			var probe struct {
				RequestID string `json:"request_id"`
			}
			json.Unmarshal(body, &probe)
			req.RequestID = probe.RequestID
			resp = ResponseFor(te)
		} else if resp = ex.Execute(r.Context(), req); resp == nil {
			resp = ResponseFor(newError(gateway.CodeExecutionFailed, false, "the tool returned no response", nil))
		}
		resp.Complete(req)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(HeaderContractVersion, ContractVersion)
		json.NewEncoder(w).Encode(resp)
	})
}

// ResponseFor is the response that reports te (status denied for
// permission_denied, else error).
func ResponseFor(te *gateway.ToolError) *Response {
	status := StatusError
	if te.Code == gateway.CodePermissionDenied {
		status = StatusDenied
	}
	return &Response{Status: status, Error: &Failure{Code: te.Code, Reason: te.Reason, Retryable: te.Retryable, Message: te.Message, Details: te.Details}}
}

// Complete fills what every response carries from its request: the
// version, the request id, a status (ok when empty), the attempt and the
// trace ids the response lacks.
func (resp *Response) Complete(req *Request) {
	resp.ToolContractVersion = ContractVersion
	resp.RequestID = req.RequestID
	if resp.Status == "" {
		resp.Status = StatusOK
	}
	if resp.Usage == nil {
		resp.Usage = &Usage{}
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
