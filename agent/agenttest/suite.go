package agenttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/contextos/contextos/agent"
)

// Scenario names what the backend under test is set up to do.
type Scenario string

// The scenarios of RunBackendTests.
const (
	ScenarioNormal       Scenario = "normal"        // prints text and, when the backend advertises agent.CapToolsStructured, one tool call and its result; exits 0; FinalText non-empty when CapFinalText is advertised
	ScenarioNonZeroExit  Scenario = "nonzero_exit"  // writes Secret to stderr and exits with a non-zero code
	ScenarioMalformed    Scenario = "malformed"     // prints a malformed line containing Secret mid-stream, then a text event, exits 0
	ScenarioSlow         Scenario = "slow"          // emits at least one event, writes Secret to stderr, then blocks until killed
	ScenarioSpawnFailure Scenario = "spawn_failure" // the process cannot be started (e.g. a binary path that does not exist and contains Secret)
	ScenarioHugeText     Scenario = "huge_text"     // one assistant text of 100000 bytes
	ScenarioLeakedKey    Scenario = "leaked_key"    // answers as a CLI whose model API refused APIKey with a 401: an error (and any model text the backend passes on) whose message holds APIKey; exits non-zero
)

// Secret must never appear in any event, message, error or completion of a backend under test.
const Secret = "AGENTTEST-SECRET-DO-NOT-LEAK"

// APIKey is an API key as a CLI prints it inside a provider's 401 error
// (the secret redactor recognises its sk- form). Like Secret it must
// never appear in any event, message, error or completion: a backend's
// output passes the redactor.
const APIKey = "sk-agenttest-0123456789abcdefghijklmnopqrstuv"

// PIDFileEnv names the environment variable the suite sets, for the slow
// scenario, to a file path: a backend's fake process writes its process id
// there (one per line, appending), and after the run is cancelled the
// suite checks that every such process is gone — a backend must terminate
// what it started, not only stop reading it. Backends that start no
// process ignore it.
const PIDFileEnv = "AGENTTEST_PIDFILE"

// HugeTextBytes is the size of ScenarioHugeText's assistant text.
const HugeTextBytes = 100000

// patience bounds every wait of the suite. It only keeps a broken backend
// from hanging the test binary: a conforming backend is never near it.
const patience = 2 * time.Minute

// RunBackendTests runs the conformance suite against backends newBackend builds, one per subtest and scenario.
// newBackend calls t.Skip for a scenario it cannot set up.
//
// Each subtest checks for leaked goroutines (goroutines that existed when
// it began are ignored), so call it from a test that is not parallel.
func RunBackendTests(t *testing.T, newBackend func(t *testing.T, s Scenario) agent.Backend) {
	t.Helper()
	run := func(name string, f func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			f(t)
		})
	}
	run("kind_is_valid", func(t *testing.T) {
		b := newBackend(t, ScenarioNormal)
		if err := b.Kind().Validate(); err != nil {
			t.Fatalf("Kind() = %q: %v", b.Kind(), err)
		}
	})
	run("capabilities_required", func(t *testing.T) {
		caps := newBackend(t, ScenarioNormal).Capabilities()
		for _, id := range []string{agent.CapRun, agent.CapEvents} {
			if !caps.Contains(id) {
				t.Errorf("capabilities %q lack %s", caps, id)
			}
		}
	})
	run("empty_prompt_is_refused_before_spawn", func(t *testing.T) { testEmptyPrompt(t, newBackend) })
	run("unknown_extension_key_is_refused_before_spawn", func(t *testing.T) { testUnknownKeys(t, newBackend) })
	run("normal", func(t *testing.T) { testNormal(t, newBackend(t, ScenarioNormal)) })
	run("close_mid_stream_unblocks_wait", func(t *testing.T) { testCloseMidStream(t, newBackend(t, ScenarioNormal)) })
	slow := func(name string, f func(t *testing.T, b agent.Backend)) {
		run(name, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "pids")
			t.Setenv(PIDFileEnv, pidfile)
			f(t, newBackend(t, ScenarioSlow))
			checkProcessesGone(t, pidfile, patience)
		})
	}
	slow("cancel", testCancel)
	slow("cancel_after_close", testCancelAfterClose)
	slow("context_cancel", testContextCancel)
	run("spawn_failure", func(t *testing.T) { testSpawnFailure(t, newBackend(t, ScenarioSpawnFailure)) })
	run("nonzero_exit", func(t *testing.T) { testNonZeroExit(t, newBackend(t, ScenarioNonZeroExit)) })
	run("malformed_line", func(t *testing.T) { testMalformed(t, newBackend(t, ScenarioMalformed)) })
	run("huge_text", func(t *testing.T) { testHugeText(t, newBackend(t, ScenarioHugeText)) })
	run("leaked_key_is_redacted", func(t *testing.T) { testLeakedKey(t, newBackend(t, ScenarioLeakedKey)) })
}

// request is the suite's ordinary request.
func request() agent.RunRequest {
	return agent.RunRequest{Prompt: "agenttest: say hello"}
}

func testEmptyPrompt(t *testing.T, newBackend func(*testing.T, Scenario) agent.Backend) {
	for _, s := range []Scenario{ScenarioSpawnFailure, ScenarioNormal} {
		for _, prompt := range []string{"", "  \t\n "} {
			b := newBackend(t, s)
			req := agent.RunRequest{Prompt: prompt, Extensions: map[string]json.RawMessage{
				"agent_api.agenttest_unknown.v1": json.RawMessage(`"` + Secret + `"`),
			}}
			run, err := b.Run(t.Context(), req)
			if run != nil {
				stopRun(t, run)
			}
			const want = "invalid request: prompt must not be empty"
			if err == nil || !errors.Is(err, agent.ErrInvalidRequest) || err.Error() != want {
				t.Errorf("%s: prompt %q: Run() = %v, want ErrInvalidRequest %q", s, prompt, err, want)
			}
		}
	}
}

func testUnknownKeys(t *testing.T, newBackend func(*testing.T, Scenario) agent.Backend) {
	b := newBackend(t, ScenarioSpawnFailure)
	kind := string(b.Kind())
	other := "agenttest_other"
	if kind == other {
		other = "agenttest_another"
	}
	secret := json.RawMessage(`{"value":"` + Secret + `"}`)
	cases := []struct {
		name string
		keys []string
		want string // the key the error names
	}{
		{"unknown_universal_key", []string{"agent_api.agenttest_unknown.v1"}, "agent_api.agenttest_unknown.v1"},
		{"smallest_of_several", []string{"agent_api.zz_agenttest.v1", "backend." + kind + ".zz_agenttest", "agent_api.aa_agenttest.v1", "agent_api.mm_agenttest.v1"}, "agent_api.aa_agenttest.v1"},
		{"other_backend_namespace", []string{"backend." + other + ".exec.agenttest"}, "backend." + other + ".exec.agenttest"},
		{"own_namespace_unadvertised", []string{"backend." + kind + ".agenttest_unadvertised"}, "backend." + kind + ".agenttest_unadvertised"},
	}
	for _, c := range cases {
		req := request()
		req.Extensions = map[string]json.RawMessage{}
		for _, k := range c.keys {
			req.Extensions[k] = secret
		}
		run, err := b.Run(t.Context(), req)
		if run != nil {
			stopRun(t, run)
		}
		want := "unsupported capability for " + kind + ": " + c.want
		if err == nil || !errors.Is(err, agent.ErrUnsupportedCapability) || err.Error() != want {
			t.Errorf("%s: Run() = %v, want ErrUnsupportedCapability %q", c.name, err, want)
			continue
		}
		noSecret(t, c.name+": error", err.Error())
	}
}

func testNormal(t *testing.T, b agent.Backend) {
	run := start(t, b, t.Context())
	waited := make(chan error, 1)
	go func() {
		_, err := run.Wait(context.Background())
		waited <- err
	}()
	var evs []agent.Event
	next := receive(t, run)
	for ev, ok := next(); ok; ev, ok = next() {
		select {
		case err := <-waited:
			t.Fatalf("Wait returned (%v) before the event stream ended", err)
		default:
		}
		evs = append(evs, ev)
	}
	if err := <-waited; err != nil {
		t.Fatalf("Wait() = %v, want success", err)
	}
	comp, err := wait(t, run)
	if err != nil {
		t.Fatalf("Wait() = %v, want success", err)
	}
	checkEvents(t, b, evs)
	checkCompletion(t, comp)
	if !comp.Status.Success() {
		t.Errorf("Status = %v, want success", comp.Status)
	}
	if countKind(evs, agent.EventTextOutput) == 0 {
		t.Error("no text_output event")
	}
	caps := b.Capabilities()
	if caps.Contains(agent.CapFinalText) && comp.FinalText == "" {
		t.Errorf("%s is advertised but FinalText is empty", agent.CapFinalText)
	}
	if caps.Contains(agent.CapToolsStructured) {
		if countKind(evs, agent.EventToolCall) == 0 || countKind(evs, agent.EventToolResult) == 0 {
			t.Errorf("%s is advertised but the run has no tool call and result", agent.CapToolsStructured)
		}
		checkToolOrder(t, evs)
	}
}

func testCloseMidStream(t *testing.T, b agent.Backend) {
	run := start(t, b, t.Context())
	first(t, run)
	run.Close()
	run.Close()
	comp, err := wait(t, run)
	if err != nil {
		t.Fatalf("Wait() after Close = %v, want the backend's completion", err)
	}
	checkCompletion(t, comp)
	n := 0
	for range run.Events() {
		n++
	}
	if n != 0 {
		t.Errorf("Events after Close yielded %d events", n)
	}
}

func testCancel(t *testing.T, b agent.Backend) {
	if !b.Capabilities().Contains(agent.CapCancel) {
		t.Skip("the backend does not advertise " + agent.CapCancel)
	}
	run := start(t, b, t.Context())
	next := receive(t, run)
	ev, ok := next()
	if !ok {
		t.Fatal("the slow run ended its stream without an event")
	}
	checkEvent(t, b.Kind(), ev)
	if err := run.Cancel(); err != nil {
		t.Fatalf("Cancel() = %v", err)
	}
	for _, ev := range all(next) { // already forwarded events may still arrive; the stream must end
		checkEvent(t, b.Kind(), ev)
	}
	if err := run.Cancel(); err != nil {
		t.Fatalf("second Cancel() = %v", err)
	}
	checkCancelled(t, run)
	if err := run.Cancel(); err != nil {
		t.Fatalf("Cancel() after completion = %v", err)
	}
	checkCancelled(t, run) // a resolved completion never changes
}

func testCancelAfterClose(t *testing.T, b agent.Backend) {
	if !b.Capabilities().Contains(agent.CapCancel) {
		t.Skip("the backend does not advertise " + agent.CapCancel)
	}
	run := start(t, b, t.Context())
	first(t, run)
	run.Close()
	if err := run.Cancel(); err != nil {
		t.Fatalf("Cancel() after Close = %v", err)
	}
	checkCancelled(t, run)
}

func testContextCancel(t *testing.T, b agent.Backend) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	run := start(t, b, ctx)
	next := receive(t, run)
	if _, ok := next(); !ok {
		t.Fatal("the slow run ended its stream without an event")
	}
	cancel()
	for _, ev := range all(next) { // the stream must end
		checkEvent(t, b.Kind(), ev)
	}
	_, err := wait(t, run)
	if !errors.Is(err, agent.ErrBackend) || !errors.Is(err, agent.ErrCancelled) {
		t.Fatalf("Wait() after the run's context ended = %v, want ErrBackend and ErrCancelled", err)
	}
	noSecret(t, "completion error", err.Error())
}

func testSpawnFailure(t *testing.T, b agent.Backend) {
	run := start(t, b, t.Context())
	evs := all(receive(t, run))
	checkEvents(t, b, evs)
	comp, err := wait(t, run)
	if err == nil || !errors.Is(err, agent.ErrBackend) {
		t.Fatalf("Wait() = %v, %v; want an ErrBackend error", comp, err)
	}
	noSecret(t, "completion error", err.Error())
	if len(evs) != 1 || evs[0].Kind != agent.EventError {
		t.Fatalf("events = %v, want exactly one error event", evs)
	}
	if want := "backend error: " + evs[0].Message; err.Error() != want {
		t.Errorf("completion error %q, want the error event's message (%q)", err, want)
	}
}

func testNonZeroExit(t *testing.T, b agent.Backend) {
	evs, comp, err := collect(t, b)
	if err != nil {
		t.Fatalf("Wait() = %v, want a completion (a non-zero exit is not an error)", err)
	}
	checkEvents(t, b, evs)
	checkCompletion(t, comp)
	if comp.Status.Success() {
		t.Errorf("Status = %v, want a non-success status", comp.Status)
	}
	if countKind(evs, agent.EventError) == 0 {
		t.Error("no error event for the non-zero exit")
	}
}

func testMalformed(t *testing.T, b agent.Backend) {
	evs, comp, err := collect(t, b)
	if err != nil {
		t.Fatalf("Wait() = %v, want success", err)
	}
	checkEvents(t, b, evs)
	checkCompletion(t, comp)
	if countKind(evs, agent.EventTextOutput) == 0 {
		t.Error("no text_output event: the stream did not continue after the malformed line")
	}
}

func testHugeText(t *testing.T, b agent.Backend) {
	evs, comp, err := collect(t, b)
	if err != nil {
		t.Fatalf("Wait() = %v, want success", err)
	}
	checkEvents(t, b, evs)
	checkCompletion(t, comp)
	var text strings.Builder
	pieces := 0
	for _, ev := range evs {
		if ev.Kind == agent.EventTextOutput {
			pieces++
			text.WriteString(ev.Text)
		}
	}
	if text.Len() < HugeTextBytes || pieces < 2 {
		t.Errorf("text_output: %d pieces, %d bytes; want ≥ 2 pieces of at most %d bytes holding the %d bytes", pieces, text.Len(), agent.MaxTextBytes, HugeTextBytes)
	}
}

// testLeakedKey checks that an API key a CLI prints in its errors and
// text reaches no event, completion or error, and that the run still says
// it failed.
func testLeakedKey(t *testing.T, b agent.Backend) {
	evs, comp, err := collect(t, b)
	checkEvents(t, b, evs)
	if err != nil {
		return // wait checked the error's text
	}
	checkCompletion(t, comp)
	if comp.Status.Success() {
		t.Errorf("Status = %v, want the CLI's non-success status", comp.Status)
	}
	if countKind(evs, agent.EventError) == 0 {
		t.Error("no error event: the 401 went unreported")
	}
}

// start runs the suite's request on b.
func start(t *testing.T, b agent.Backend, ctx context.Context) *agent.Run {
	t.Helper()
	run, err := b.Run(ctx, request())
	if err != nil {
		t.Fatalf("Run() = %v", err)
	}
	if run == nil {
		t.Fatal("Run() returned a nil run and no error")
	}
	if run.Kind() != b.Kind() {
		t.Errorf("run kind %q, backend kind %q", run.Kind(), b.Kind())
	}
	return run
}

// receive returns a pull iterator over run's events. A stream that has not
// ended within patience is closed and the run cancelled, failing the test.
func receive(t *testing.T, run *agent.Run) func() (agent.Event, bool) {
	next, stop := iter.Pull(run.Events())
	var timedOut atomic.Bool
	timer := time.AfterFunc(patience, func() {
		timedOut.Store(true)
		run.Close()
		_ = run.Cancel()
	})
	t.Cleanup(func() {
		timer.Stop()
		stop()
		if timedOut.Load() {
			t.Errorf("the event stream did not end within %v", patience)
		}
	})
	return next
}

// all returns the rest of the run's events, in order.
func all(next func() (agent.Event, bool)) []agent.Event {
	var evs []agent.Event
	for ev, ok := next(); ok; ev, ok = next() {
		evs = append(evs, ev)
	}
	return evs
}

// first returns the run's first event, without ending the stream.
func first(t *testing.T, run *agent.Run) agent.Event {
	t.Helper()
	got := make(chan agent.Event, 1)
	go func() {
		for ev := range run.Events() {
			got <- ev
			return // leaving the loop is Close, which the caller does too
		}
		close(got)
	}()
	select {
	case ev, ok := <-got:
		if !ok {
			t.Fatal("the run ended its stream without an event")
		}
		noSecretEvent(t, ev)
		return ev
	case <-time.After(patience):
		t.Fatalf("no event within %v", patience)
	}
	return agent.Event{}
}

// wait waits for the run's completion.
func wait(t *testing.T, run *agent.Run) (agent.Completion, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	comp, err := run.Wait(ctx)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		t.Fatalf("Wait did not return within %v", patience)
	}
	select {
	case <-run.Done():
	default:
		t.Error("Wait returned before Done was closed")
	}
	if err != nil {
		noSecret(t, "completion error", err.Error())
	}
	return comp, err
}

// collect runs the suite's request on b to its end.
func collect(t *testing.T, b agent.Backend) ([]agent.Event, agent.Completion, error) {
	t.Helper()
	run := start(t, b, t.Context())
	evs := all(receive(t, run))
	comp, err := wait(t, run)
	return evs, comp, err
}

// stopRun ends a run a backend should not have started.
func stopRun(t *testing.T, run *agent.Run) {
	t.Helper()
	t.Error("Run() returned a run for a request it must refuse")
	run.Close()
	_ = run.Cancel()
	_, _ = wait(t, run)
}

func checkCancelled(t *testing.T, run *agent.Run) {
	t.Helper()
	comp, err := wait(t, run)
	const want = "backend error: cancelled"
	if err == nil || !errors.Is(err, agent.ErrBackend) || !errors.Is(err, agent.ErrCancelled) || err.Error() != want {
		t.Fatalf("Wait() = %v, %v; want ErrCancelled %q", comp, err, want)
	}
}

// checkEvents checks every event and that Secret appears in none.
func checkEvents(t testing.TB, b agent.Backend, evs []agent.Event) {
	t.Helper()
	for _, ev := range evs {
		checkEvent(t, b.Kind(), ev)
		if b.Capabilities().Contains(agent.CapToolsStructured) && (ev.Kind == agent.EventToolCall || ev.Kind == agent.EventToolResult) {
			checkToolFacet(t, ev)
		}
	}
}

// checkEvent checks one event's kind, bounds and payload rules.
func checkEvent(t testing.TB, kind agent.Kind, ev agent.Event) {
	t.Helper()
	noSecretEvent(t, ev)
	if ev.AgentKind != kind {
		t.Errorf("event agent kind %q, want %q", ev.AgentKind, kind)
	}
	switch ev.Kind {
	case agent.EventTextOutput:
		if ev.Message != "" {
			t.Errorf("text_output event with a message")
		}
	case agent.EventError:
		if ev.Text != "" || strings.TrimSpace(ev.Message) == "" {
			t.Errorf("error event: text %d bytes, message %q; want no text and a message", len(ev.Text), ev.Message)
		}
	case agent.EventStatus, agent.EventToolCall, agent.EventToolResult, agent.EventUnknown:
		if ev.Text != "" {
			t.Errorf("%s event with text", ev.Kind)
		}
	default:
		t.Errorf("event kind %q is not one of the six", ev.Kind)
	}
	if len(ev.Channel) > agent.MaxChannelBytes || !utf8.ValidString(ev.Channel) {
		t.Errorf("channel of %d bytes", len(ev.Channel))
	}
	if len(ev.Text) > agent.MaxTextBytes || !utf8.ValidString(ev.Text) {
		t.Errorf("text of %d bytes (valid UTF-8: %v)", len(ev.Text), utf8.ValidString(ev.Text))
	}
	if len(ev.Message) > agent.MaxMessageBytes || !utf8.ValidString(ev.Message) {
		t.Errorf("message of %d bytes (valid UTF-8: %v)", len(ev.Message), utf8.ValidString(ev.Message))
	}
	checkData(t, "event data", ev.Data)
}

// checkData checks that data is JSON of at most agent.MaxDataBytes
// (compact, without HTML escaping).
func checkData(t testing.TB, what string, data json.RawMessage) {
	t.Helper()
	if len(data) == 0 {
		return
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		t.Errorf("%s is not JSON: %v", what, err)
		return
	}
	if buf.Len() > agent.MaxDataBytes {
		t.Errorf("%s of %d bytes, bound %d", what, buf.Len(), agent.MaxDataBytes)
	}
	if !utf8.Valid(data) {
		t.Errorf("%s is not valid UTF-8", what)
	}
}

func checkCompletion(t testing.TB, comp agent.Completion) {
	t.Helper()
	if len(comp.FinalText) > agent.MaxFinalTextBytes || !utf8.ValidString(comp.FinalText) {
		t.Errorf("final text of %d bytes (valid UTF-8: %v)", len(comp.FinalText), utf8.ValidString(comp.FinalText))
	}
	checkData(t, "completion data", comp.Data)
	b, err := json.Marshal(comp)
	if err != nil {
		t.Fatalf("completion: %v", err)
	}
	noSecret(t, "completion", string(b))
	noSecret(t, "completion final text", comp.FinalText)
}

// toolFacet is the tools facet of agent_api.tools.structured.v1.
type toolFacet struct {
	Schema string `json:"schema"`
	Tool   *struct {
		BackendItemID *string `json:"backend_item_id"`
		ToolUseID     *string `json:"tool_use_id"`
		Phase         string  `json:"phase"`
		Status        string  `json:"status"`
	} `json:"tool"`
}

func parseFacet(ev agent.Event) (toolFacet, bool) {
	var f toolFacet
	if len(ev.Data) == 0 || json.Unmarshal(ev.Data, &f) != nil {
		return f, false
	}
	return f, f.Schema == agent.CapToolsStructured && f.Tool != nil
}

func checkToolFacet(t testing.TB, ev agent.Event) {
	t.Helper()
	if bytes.Equal(ev.Data, []byte(`{"dropped":{"reason":"oversize"}}`)) {
		return // the 64 KiB rule still applies to the facet
	}
	f, ok := parseFacet(ev)
	if !ok {
		t.Errorf("%s event without the tools facet (data %d bytes)", ev.Kind, len(ev.Data))
		return
	}
	switch f.Tool.Phase {
	case "start", "delta", "complete", "fail":
	default:
		t.Errorf("tools facet phase %q", f.Tool.Phase)
	}
	switch f.Tool.Status {
	case "pending", "running", "completed", "failed", "unknown":
	default:
		t.Errorf("tools facet status %q", f.Tool.Status)
	}
}

// checkToolOrder checks that every tool result follows a tool call, the
// one with its backend_item_id or tool_use_id when it has one.
func checkToolOrder(t testing.TB, evs []agent.Event) {
	t.Helper()
	calls := 0
	items, uses := map[string]bool{}, map[string]bool{}
	for _, ev := range evs {
		f, _ := parseFacet(ev)
		switch ev.Kind {
		case agent.EventToolCall:
			calls++
			if f.Tool != nil && f.Tool.BackendItemID != nil {
				items[*f.Tool.BackendItemID] = true
			}
			if f.Tool != nil && f.Tool.ToolUseID != nil {
				uses[*f.Tool.ToolUseID] = true
			}
		case agent.EventToolResult:
			switch {
			case f.Tool != nil && f.Tool.BackendItemID != nil && *f.Tool.BackendItemID != "":
				if !items[*f.Tool.BackendItemID] {
					t.Errorf("a tool result precedes the tool call with its backend_item_id")
				}
			case f.Tool != nil && f.Tool.ToolUseID != nil && *f.Tool.ToolUseID != "":
				if !uses[*f.Tool.ToolUseID] {
					t.Errorf("a tool result precedes the tool call with its tool_use_id")
				}
			case calls == 0:
				t.Errorf("a tool result precedes every tool call")
			}
		}
	}
}

func countKind(evs []agent.Event, k agent.EventKind) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

func noSecretEvent(t testing.TB, ev agent.Event) {
	t.Helper()
	b, err := json.Marshal(ev)
	if err != nil {
		t.Errorf("event: %v", err)
		return
	}
	noSecret(t, string(ev.Kind)+" event", string(b))
	noSecret(t, string(ev.Kind)+" event", ev.Text+ev.Message+ev.Channel)
}

func noSecret(t testing.TB, where, s string) {
	t.Helper()
	if strings.Contains(s, Secret) {
		t.Errorf("%s contains the secret", where)
	}
	if strings.Contains(s, APIKey) {
		t.Errorf("%s contains the API key", where)
	}
}

// checkProcessesGone waits (within patience) until every process id in
// pidfile has ended.
func checkProcessesGone(t interface {
	Helper()
	Errorf(format string, args ...any)
}, pidfile string, patience time.Duration) {
	t.Helper()
	b, err := os.ReadFile(pidfile)
	if err != nil {
		return // the backend started no process that reports itself
	}
	for _, line := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(line)
		if err != nil || pid <= 0 {
			t.Errorf("%s holds %q, not a process id", PIDFileEnv, line)
			continue
		}
		deadline := time.Now().Add(patience)
		for processAlive(pid) {
			if time.Now().After(deadline) {
				t.Errorf("process %d the backend started still runs after its run was cancelled and waited for", pid)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
