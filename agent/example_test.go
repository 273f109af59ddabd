package agent_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/contextos/contextos/agent"
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
