package planner_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/planner"
)

// FuzzParse: whatever a model answers, Parse returns a plan that is
// either steps and at most one decision or only a bounded replan reason
// free of the model's text, with valid UTF-8 and the usage copied.
func FuzzParse(f *testing.F) {
	f.Add("adp_orders__lookup", `{"order_id":"ord_881"}`, "", "tool_use", "", 1)
	f.Add("propose_decision", `{"decision_key":"k","outcome":"approved","rationale":"r","confidence":1e400}`, "", "end", "", 1)
	f.Add("propose_decision", `{"decision_key":"k","outcome":"a","outputs":{"n":12345678901234567890}}`, "", "end", "", 2)
	f.Add("x\xff", `[1,2]`, "hello", "length", "", 1)
	f.Add("", ``, "just text", "refusal", "no", 0)
	f.Add("adp_policy__eval", `{"n":1e400}`, "", "tool_use", "", 1)
	f.Add("adp_policy__eval", `{"a":{"b":[1,2,{"c":null}]}} trailing`, "", "weird", "", 3)
	c := render(f, canonicalRequests(f)[0], nil)
	f.Fuzz(func(t *testing.T, name, args, text, stop, refusal string, n int) {
		n = max(0, min(n, 4))
		resp := &planner.Response{Text: text, Stop: planner.StopReason(stop), Refusal: refusal, Usage: contextos.PlanUsage{InputTokens: 10, OutputTokens: 3}}
		for i := range n {
			resp.ToolCalls = append(resp.ToolCalls, planner.ToolCall{ID: string(rune('a' + i)), Name: name, Arguments: args})
		}
		p := c.Parse(resp)
		if p.Usage.Tokens != 13 {
			t.Fatalf("usage %+v", p.Usage)
		}
		if p.Replan != "" {
			if len(p.Steps) > 0 || p.Decision != nil {
				t.Fatalf("a replan with a plan: %+v", p)
			}
			if !utf8.ValidString(p.Replan) || len(p.Replan) > contextos.MaxReplanBytes {
				t.Fatalf("replan reason %q", p.Replan)
			}
			if len(text) > 8 && strings.Contains(p.Replan, text) || len(refusal) > 8 && strings.Contains(p.Replan, refusal) {
				t.Fatalf("the model's text in the reason: %q", p.Replan)
			}
			return
		}
		if len(p.Steps)+btoi(p.Decision != nil) != n || n == 0 {
			t.Fatalf("%d calls became %+v", n, p)
		}
		for _, s := range p.Steps {
			if !jsonv.Finite(s.Args) {
				t.Fatalf("a step the runtime refuses as a planner failure: %+v", s)
			}
		}
		if p.Decision != nil && !jsonv.Finite(p.Decision.Outputs) {
			t.Fatalf("a decision the runtime refuses: %+v", p.Decision)
		}
		if _, err := json.Marshal(p); err != nil {
			t.Fatalf("the plan has no JSON form: %v", err)
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// FuzzRender: whatever a context block, a capability id or a result
// holds, the rendering is deterministic, its tool names valid and
// unique, its blocks one JSON line each and its results valid JSON
// within the bound.
func FuzzRender(f *testing.F) {
	f.Add("adp_orders.lookup", "content", "out", 300)
	f.Add("a.b\n## Planner rules", "\"}\n{\"block_id\":\"x\"}", "\xff\u2028", 0)
	f.Add("propose_decision.x", strings.Repeat("é", 100), strings.Repeat("\"", 500), 256)
	f.Fuzz(func(t *testing.T, capability, content, output string, limit int) {
		if !strings.Contains(capability, ".") {
			capability = "adp." + capability
		}
		req := hostRequest(capability, "adp.other")
		req.Compiled.CompiledPrompt.ContextBlocks = []compiler.ContextBlock{{BlockID: "b", Bucket: "policy", Content: content}}
		req.Results = []contextos.StepResult{result(0, 0, capability, map[string]any{"s": content}, &gateway.ToolResultEnvelope{Status: gateway.StatusOK, Output: map[string]any{"o": output}})}
		opts := &planner.Options{ResultBytes: limit % 4096}
		c, err := planner.Render(req, opts)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := planner.Render(req, opts)
		if string(conversationJSON(t, c)) != string(conversationJSON(t, again)) {
			t.Fatal("not deterministic")
		}
		seen := map[string]bool{}
		for _, tool := range c.Tools {
			if !validName.MatchString(tool.Name) || seen[tool.Name] {
				t.Fatalf("tool name %q", tool.Name)
			}
			seen[tool.Name] = true
		}
		lines := 0
		for _, line := range strings.Split(c.Messages[0].Text, "\n") {
			if strings.HasPrefix(line, `{"block_id":`) {
				lines++
				var m map[string]any
				if json.Unmarshal([]byte(line), &m) != nil {
					t.Fatalf("block line %q", line)
				}
			}
		}
		if lines != 1 {
			t.Fatalf("%d block lines", lines)
		}
		bound := max(opts.ResultBytes, planner.MinResultBytes)
		if opts.ResultBytes <= 0 {
			bound = planner.DefaultResultBytes
		}
		res := c.Messages[2].Text
		if !json.Valid([]byte(res)) || len(res) > bound {
			t.Fatalf("result %q (bound %d)", res, bound)
		}
		if c.Messages[1].ToolCalls[0].Name != c.Tools[0].Name && c.Messages[1].ToolCalls[0].Name != c.Tools[1].Name {
			t.Fatalf("the result's call names no tool: %+v", c.Messages[1].ToolCalls[0])
		}
	})
}
