package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/contextos/contextos/agent"
)

const secret = "RAW-STDERR-SECRET"

// dummy is a backend that records its runs.
type dummy struct {
	kind agent.Kind
	caps agent.Capabilities
	runs int
}

func (d *dummy) Kind() agent.Kind                 { return d.kind }
func (d *dummy) Capabilities() agent.Capabilities { return d.caps }
func (d *dummy) Run(ctx context.Context, req agent.RunRequest) (*agent.Run, error) {
	if _, err := agent.Prepare(d.kind, d.caps, req, agent.Defaults{}); err != nil {
		return nil, err
	}
	d.runs++
	return agent.Start(ctx, agent.RunConfig{Kind: d.kind, Capabilities: d.caps}, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		out.Emit(agent.Event{Kind: agent.EventTextOutput, Text: "ok"})
		return agent.Completion{}, nil
	}), nil
}

func TestKindEnforcesNamingRules(t *testing.T) {
	for _, ok := range []string{"codex", "claude_code", "a", "a1_b2", strings.Repeat("k", 64)} {
		if k, err := agent.NewKind(ok); err != nil || string(k) != ok {
			t.Errorf("NewKind(%q) = %q, %v", ok, k, err)
		}
	}
	cases := []struct{ kind, want string }{
		{"", "invalid agent kind: agent kind must not be empty"},
		{"Codex", "invalid agent kind: agent kind must start with a lowercase ASCII letter"},
		{"1codex", "invalid agent kind: agent kind must start with a lowercase ASCII letter"},
		{"_codex", "invalid agent kind: agent kind must start with a lowercase ASCII letter"},
		{"codex-1", "invalid agent kind: agent kind must match ^[a-z][a-z0-9_]*$"},
		{"codeX", "invalid agent kind: agent kind must match ^[a-z][a-z0-9_]*$"},
		{"co dex", "invalid agent kind: agent kind must match ^[a-z][a-z0-9_]*$"},
		{"codex." + secret, "invalid agent kind: agent kind must match ^[a-z][a-z0-9_]*$"},
	}
	for _, c := range cases {
		k, err := agent.NewKind(c.kind)
		if k != "" || !errors.Is(err, agent.ErrInvalidAgentKind) || err.Error() != c.want {
			t.Errorf("NewKind(%q) = %q, %v; want %q", c.kind, k, err, c.want)
		}
	}
}

func TestCapabilitiesContainsIsSetMembership(t *testing.T) {
	c := agent.NewCapabilities(agent.CapRun, agent.CapEvents, agent.CapRun, "", agent.CapCancel)
	want := []string{agent.CapCancel, agent.CapEvents, agent.CapRun}
	if got := c.IDs(); strings.Join(got, ",") != strings.Join(want, ",") || c.Len() != 3 || c.String() != strings.Join(want, ",") {
		t.Fatalf("IDs() = %v, Len %d, String %q", got, c.Len(), c.String())
	}
	for _, id := range want {
		if !c.Contains(id) {
			t.Errorf("Contains(%q) = false", id)
		}
	}
	for _, id := range []string{"", "agent_api", "agent_api.run.v1", agent.CapEventsLive} {
		if c.Contains(id) {
			t.Errorf("Contains(%q) = true", id)
		}
	}
	c.IDs()[0] = "mutated"
	if !c.Contains(agent.CapCancel) {
		t.Error("IDs() shares the set")
	}
	w := c.With(agent.CapModel)
	if !w.Contains(agent.CapModel) || c.Contains(agent.CapModel) {
		t.Error("With changed the receiver or missed the id")
	}
	b, err := json.Marshal(c)
	if err != nil || string(b) != `["agent_api.control.cancel.v1","agent_api.events","agent_api.run"]` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var back agent.Capabilities
	if err := json.Unmarshal([]byte(`["b.x","a.y","b.x"]`), &back); err != nil || back.String() != "a.y,b.x" {
		t.Fatalf("Unmarshal = %q, %v", back, err)
	}
	if b, _ := json.Marshal(agent.Capabilities{}); string(b) != "[]" {
		t.Errorf("empty set = %s", b)
	}
}

func TestGatewayRegisterAndBackendRoundtrip(t *testing.T) {
	var g agent.Gateway
	b1 := &dummy{kind: "zeta"}
	b2 := &dummy{kind: "alpha"}
	for _, b := range []*dummy{b1, b2} {
		if err := g.Register(b); err != nil {
			t.Fatal(err)
		}
	}
	if got, ok := g.Backend("zeta"); !ok || got != agent.Backend(b1) {
		t.Error("Backend(zeta) did not return the registered backend")
	}
	if _, ok := g.Backend("missing"); ok {
		t.Error("Backend(missing) found one")
	}
	if kinds := g.Kinds(); len(kinds) != 2 || kinds[0] != "alpha" || kinds[1] != "zeta" {
		t.Errorf("Kinds() = %v, want sorted", kinds)
	}
	if _, err := agent.NewGateway(b1, b1); err == nil {
		t.Error("NewGateway accepted a duplicate")
	}
}

func TestGatewayRegisterRejectsDuplicateKind(t *testing.T) {
	g, err := agent.NewGateway(&dummy{kind: "dummy"})
	if err != nil {
		t.Fatal(err)
	}
	err = g.Register(&dummy{kind: "dummy"})
	if !errors.Is(err, agent.ErrInvalidRequest) || err.Error() != "invalid request: backend already registered: dummy" {
		t.Fatalf("Register(duplicate) = %v", err)
	}
	if err := g.Register(nil); !errors.Is(err, agent.ErrInvalidRequest) || err.Error() != "invalid request: backend must not be nil" {
		t.Fatalf("Register(nil) = %v", err)
	}
	if err := g.Register(&dummy{kind: "Bad-" + secret}); !errors.Is(err, agent.ErrInvalidAgentKind) || strings.Contains(err.Error(), secret) {
		t.Fatalf("Register(invalid kind) = %v", err)
	}
}

func TestGatewayRunUnknownBackendIsError(t *testing.T) {
	d := &dummy{kind: "dummy", caps: agent.NewCapabilities(agent.CapRun, agent.CapEvents)}
	g, _ := agent.NewGateway(d)
	run, err := g.Run(t.Context(), "other", agent.RunRequest{Prompt: "hi"})
	if run != nil || !errors.Is(err, agent.ErrUnknownBackend) || err.Error() != "unknown backend: other" {
		t.Fatalf("Run(other) = %v", err)
	}
	var ae *agent.Error
	if !errors.As(err, &ae) || ae.AgentKind != "other" {
		t.Fatalf("errors.As: %#v", ae)
	}
	_, err = g.Run(t.Context(), agent.Kind("x<"+secret+">"), agent.RunRequest{Prompt: "hi"})
	if !errors.Is(err, agent.ErrInvalidAgentKind) || strings.Contains(err.Error(), secret) {
		t.Fatalf("Run(invalid kind) = %v", err)
	}
	run, err = g.Run(t.Context(), "dummy", agent.RunRequest{Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	for range run.Events() {
	}
	if _, err := run.Wait(t.Context()); err != nil || d.runs != 1 {
		t.Fatalf("Wait() = %v, runs %d", err, d.runs)
	}
}

func TestRunControlMissingCapabilityIsUnsupported(t *testing.T) {
	release := make(chan struct{})
	run := agent.Start(t.Context(), agent.RunConfig{Kind: "dummy", Capabilities: agent.NewCapabilities(agent.CapRun)}, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		<-release
		return agent.Completion{FinalText: "done"}, nil
	})
	err := run.Cancel()
	if !errors.Is(err, agent.ErrUnsupportedCapability) || err.Error() != "unsupported capability for dummy: agent_api.control.cancel.v1" {
		t.Fatalf("Cancel() = %v", err)
	}
	close(release)
	for range run.Events() {
	}
	comp, err := run.Wait(t.Context())
	if err != nil || comp.FinalText != "done" {
		t.Fatalf("Cancel without the capability changed the run: %v, %v", comp, err)
	}
}

func TestErrorKindsAndMessages(t *testing.T) {
	cause := errors.New(secret)
	execErr := &exec.Error{Name: "/bin/" + secret, Err: exec.ErrNotFound}
	cases := []struct {
		err  error
		kind error
		want string
	}{
		{agent.InvalidRequest("prompt must not be empty"), agent.ErrInvalidRequest, "invalid request: prompt must not be empty"},
		{agent.BackendError("spawn failed", execErr, nil, cause), agent.ErrBackend, "backend error: spawn failed"},
	}
	all := []error{agent.ErrUnknownBackend, agent.ErrUnsupportedCapability, agent.ErrInvalidAgentKind, agent.ErrInvalidRequest, agent.ErrBackend, agent.ErrCancelled}
	for _, c := range cases {
		if c.err.Error() != c.want || strings.Contains(c.err.Error(), secret) {
			t.Errorf("%v, want %q", c.err, c.want)
		}
		for _, k := range all {
			if errors.Is(c.err, k) != (k == c.kind) {
				t.Errorf("errors.Is(%v, %v) = %v", c.err, k, !(k == c.kind))
			}
		}
	}
	be := agent.BackendError("spawn failed", execErr, cause)
	var ee *exec.Error
	if !errors.As(be, &ee) || !errors.Is(be, cause) || !errors.Is(be, exec.ErrNotFound) {
		t.Error("the causes are not kept for errors.Is/As")
	}
}
