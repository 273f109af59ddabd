package agenttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/contextos/contextos/agent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const fakeKind agent.Kind = "agenttest_fake"

func toolData(phase, status string) json.RawMessage {
	return json.RawMessage(`{"schema":"agent_api.tools.structured.v1","tool":{"backend_item_id":"item_1","thread_id":null,"turn_id":null,"kind":"command_execution","phase":"` +
		phase + `","status":"` + status + `","exit_code":null,"bytes":{"stdout":0,"stderr":0,"diff":0,"result":0},"tool_name":null,"tool_use_id":null}}`)
}

// scenarioScript maps each scenario to the fake's script.
func scenarioScript(s Scenario) Script {
	text := func(s string) agent.Event {
		return agent.Event{Kind: agent.EventTextOutput, Channel: "assistant", Text: s}
	}
	switch s {
	case ScenarioNormal:
		return Script{
			Events: []agent.Event{
				text("hello from agenttest"),
				{Kind: agent.EventToolCall, Channel: "tool", Data: toolData("start", "running")},
				{Kind: agent.EventToolResult, Channel: "tool", Data: toolData("complete", "completed")},
			},
			Completion: agent.Completion{FinalText: "hello from agenttest"},
		}
	case ScenarioNonZeroExit:
		return Script{
			Events:     []agent.Event{{Kind: agent.EventError, Channel: "error", Message: "backend exited with status 3"}},
			Completion: agent.Completion{Status: agent.ExitStatus{Code: 3}},
		}
	case ScenarioMalformed:
		return Script{Events: []agent.Event{
			text("before"),
			{Kind: agent.EventError, Channel: "error", Message: "skipped a malformed backend line"},
			text("after"),
		}}
	case ScenarioSlow:
		return Script{Events: []agent.Event{text("working")}, Block: true}
	case ScenarioSpawnFailure:
		return Script{SpawnErr: fmt.Errorf("fork/exec /nonexistent/%s: no such file or directory", Secret)}
	case ScenarioHugeText:
		return Script{Events: []agent.Event{text(strings.Repeat("h", HugeTextBytes))}}
	case ScenarioLeakedKey:
		// The key everywhere a backend could put it.
		return Script{
			Events: []agent.Event{
				{Kind: agent.EventError, Channel: "error", Message: "unexpected status 401 Unauthorized: Incorrect API key provided: " + APIKey},
				{Kind: agent.EventStatus, Channel: "status " + APIKey, Message: "retrying", Data: json.RawMessage(`{"request":{"api_key":"short","header":"Bearer ` + APIKey + `"}}`)},
				text("the provider said: Incorrect API key provided: " + APIKey),
			},
			Completion: agent.Completion{Status: agent.ExitStatus{Code: 1}, FinalText: "Invalid API key " + APIKey,
				Data: json.RawMessage(`{"error":"401 ` + APIKey + `"}`)},
		}
	}
	panic("unknown scenario " + string(s))
}

var fakeCaps = agent.NewCapabilities(agent.CapEventsLive, agent.CapToolsStructured, agent.CapToolResults, agent.CapFinalText)

func TestBackendConformance(t *testing.T) {
	RunBackendTests(t, func(t *testing.T, s Scenario) agent.Backend {
		return New(fakeKind, fakeCaps, scenarioScript(s))
	})
}

// TestConformanceWithoutOptionalCapabilities runs the suite against a fake
// that advertises only the required capabilities (no tools, no final text).
func TestConformanceWithoutOptionalCapabilities(t *testing.T) {
	RunBackendTests(t, func(t *testing.T, s Scenario) agent.Backend {
		sc := scenarioScript(s)
		if s == ScenarioNormal {
			sc.Events = sc.Events[:1]
			sc.Completion = agent.Completion{}
		}
		return New("agenttest_plain", agent.Capabilities{}, sc)
	})
}

func TestNewAdvertisesRequiredCapabilities(t *testing.T) {
	b := New(fakeKind, agent.NewCapabilities(agent.CapModel), Script{})
	want := []string{agent.CapCancel, agent.CapModel, agent.CapRun, agent.CapEvents}
	for _, id := range want {
		if !b.Capabilities().Contains(id) {
			t.Errorf("capabilities %q lack %s", b.Capabilities(), id)
		}
	}
	if got := b.Capabilities().Len(); got != len(want) {
		t.Errorf("%d capabilities, want %d", got, len(want))
	}
}

func TestBackendRecordsPreparedRequests(t *testing.T) {
	b := New(fakeKind, agent.NewCapabilities(agent.CapModel), Script{
		Defaults: agent.Defaults{Env: map[string]string{"A": "config", "B": "config"}, Timeout: time.Hour},
		Events:   []agent.Event{{Kind: agent.EventStatus, Message: "ok"}},
	})
	// Refused requests are not runs.
	for _, req := range []agent.RunRequest{
		{Prompt: " "},
		{Prompt: "hi", Extensions: map[string]json.RawMessage{agent.CapAddDirs: json.RawMessage(`{"dirs":["/"]}`)}},
		{Prompt: "hi", Extensions: map[string]json.RawMessage{agent.CapModel: json.RawMessage(`7`)}},
	} {
		if _, err := b.Run(t.Context(), req); err == nil {
			t.Fatalf("Run(%+v) accepted", req)
		}
	}
	if b.Runs() != 0 {
		t.Fatalf("Runs() = %d after refused requests", b.Runs())
	}
	run, err := b.Run(t.Context(), agent.RunRequest{
		Prompt:     "hi",
		Env:        map[string]string{"B": "request"},
		Timeout:    agent.Timeout(0),
		Extensions: map[string]json.RawMessage{agent.CapModel: json.RawMessage(`" gpt-test "`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for ev := range run.Events() {
		got = append(got, string(ev.Kind)+":"+ev.Message)
	}
	if _, err := run.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "status:ok" {
		t.Errorf("events %v", got)
	}
	reqs := b.Requests()
	if b.Runs() != 1 || len(reqs) != 1 {
		t.Fatalf("Runs() = %d, %d requests", b.Runs(), len(reqs))
	}
	p := reqs[0]
	if p.Model != "gpt-test" || p.Timeout != 0 || p.Env["A"] != "config" || p.Env["B"] != "request" {
		t.Errorf("prepared %+v", p)
	}
	reqs[0].Env["A"] = "mutated"
	if b.Requests()[0].Env["A"] != "config" {
		t.Error("Requests() shares the recorded env")
	}
}

func TestBackendDriverErrorAndTimeout(t *testing.T) {
	cases := []struct {
		name    string
		script  Script
		timeout *time.Duration
		want    string
	}{
		{"backend_error", Script{Err: agent.BackendError("session not found", errors.New(Secret))}, nil, "backend error: session not found"},
		{"other_error", Script{Err: errors.New(Secret)}, nil, "backend error: backend failed"},
		{"spawn", Script{SpawnErr: errors.New(Secret)}, nil, "backend error: spawn failed"},
		{"timeout", Script{Block: true}, agent.Timeout(time.Millisecond), "backend error: timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := New(fakeKind, agent.Capabilities{}, c.script)
			run, err := b.Run(t.Context(), agent.RunRequest{Prompt: "x", Timeout: c.timeout})
			if err != nil {
				t.Fatal(err)
			}
			var evs []agent.Event
			for ev := range run.Events() {
				evs = append(evs, ev)
			}
			_, err = run.Wait(t.Context())
			if err == nil || err.Error() != c.want || !errors.Is(err, agent.ErrBackend) {
				t.Fatalf("Wait() = %v, want %q", err, c.want)
			}
			if len(evs) != 1 || evs[0].Kind != agent.EventError || "backend error: "+evs[0].Message != c.want {
				t.Errorf("events %+v, want one terminal error event", evs)
			}
		})
	}
}

// TestCheckersCatchViolations shows the suite's checks fail on events and
// completions that break the contract.
func TestCheckersCatchViolations(t *testing.T) {
	t.Parallel()
	huge := json.RawMessage(`"` + strings.Repeat("x", agent.MaxDataBytes) + `"`)
	cases := []struct {
		name  string
		check func(tb testing.TB)
	}{
		{"wrong_agent_kind", func(tb testing.TB) {
			checkEvent(tb, fakeKind, agent.Event{AgentKind: "other", Kind: agent.EventStatus})
		}},
		{"text_with_message", func(tb testing.TB) {
			checkEvent(tb, fakeKind, agent.Event{AgentKind: fakeKind, Kind: agent.EventTextOutput, Message: "m"})
		}},
		{"error_without_message", func(tb testing.TB) {
			checkEvent(tb, fakeKind, agent.Event{AgentKind: fakeKind, Kind: agent.EventError})
		}},
		{"status_with_text", func(tb testing.TB) {
			checkEvent(tb, fakeKind, agent.Event{AgentKind: fakeKind, Kind: agent.EventStatus, Text: "t"})
		}},
		{"unknown_kind", func(tb testing.TB) { checkEvent(tb, fakeKind, agent.Event{AgentKind: fakeKind, Kind: "bogus"}) }},
		{"long_channel", func(tb testing.TB) {
			checkEvent(tb, fakeKind, agent.Event{AgentKind: fakeKind, Kind: agent.EventStatus, Channel: strings.Repeat("c", 129)})
		}},
		{"long_text", func(tb testing.TB) {
			checkEvent(tb, fakeKind, agent.Event{AgentKind: fakeKind, Kind: agent.EventTextOutput, Text: strings.Repeat("t", agent.MaxTextBytes+1)})
		}},
		{"long_message", func(tb testing.TB) {
			checkEvent(tb, fakeKind, agent.Event{AgentKind: fakeKind, Kind: agent.EventStatus, Message: strings.Repeat("m", 4097)})
		}},
		{"oversize_data", func(tb testing.TB) {
			checkEvent(tb, fakeKind, agent.Event{AgentKind: fakeKind, Kind: agent.EventStatus, Data: huge})
		}},
		{"secret_in_message", func(tb testing.TB) {
			checkEvent(tb, fakeKind, agent.Event{AgentKind: fakeKind, Kind: agent.EventError, Message: "x " + Secret})
		}},
		{"secret_in_data", func(tb testing.TB) {
			checkEvent(tb, fakeKind, agent.Event{AgentKind: fakeKind, Kind: agent.EventStatus, Data: json.RawMessage(`{"a":"` + Secret + `"}`)})
		}},
		{"secret_in_final_text", func(tb testing.TB) { checkCompletion(tb, agent.Completion{FinalText: Secret}) }},
		{"long_final_text", func(tb testing.TB) {
			checkCompletion(tb, agent.Completion{FinalText: strings.Repeat("f", agent.MaxFinalTextBytes+1)})
		}},
		{"tool_without_facet", func(tb testing.TB) { checkToolFacet(tb, agent.Event{Kind: agent.EventToolCall}) }},
		{"tool_facet_bad_phase", func(tb testing.TB) {
			checkToolFacet(tb, agent.Event{Kind: agent.EventToolCall, Data: toolData("begin", "running")})
		}},
		{"result_before_call", func(tb testing.TB) {
			checkToolOrder(tb, []agent.Event{
				{Kind: agent.EventToolResult, Data: toolData("complete", "completed")},
				{Kind: agent.EventToolCall, Data: toolData("start", "running")},
			})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := &recorder{TB: t}
			c.check(r)
			if len(r.errs) == 0 {
				t.Error("the check passed")
			}
		})
	}
	// And a conforming pair passes.
	r := &recorder{TB: t}
	checkToolOrder(r, []agent.Event{
		{Kind: agent.EventToolCall, Data: toolData("start", "running")},
		{Kind: agent.EventToolResult, Data: toolData("complete", "completed")},
	})
	checkToolFacet(r, agent.Event{Kind: agent.EventToolCall, Data: toolData("start", "running")})
	if len(r.errs) != 0 {
		t.Errorf("conforming tool events fail: %v", r.errs)
	}
}

// recorder records a check's failures instead of failing the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...) }
func (r *recorder) Error(args ...any)                 { r.errs = append(r.errs, fmt.Sprint(args...)) }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...) }

func TestCancelDuringBlock(t *testing.T) {
	b := New(fakeKind, agent.Capabilities{}, Script{Block: true})
	run, err := b.Run(context.Background(), agent.RunRequest{Prompt: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Cancel(); err != nil {
		t.Fatal(err)
	}
	for range run.Events() {
		t.Error("an event after Cancel")
	}
	if _, err := run.Wait(t.Context()); !errors.Is(err, agent.ErrCancelled) {
		t.Fatalf("Wait() = %v", err)
	}
}
