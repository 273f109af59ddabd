package gateway_test

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/runcontext"
)

// ReportProgress relays a report to the context's receiver with the call's
// ids and attempt, the message redacted and bounded; it drops reports
// with a number that is not finite, reports made once the context is done,
// and everything when nobody listens.
func TestReportProgress(t *testing.T) {
	t.Parallel()
	call := &gateway.Call{Envelope: &gateway.ToolCallEnvelope{ToolCallID: "tool_0123456789abcdef", CapabilityID: "adp_orders.lookup"}, Attempt: 2}
	long := strings.Repeat("x", 190) + " card 4111 1111 1111 1111 " + strings.Repeat("y", 100)
	tests := []struct {
		name string
		p    gateway.Progress
		done bool
		want *gateway.Progress
	}{
		{name: "plain", p: gateway.Progress{Progress: 1, Total: 4, Message: "reading"},
			want: &gateway.Progress{ToolCallID: "tool_0123456789abcdef", CapabilityID: "adp_orders.lookup", Attempt: 2, Progress: 1, Total: 4, Message: "reading"}},
		{name: "ids the adapter sets are the call's", p: gateway.Progress{ToolCallID: "tool_other", CapabilityID: "adp_x.y", Attempt: 9, Progress: 0.5},
			want: &gateway.Progress{ToolCallID: "tool_0123456789abcdef", CapabilityID: "adp_orders.lookup", Attempt: 2, Progress: 0.5}},
		{name: "a card number is redacted, then the message clipped", p: gateway.Progress{Progress: 2, Message: long},
			want: &gateway.Progress{ToolCallID: "tool_0123456789abcdef", CapabilityID: "adp_orders.lookup", Attempt: 2, Progress: 2,
				Message: (strings.Repeat("x", 190) + " card [REDACTED] " + strings.Repeat("y", 100))[:197] + "…"}},
		{name: "NaN progress", p: gateway.Progress{Progress: math.NaN()}},
		{name: "infinite total", p: gateway.Progress{Progress: 1, Total: math.Inf(1)}},
		{name: "context done", p: gateway.Progress{Progress: 1}, done: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []gateway.Progress
			c, cancel := context.WithCancel(gateway.WithProgress(ctx, func(p gateway.Progress) { got = append(got, p) }))
			defer cancel()
			if tc.done {
				cancel()
			}
			if !gateway.ProgressWanted(c) {
				t.Fatal("ProgressWanted is false under WithProgress")
			}
			gateway.ReportProgress(c, call, tc.p)
			switch {
			case tc.want == nil && len(got) != 0:
				t.Errorf("relayed %+v, want nothing", got)
			case tc.want != nil && (len(got) != 1 || got[0] != *tc.want):
				t.Errorf("relayed %+v, want %+v", got, *tc.want)
			}
		})
	}
	// Nobody listening: nothing wanted, nothing relayed, no panic.
	if gateway.ProgressWanted(ctx) || gateway.ProgressWanted(gateway.WithProgress(ctx, nil)) {
		t.Error("ProgressWanted without a receiver")
	}
	gateway.ReportProgress(ctx, call, gateway.Progress{Progress: 1})
	gateway.ReportProgress(gateway.WithProgress(ctx, func(gateway.Progress) { t.Error("a report without a call") }), nil, gateway.Progress{Progress: 1})
}

// A progress message an adapter relays during a governed call is redacted
// by the run's active rules too, a host's own rule among them, not only
// by the built-in catalogue; a report made outside a gateway call gets the
// built-in rules only.
func TestProgressAppliesRunRules(t *testing.T) {
	emp, err := gateway.RegexpRedactor(`\bEMP-\d{6}\b`)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	cc := *f.cc
	cc.RuntimeControls.RedactionRulesActive = append(slices.Clone(cc.RuntimeControls.RedactionRulesActive), "employee_id")
	gw, err := gateway.New([]gateway.Registration{{AdapterID: "adp_orders", Adapter: gateway.AdapterFunc(func(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
		gateway.ReportProgress(ctx, c, gateway.Progress{Progress: 1, Message: "owner EMP-123456, card 4111 1111 1111 1111"})
		return &gateway.Outcome{Output: map[string]any{"order_id": "ord_881"}}, nil
	}), Capabilities: map[string]gateway.Capability{"lookup": {ArgsSchema: lookupSchema}}}}, &gateway.Options{Redactors: map[string]gateway.Redactor{"employee_id": emp}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := gw.NewRun(gateway.RunConfig{Prepared: f.prepared, Compiled: &cc, Request: f.req, RunContext: f.rc, Meter: runcontext.NewMeter(f.rc.RunBudget, f.now)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []gateway.Progress
	if _, err := run.Call(gateway.WithProgress(ctx, func(p gateway.Progress) { got = append(got, p) }), lookupCall()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Message != "owner [REDACTED], card [REDACTED]" {
		t.Errorf("progress = %+v, want the message with the host rule's and the card's matches redacted", got)
	}
	// Outside a gateway call: the built-in catalogue only.
	got = nil
	call := &gateway.Call{Envelope: &gateway.ToolCallEnvelope{ToolCallID: "tool_x", CapabilityID: "adp_orders.lookup"}, Attempt: 1}
	gateway.ReportProgress(gateway.WithProgress(ctx, func(p gateway.Progress) { got = append(got, p) }), call, gateway.Progress{Progress: 1, Message: "owner EMP-123456"})
	if len(got) != 1 || got[0].Message != "owner EMP-123456" {
		t.Errorf("progress outside a run = %+v", got)
	}
}
