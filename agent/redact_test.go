package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/agent/agenttest"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/gateway"
)

// apiKey is a provider key as a CLI echoes it in a 401 error.
const apiKey = "sk-proj-Zx81mQ2vL0pR7sT4uW9yA3bC6dE1fG5h"

// leak reports where in the JSON of v the key or any of extra appears.
func leak(t *testing.T, what string, v any, extra ...string) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append([]string{apiKey}, extra...) {
		if strings.Contains(string(b), s) {
			t.Errorf("%s holds the secret %.12s…: %.400s", what, s, b)
		}
	}
}

// Whatever a backend puts a secret in — an event's message, text, channel
// or data (a string, a member name, a secret-named member), a
// completion's final text or data, a failed run's error — the consumer
// of the run never sees it; the rest of the text stays.
func TestBackendOutputIsRedacted(t *testing.T) {
	t.Parallel()
	const pwd = "hunter2-correct-horse"
	// The key straddles the cut that bounds a message: no part of it may
	// survive the cut.
	long := strings.Repeat("x", agent.MaxMessageBytes-40) + " api_key=" + apiKey + " tail"
	for _, tc := range []struct {
		name   string
		script agenttest.Script
		want   string // a text some event, the completion or the error still holds
	}{
		{"error message", agenttest.Script{Events: []agent.Event{{Kind: agent.EventError, Channel: "error",
			Message: "unexpected status 401 Unauthorized: Incorrect API key provided: " + apiKey}}},
			"unexpected status 401 Unauthorized: Incorrect API key provided: " + agent.Redacted},
		{"message cut by the bound", agenttest.Script{Events: []agent.Event{{Kind: agent.EventStatus, Message: long}}}, "api_key=" + agent.Redacted + " tail"},
		{"text", agenttest.Script{Events: []agent.Event{{Kind: agent.EventTextOutput, Text: "export OPENAI_API_KEY=" + apiKey}}}, "export OPENAI_API_KEY="},
		{"channel", agenttest.Script{Events: []agent.Event{{Kind: agent.EventStatus, Channel: "key " + apiKey, Message: "m"}}}, "\"m\""},
		{"data", agenttest.Script{Events: []agent.Event{{Kind: agent.EventUnknown,
			Data: json.RawMessage(`{"headers":{"authorization":"` + pwd + `","x":["Bearer ` + apiKey + `"]},"` + apiKey + `":1,"n":12345678901234567890}`)}}},
			`"n":12345678901234567890`},
		{"completion", agenttest.Script{Completion: agent.Completion{Status: agent.ExitStatus{Code: 1},
			FinalText: "Invalid API key · " + apiKey, Data: json.RawMessage(`{"error":{"message":"401 ` + apiKey + `","api_key":"` + pwd + `"}}`)}},
			"Invalid API key · " + agent.Redacted},
		{"run error", agenttest.Script{Err: agent.BackendError("provider refused key " + apiKey)}, "provider refused key " + agent.Redacted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			be := agenttest.New("leaky", agent.Capabilities{}, tc.script)
			run, err := be.Run(context.Background(), agent.RunRequest{Prompt: "go"})
			if err != nil {
				t.Fatal(err)
			}
			var evs []agent.Event
			for ev := range run.Events() {
				evs = append(evs, ev)
			}
			comp, werr := run.Wait(context.Background())
			got := struct {
				Events     []agent.Event
				Completion agent.Completion
				Err        string
			}{evs, comp, ""}
			if werr != nil {
				got.Err = werr.Error()
				var ae *agent.Error
				if !errors.As(werr, &ae) || strings.Contains(ae.Message, apiKey) {
					t.Errorf("error %v: its Message holds the key", werr)
				}
			}
			leak(t, "the run", got, pwd, apiKey[:12])
			b, _ := json.Marshal(got)
			if !strings.Contains(string(b), tc.want) && !strings.Contains(got.Err, tc.want) {
				t.Errorf("the run lost %q: %.300s", tc.want, b)
			}
			for _, ev := range evs {
				if len(ev.Message) > agent.MaxMessageBytes {
					t.Errorf("message of %d bytes", len(ev.Message))
				}
			}
		})
	}
}

// An *Error a backend's Run returns prints no secret either.
func TestErrorTextIsRedacted(t *testing.T) {
	t.Parallel()
	err := agent.BackendError("login failed with token ghp_abcdefghijklmnopqrstuvwxyz0123456789")
	if s := err.Error(); strings.Contains(s, "ghp_") || s != "backend error: login failed with token "+agent.Redacted {
		t.Fatalf("Error() = %q", s)
	}
}

// Under governance, an agent whose CLI echoes its API key in a 401 error
// leaves it in no tool result, record or transcript.
func TestGovernedAgentKeyReachesNoRecord(t *testing.T) {
	t.Parallel()
	for _, code := range []int{0, 1} {
		be := newTestBackend("coder", func(ctx context.Context, p *agent.Prepared, out *agent.Emitter) (agent.Completion, error) {
			out.Emit(agent.Event{Kind: agent.EventError, Channel: "error", Message: "unexpected status 401 Unauthorized: Incorrect API key provided: " + apiKey})
			out.Emit(agent.Event{Kind: agent.EventStatus, Channel: "status", Message: "retrying with " + apiKey})
			return agent.Completion{Status: agent.ExitStatus{Code: code}, FinalText: "done; the key was " + apiKey,
				Data: json.RawMessage(`{"usage":{"input_tokens":1,"output_tokens":1}}`)}, nil
		})
		ad := agent.NewAdapter(be, &agent.AdapterOptions{AdapterID: "adp_coder", Scopes: []string{"repo.write"}})
		h := newHarness(t, contextostest.NewPlanner(fixPlan(map[string]any{"prompt": plainPrompt}),
			&contextos.Plan{Decision: &contextos.DecisionProposal{DecisionKey: "code.change.apply", Outcome: "abandoned", Rationale: "the agent failed"}}), ad.Registration())
		req, rc := planRequest(t)
		res := h.Invoke(req, rc)
		var call *gateway.ToolResultEnvelope
		for _, r := range res.ToolResults {
			if r.CapabilityID == "adp_coder.run" {
				call = r
			}
		}
		if call == nil {
			t.Fatalf("exit %d: the agent was not called: %+v", code, res.ToolResults)
		}
		if len(be.Requests()) != 1 {
			t.Fatalf("exit %d: %d runs", code, len(be.Requests()))
		}
		leak(t, "the tool result", call)
		leak(t, "the record", res.Record)
		leak(t, "the transcript", h.Transcript.Entries())
	}
}
