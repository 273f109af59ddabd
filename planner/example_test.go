package planner_test

import (
	"fmt"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/planner"
)

// exampleRequest is a plan request as a host might build it: a compiled
// context surfacing one capability.
func exampleRequest() *contextos.PlanRequest {
	return &contextos.PlanRequest{Compiled: &compiler.CompiledContext{
		CompiledPrompt: compiler.CompiledPrompt{System: "You are a support agent.", Task: "Refund order ord_881 for INR 4200",
			ContextBlocks: []compiler.ContextBlock{{BlockID: "ev_0", Bucket: "evidence", Content: "Order ord_881, total INR 4200, delivered."}}},
		Manifests: compiler.Manifests{ToolManifest: []compiler.ToolManifestEntry{{AdapterID: "adp_orders", Capabilities: []string{"lookup"},
			CapabilityMetadata: map[string]compiler.CapabilityMetadata{"lookup": {Kind: "read", RiskLevel: "read_only", ApprovalMode: "read_only"}}}}},
	}}
}

func ExampleRender() {
	c, err := planner.Render(exampleRequest(), &planner.Options{Instructions: "Answer in English."})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range c.Tools {
		fmt.Printf("tool %s for %q\n", t.Name, t.Capability)
	}
	fmt.Println(c.Messages[0].Role, "message, cache breakpoint:", c.Messages[0].Cache)
	id, _ := c.Capability("adp_orders__lookup")
	fmt.Println("adp_orders__lookup calls", id)
	// Output:
	// tool adp_orders__lookup for "adp_orders.lookup"
	// tool propose_decision for ""
	// user message, cache breakpoint: true
	// adp_orders__lookup calls adp_orders.lookup
}

func ExampleConversation_Parse() {
	c, err := planner.Render(exampleRequest(), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	// A provider package maps its API's answer to a Response.
	plan := c.Parse(&planner.Response{Stop: planner.StopToolUse,
		ToolCalls: []planner.ToolCall{{ID: "toolu_1", Name: "adp_orders__lookup", Arguments: `{"order_id":"ord_881"}`}},
		Usage:     contextos.PlanUsage{InputTokens: 1200, OutputTokens: 40, CachedInputTokens: 1000}})
	fmt.Println(plan.Steps[0].CapabilityID, plan.Steps[0].Args["order_id"], plan.Usage.Tokens)

	// An answer in text only is a replan, which the critic sends back.
	plan = c.Parse(&planner.Response{Stop: planner.StopEnd, Text: "Refund issued!"})
	fmt.Println(plan.Replan)

	price := planner.Price{InputUSDPerMTok: 3, CachedInputUSDPerMTok: 0.3, OutputUSDPerMTok: 15}
	fmt.Printf("%.4f cents\n", price.Cents(contextos.PlanUsage{InputTokens: 1200, OutputTokens: 40, CachedInputTokens: 1000}, 0))
	// Output:
	// adp_orders.lookup ord_881 1240
	// no_tool_call: the model answered in text without calling a tool; act by calling a tool, or decide with propose_decision
	// 0.1500 cents
}
