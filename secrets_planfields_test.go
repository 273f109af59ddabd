package contextos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

// Free-text members of a plan that redactPlan does not pass through the
// secret detectors: each, carrying a vendor key, must reach no record,
// checkpoint, packet, transcript, event or log line.
func TestSecretsInPlanFreeTextNeverStored(t *testing.T) {
	const secret = "sk-proj-hr4unredactedplanfield0001"
	cases := map[string]func(pr *contextos.PlanRequest) *contextos.Plan{
		"decision key": func(pr *contextos.PlanRequest) *contextos.Plan {
			if pr.Turn == 0 {
				return lookupPlan()
			}
			pl := deniedPlan()
			pl.Decision.DecisionKey = "support.refund " + secret
			return pl
		},
		"decision outcome": func(pr *contextos.PlanRequest) *contextos.Plan {
			if pr.Turn == 0 {
				return lookupPlan()
			}
			pl := deniedPlan()
			pl.Decision.Outcome = "denied " + secret
			return pl
		},
		"step capability id": func(pr *contextos.PlanRequest) *contextos.Plan {
			if pr.Turn == 0 {
				return &contextos.Plan{Steps: []contextos.Step{{CapabilityID: "adp_orders.lookup " + secret, Args: map[string]any{"order_id": "ord_881"}}}}
			}
			return deniedPlan()
		},
		"step attachment": func(pr *contextos.PlanRequest) *contextos.Plan {
			if pr.Turn == 0 {
				pl := lookupPlan()
				pl.Steps[0].Attachments = []string{"att:" + secret}
				return pl
			}
			return deniedPlan()
		},
		"memory write class": func(pr *contextos.PlanRequest) *contextos.Plan {
			if pr.Turn == 0 {
				return lookupPlan()
			}
			pl := deniedPlan()
			pl.Memory = []contextos.MemoryProposal{{WriteClass: "case_note " + secret, Content: "noted", Confidence: 0.9}}
			return pl
		},
	}
	for name, plan := range cases {
		t.Run(name, func(t *testing.T) {
			doc := strings.Replace(string(readTestdata(t, "ctxpack.support-1.0.0.json")), `"redaction_rules": ["pan", "credit_card"]`, `"redaction_rules": []`, 1)
			var logs bytes.Buffer
			cps := &capturingCheckpoints{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints()}
			pks := &capturingPackets{InMemoryPackets: contextos.NewInMemoryPackets()}
			p := contextos.PlannerFunc(func(_ context.Context, pr *contextos.PlanRequest) (*contextos.Plan, error) {
				if pr.Turn > 3 {
					return deniedPlan(), nil
				}
				return plan(pr), nil
			})
			h := contextostest.New(t, p, [][]byte{[]byte(doc)}, &contextostest.Options{
				Runtime: contextos.Options{Evidence: evidence(t), ReplaySampleRate: 1, Checkpoints: cps, Replays: pks,
					Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
				Scopes: map[string][]string{"adp_payments.issue_refund": {"payments.refund"}},
			})
			scriptDefaults(h, "")
			req, rc := refundRequest(t, 1200, true)
			var events []byte
			var final *contextos.Result
			var runErr error
			for ev, err := range h.Runtime.Stream(context.Background(), req, rc) {
				if err != nil {
					runErr = err
					break
				}
				b, _ := json.Marshal(ev)
				events = append(events, b...)
				if ev.Final != nil {
					final = ev.Final
				}
			}
			arte := map[string][]byte{"events": events, "log": logs.Bytes()}
			if runErr != nil {
				arte["error"] = []byte(runErr.Error())
			}
			if final != nil {
				b, _ := json.Marshal(final)
				arte["result"] = b
			}
			recs, _ := h.Decisions.List(context.Background(), decision.Filter{})
			arte["records"], _ = json.Marshal(recs)
			arte["transcript"], _ = json.Marshal(h.Transcript.Entries())
			for i, b := range cps.data {
				arte["checkpoint "+string(rune('a'+i))] = b
			}
			for i, b := range pks.data {
				arte["packet "+string(rune('a'+i))] = b
			}
			t.Logf("%d records, %d checkpoints, %d packets, err=%v", len(recs), len(cps.data), len(pks.data), runErr)
			for what, b := range arte {
				if bytes.Contains(b, []byte(secret)) {
					t.Errorf("the %s holds the secret", what)
				}
			}
		})
	}
}
