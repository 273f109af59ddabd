package gateway

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/runcontext"
)

// The run's members, encoded once per run, give the bytes the general
// encoder gives for every envelope the run built; an envelope that no
// longer carries the run's ids or principal chain is encoded afresh.
func TestRunMembers(t *testing.T) {
	t.Parallel()
	pol := "pol_1"
	for _, session := range []string{"sess_1", ""} {
		chain := []runcontext.Principal{{ID: "usr_1", Kind: "user", TenantID: "t"}, {ID: "agent:x@1.0.0", Kind: "agent"}}
		m := newRunMembers("run_1", session, "4bf92f3577b34da6a3ce929d0e0e4736", chain)
		build := func() (*callRecord, *ToolResultEnvelope) {
			c := &callRecord{env: ToolCallEnvelope{EnvelopeVersion: CallEnvelopeVersion, ToolCallID: "tool_1", RunID: "run_1", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SessionID: session,
				CapabilityID: "a.b", Args: map[string]any{"x": "y"}, PrincipalChain: chain, EvidenceRefs: []string{}, PolicyDecisionID: &pol,
				ApprovalModeRequested: runcontext.ReadOnly, ApprovalModeEffective: runcontext.ReadOnly, ApprovalModeHighest: runcontext.ReadOnly}}
			args := []byte(`{"x":"y"}`)
			c.args = &args
			res := newResult(c, &pol)
			res.env.Status, res.env.Output = StatusOK, map[string]any{"ok": true}
			return c, &res.env
		}
		for _, c := range []struct {
			name     string
			change   func(*ToolCallEnvelope, *ToolResultEnvelope)
			fastPath bool
		}{
			{"as built", func(*ToolCallEnvelope, *ToolResultEnvelope) {}, true},
			{"other run id", func(e *ToolCallEnvelope, r *ToolResultEnvelope) { e.RunID, r.RunID = "run_2", "run_2" }, false},
			{"other session", func(e *ToolCallEnvelope, r *ToolResultEnvelope) { e.SessionID, r.SessionID = "sess_2", "sess_2" }, false},
			{"other trace", func(e *ToolCallEnvelope, r *ToolResultEnvelope) { e.TraceID, r.TraceID = "t", "t" }, false},
			{"other version", func(e *ToolCallEnvelope, r *ToolResultEnvelope) { e.EnvelopeVersion, r.EnvelopeVersion = "v2", "v2" }, true},
			{"a copy of the chain", func(e *ToolCallEnvelope, _ *ToolResultEnvelope) { e.PrincipalChain = slices.Clone(chain) }, false},
			{"another chain", func(e *ToolCallEnvelope, _ *ToolResultEnvelope) { e.PrincipalChain = chain[:1] }, false},
		} {
			t.Run(session+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				rec, res := build()
				env := &rec.env
				c.change(env, res)
				for _, x := range []struct {
					fast    canon.Appender
					general any
				}{{callEncoding{e: env, args: rec.argsJSON(), meta: rec.metaJSON(), m: m}, env}, {resultEncoding{r: res, m: m}, res}} {
					got, err := x.fast.AppendCanonical(nil)
					if err != nil {
						t.Fatal(err)
					}
					want, err := canon.JSON(x.general)
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(string(want), string(got)); diff != "" {
						t.Errorf("recorded form differs from the general encoder's (-general +recorded):\n%s", diff)
					}
				}
				if used := m.matches(env.RunID, env.SessionID, env.TraceID) && m.sharesPrincipals(env.PrincipalChain); used != c.fastPath {
					t.Errorf("run members used = %v, want %v", used, c.fastPath)
				}
			})
		}
	}
}
