// Package refundmodel is a scripted model for tests of the canonical
// refund: an OpenAI-compatible Chat Completions handler that plans the
// refund as a model would, through the tools a model planner offers it. It
// looks the order up and evaluates the policy, refunds when the refund
// tool is offered, then proposes the decision (approved after a refund,
// denied when the refund tool is withheld). The example and the CLI tests
// drive whole runs with it.
package refundmodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
)

// OpenAI is the handler; the zero value accepts any bearer key.
type OpenAI struct {
	// APIKey, when set, is the only bearer key accepted.
	APIKey   string
	requests atomic.Int32
}

// Requests reports how many completions the handler answered.
func (m *OpenAI) Requests() int { return int(m.requests.Load()) }

// chatRequest is what the handler reads of a Chat Completions request.
type chatRequest struct {
	Messages []struct {
		Role      string `json:"role"`
		ToolCalls []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

// ServeHTTP answers POST /chat/completions.
func (m *OpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req chatRequest
	switch {
	case r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions"):
		writeError(w, http.StatusNotFound, "not_found_error", "no such route")
		return
	case m.APIKey != "" && r.Header.Get("Authorization") != "Bearer "+m.APIKey:
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid api key")
		return
	case json.Unmarshal(body, &req) != nil:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "the body is not JSON")
		return
	}
	n := m.requests.Add(1)
	var calls []string
	for i, c := range plan(&req, body) {
		args, _ := json.Marshal(c[1])
		calls = append(calls, fmt.Sprintf(`{"id":"call_%d_%d","type":"function","function":{"name":%q,"arguments":%s}}`, n, i, c[0], args))
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-%d","object":"chat.completion","created":1778000000,"model":"refund-model","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[%s]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1200,"completion_tokens":60,"total_tokens":1260,"prompt_tokens_details":{"cached_tokens":1000}}}`,
		n, strings.Join(calls, ","))
}

// amountRE finds the refund amount in the task.
var amountRE = regexp.MustCompile(`for INR ([0-9]+)`)

// plan is the model's next calls, each {function name, arguments JSON}.
func plan(req *chatRequest, body []byte) [][2]string {
	called, offered := map[string]bool{}, map[string]bool{}
	for _, msg := range req.Messages {
		for _, c := range msg.ToolCalls {
			called[c.Function.Name] = true
		}
	}
	for _, t := range req.Tools {
		offered[t.Function.Name] = true
	}
	amount := "0" // the task says how much: "Refund order ord_881 for INR 4200"
	if m := amountRE.FindSubmatch(body); m != nil {
		amount = string(m[1])
	}
	const refund = "adp_payments__issue_refund"
	switch {
	case len(called) == 0:
		return [][2]string{{"adp_orders__lookup", `{"order_id":"ord_881"}`}, {"adp_policy__eval", `{"order_id":"ord_881"}`}}
	case offered[refund] && !called[refund]:
		return [][2]string{{refund, `{"order_id":"ord_881","amount_inr":` + amount + `,"currency":"INR"}`}}
	case called[refund]:
		return [][2]string{{"propose_decision", `{"decision_key":"support.refund.execute","outcome":"approved","outputs":{"refund_amount_inr":` + amount +
			`,"currency":"INR"},"rationale":"Delivered order within the window; identity verified.","confidence":0.9,"subject_ids":["customer:cus_77","order:ord_881"],"evidence_refs":["kg:order:ord_881#snapshot_kg_2026_05_03_T0930"]}`}}
	}
	return [][2]string{{"propose_decision", `{"decision_key":"support.refund.execute","outcome":"denied","rationale":"The refund tool is not offered: identity is not verified.","confidence":1,"subject_ids":["customer:cus_77"]}`}}
}

// writeError writes an OpenAI-shaped error body.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"message":%q,"type":%q,"param":null,"code":null}}`, msg, typ)
}
