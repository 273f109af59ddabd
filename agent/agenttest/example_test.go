package agenttest_test

import (
	"context"
	"fmt"

	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/agent/agenttest"
)

// A host tests its code against a scripted backend.
func Example() {
	b := agenttest.New("scripted", agent.NewCapabilities(agent.CapFinalText), agenttest.Script{
		Events: []agent.Event{
			{Kind: agent.EventStatus, Channel: "status", Message: "thinking"},
			{Kind: agent.EventTextOutput, Channel: "assistant", Text: "4"},
		},
		Completion: agent.Completion{FinalText: "4"},
	})
	g, err := agent.NewGateway(b)
	if err != nil {
		panic(err)
	}
	run, err := g.Run(context.Background(), "scripted", agent.RunRequest{Prompt: "2+2?"})
	if err != nil {
		panic(err)
	}
	for ev := range run.Events() {
		fmt.Println(ev.AgentKind, ev.Kind, ev.Message+ev.Text)
	}
	comp, err := run.Wait(context.Background())
	fmt.Println(comp.Status, comp.FinalText, err)
	fmt.Println("runs:", b.Runs(), "prompt:", b.Requests()[0].Prompt)
	// Output:
	// scripted status thinking
	// scripted text_output 4
	// exit status 0 4 <nil>
	// runs: 1 prompt: 2+2?
}
