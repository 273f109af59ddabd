package contextos_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
	"github.com/google/go-cmp/cmp"
)

// A safety mode that withholds capabilities the pack allows says so: a
// typed notice on the compiled event and the result (a stored result
// too), and one warning in the log naming the safety mode and the
// capabilities, when the run starts. The default safety mode, read_only,
// withholds every write-class capability.
func TestSafetyModeWithholdingIsANotice(t *testing.T) {
	t.Parallel()
	refund := []compiler.ModeWithheld{{Capability: "adp_payments.issue_refund", ApprovalMode: runcontext.Destructive}}
	tests := []struct {
		name    string
		safety  runcontext.ApprovalMode // "" leaves the default
		want    []contextos.Notice
		wantLog string // the warning's attributes, "" for none
	}{
		{"default safety mode", "", []contextos.Notice{{Code: contextos.NoticeToolsWithheld, SafetyMode: runcontext.ReadOnly, Withheld: refund,
			Message: "safety_mode read_only withholds a capability the pack allows: adp_payments.issue_refund (destructive); the planner is not offered it and its calls are refused. A run context with safety_mode destructive surfaces it"}},
			`"notice":"tools_withheld_by_safety_mode","safety_mode":"read_only","withheld":["adp_payments.issue_refund (destructive)"]`},
		{"local_write", runcontext.LocalWrite, []contextos.Notice{{Code: contextos.NoticeToolsWithheld, SafetyMode: runcontext.LocalWrite, Withheld: refund,
			Message: "safety_mode local_write withholds a capability the pack allows: adp_payments.issue_refund (destructive); the planner is not offered it and its calls are refused. A run context with safety_mode destructive surfaces it"}},
			`"notice":"tools_withheld_by_safety_mode","safety_mode":"local_write","withheld":["adp_payments.issue_refund (destructive)"]`},
		{"destructive withholds nothing", runcontext.Destructive, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			h := harness(t, contextostest.NewPlanner(lookupPlan(), deniedPlan()), &contextostest.Options{Runtime: contextos.Options{
				Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))}})
			req, rc := refundRequest(t, 4200, false)
			rc.SafetyMode = tc.safety
			if tc.safety.Compare(runcontext.Delegated) < 0 {
				rc.User.Delegation = nil
			}
			var compiled *contextos.CompiledSummary
			var res *contextos.Result
			for e, err := range h.Runtime.Stream(context.Background(), req, rc) {
				if err != nil {
					t.Fatalf("Stream: %v", err)
				}
				switch e.Kind {
				case contextos.EventCompiled:
					compiled = e.Compiled
				case contextos.EventResult:
					res = e.Final
				}
			}
			if compiled == nil || res == nil {
				t.Fatalf("no compiled event (%v) or no result (%v)", compiled, res)
			}
			if diff := cmp.Diff(tc.want, compiled.Notices); diff != "" {
				t.Errorf("compiled event's notices (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, res.Notices); diff != "" {
				t.Errorf("result's notices (-want +got):\n%s", diff)
			}
			b, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			if got := bytes.Contains(b, []byte(`"notices":[{"code":"tools_withheld_by_safety_mode"`)); got != (tc.want != nil) {
				t.Errorf("result JSON has notices %v, want %v: %s", got, tc.want != nil, b)
			}
			// The stored result of the same request says it too.
			again, err := h.Runtime.Invoke(context.Background(), req, rc)
			if err != nil {
				t.Fatalf("Invoke again: %v", err)
			}
			if diff := cmp.Diff(tc.want, again.Notices); diff != "" {
				t.Errorf("stored result's notices (-want +got):\n%s", diff)
			}
			var warnings []string
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				if strings.Contains(line, "safety mode withholds") {
					warnings = append(warnings, line)
				}
			}
			switch {
			case tc.wantLog == "" && len(warnings) != 0:
				t.Errorf("warnings = %q, want none", warnings)
			case tc.wantLog != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], `"level":"WARN"`) || !strings.Contains(warnings[0], tc.wantLog) || !strings.Contains(warnings[0], `"run_id":"`+res.RunID+`"`)):
				t.Errorf("warnings = %q, want one naming %s", warnings, tc.wantLog)
			}
		})
	}
}

// A run under the default safety mode, read_only, is offered no
// write-class tool: its result says which capabilities the safety mode
// withheld, and which safety mode would surface them (the compiled event
// says it too, and the runtime logs it as a warning).
func ExampleNotice() {
	ctx := context.Background()
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)) // use a real key
	kid := pack.KeyID(key.Public().(ed25519.PublicKey))
	p, err := pack.DecodeAndValidate(fixture.SupportPack(), nil)
	if err != nil {
		log.Fatal(err)
	}
	signed, err := pack.Sign(p, kid, key, nil)
	if err != nil {
		log.Fatal(err)
	}
	registry := pack.NewMemoryRegistry(nil)
	entry, err := registry.Put(ctx, signed)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := pack.Publish(ctx, registry, entry.Ref, "release",
		pack.Signoff{Reviewer: "arch-reviewer", Role: pack.RoleArchitecture}, pack.Signoff{Reviewer: "security-reviewer", Role: pack.RoleSecurity},
		pack.Signoff{Reviewer: "data-reviewer", Role: pack.RoleData}, pack.Signoff{Reviewer: "eval-reviewer", Role: pack.RoleEvaluation}); err != nil {
		log.Fatal(err)
	}
	keys := runcontext.NewStaticKeys(map[string]ed25519.PublicKey{kid: key.Public().(ed25519.PublicKey)})
	// A planner that decides at once; a model goes here.
	planner := contextos.PlannerFunc(func(context.Context, *contextos.PlanRequest) (*contextos.Plan, error) {
		return &contextos.Plan{Decision: &contextos.DecisionProposal{DecisionKey: "support.refund.execute", Outcome: "escalated", Confidence: 1}}, nil
	})
	rt, err := contextos.New(planner, registry, keys, &contextos.Options{Ontologies: []string{"ont.support@1.0.0"}})
	if err != nil {
		log.Fatal(err)
	}
	req, err := runcontext.DecodeInvokeRequest(fixture.Invoke())
	if err != nil {
		log.Fatal(err)
	}
	rc, err := runcontext.DecodeRunContext(fixture.RunContext())
	if err != nil {
		log.Fatal(err)
	}
	rc.SafetyMode, rc.User.Delegation = "", nil // the default safety mode: read_only

	res, err := rt.Invoke(ctx, req, rc)
	if err != nil {
		log.Fatal(err)
	}
	for _, n := range res.Notices {
		fmt.Println(n.Code, n.SafetyMode, n.Withheld)
		fmt.Println(n.Message)
	}
	// Output:
	// tools_withheld_by_safety_mode read_only [{adp_payments.issue_refund destructive}]
	// safety_mode read_only withholds a capability the pack allows: adp_payments.issue_refund (destructive); the planner is not offered it and its calls are refused. A run context with safety_mode destructive surfaces it
}
