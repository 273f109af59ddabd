package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/gateway"
)

// shout is a host's own in-process agent: it answers the prompt in upper
// case. Like every backend it validates the request with Prepare before
// anything runs, and returns the handle Start makes around its driver.
type shout struct{}

func (shout) Kind() agent.Kind { return "shout" }

func (shout) Capabilities() agent.Capabilities {
	return agent.NewCapabilities(agent.CapRun, agent.CapEvents, agent.CapFinalText, agent.CapCancel)
}

func (b shout) Run(ctx context.Context, req agent.RunRequest) (*agent.Run, error) {
	p, err := agent.Prepare(b.Kind(), b.Capabilities(), req, agent.Defaults{Timeout: time.Minute})
	if err != nil {
		return nil, err
	}
	cfg := agent.RunConfig{Kind: b.Kind(), Capabilities: b.Capabilities(), Timeout: p.Timeout}
	return agent.Start(ctx, cfg, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		out.Emit(agent.Event{Kind: agent.EventStatus, Channel: "status", Message: "started"})
		answer := strings.ToUpper(p.Prompt)
		out.Emit(agent.Event{Kind: agent.EventTextOutput, Channel: "assistant", Text: answer})
		return agent.Completion{Status: agent.ExitStatus{Code: 0}, FinalText: answer,
			Data: []byte(`{"usage":{"input_tokens":3,"output_tokens":3},"cost_usd":0.001}`)}, nil
	}), nil
}

// A backend registered in a Gateway runs by kind: read its events, then
// wait for its completion.
func Example() {
	gw, err := agent.NewGateway(shout{})
	if err != nil {
		panic(err)
	}
	run, err := gw.Run(context.Background(), "shout", agent.RunRequest{Prompt: "hello, agent"})
	if err != nil {
		panic(err)
	}
	for ev := range run.Events() {
		fmt.Printf("%s %s%s\n", ev.Kind, ev.Message, ev.Text)
	}
	comp, err := run.Wait(context.Background())
	if err != nil {
		panic(err)
	}
	u, _ := agent.UsageOf(comp)
	fmt.Printf("%s: %q, %d tokens\n", comp.Status, comp.FinalText, u.Tokens())

	_, err = gw.Run(context.Background(), "shout", agent.RunRequest{Prompt: " "})
	fmt.Println(err)
	// Output:
	// status started
	// text_output HELLO, AGENT
	// exit status 0: "HELLO, AGENT", 6 tokens
	// invalid request: prompt must not be empty
}

// Under governance a backend is a delegated tool: register the adapter's
// registration with the runtime (contextos.Options.Adapters), and permit
// "<adapter id>.run" in the pack, behind an approval gate if it should
// wait for a reviewer. The gateway checks the arguments against the
// schema, runs the agent at most once per idempotency key and never
// retries it.
func ExampleAdapter() {
	ad := agent.NewAdapter(shout{}, &agent.AdapterOptions{AdapterID: "adp_shout", Scopes: []string{"repo.write"}, Timeout: 5 * time.Minute})
	reg := ad.Registration()
	c := reg.Capabilities[agent.AdapterCapability]
	fmt.Println(ad.CapabilityID(), c.ArgSchemaRef, c.Timeout, c.MaxAttempts, c.HonorsContext, c.Scopes)
	// Output:
	// adp_shout.run schema://contextos.agent.run.v1 5m0s 1 true [repo.write]
}

// A delegated call's arguments are the planner's choice, so the host says
// what a call may choose: here a model, and one working directory. A call
// that asks for anything else — another directory, an extra writable
// directory, another sandbox mode — is refused before the agent runs.
func ExampleCallLimits() {
	ad := agent.NewAdapter(shout{}, &agent.AdapterOptions{
		AdapterID: "adp_shout",
		Scopes:    []string{"repo.write"},
		Allow: agent.CallLimits{
			WorkingDirs: []string{"/srv/repo"},
			Extensions:  map[string][]json.RawMessage{agent.CapModel: {json.RawMessage(`"gpt-test"`)}},
		},
	})
	call := &gateway.Call{Envelope: &gateway.ToolCallEnvelope{ToolCallID: "tc_1", CapabilityID: ad.CapabilityID(),
		Args: map[string]any{"prompt": "fix it", "working_dir": "/"}}, Capability: agent.AdapterCapability, IdempotencyKey: "idem_1"}
	_, err := ad.Call(context.Background(), call)
	var le *agent.LimitError
	fmt.Println(errors.Is(err, agent.ErrNotAllowed), errors.As(err, &le) && le.Field == "working_dir")
	fmt.Println(err)
	// Output:
	// true true
	// agent: working_dir is not one the host allows
}
