package contextos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
)

// Secrets the built-in detectors know, one per way into a run.
var storedSecrets = map[string]string{
	"request context api_key":  "sk_live_51HyQ2mAPIKEYinContext0001",
	"bearer in the message":    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c3JfNzcxIn0.c2lnbmF0dXJlMDAwMQ",
	"key in the channel":       "sk_live_51HyQ2mCHANNELsecret000001",
	"extra user claim":         "ghp_0123456789abcdefghijABCDEFGHIJ0123456789",
	"secret-named user claim":  "claimvalue-not-shaped-like-a-token-0001",
	"run context metadata":     "glpat-metadataSecret000000001",
	"tool output api_key":      "AKIAABCDEFGHIJKLMNOP",
	"tool output bearer":       "tooloutputbearertoken0123456789",
	"tool error message":       "xoxb-1234567890-tool-error-secret",
	"planner output api_key":   "sk-proj-outputsecret000000000001",
	"planner rationale bearer": "rationalebearertoken0123456789ab",
	"planner step argument":    "sk-proj-stepargumentsecret0000001",
	"planner error (log only)": "sk-proj-plannererrorsecret000001",
	"planner memory proposal":  "AIzaSyA-memoryproposalsecret01234567890",
	// Vendor keys glued after '_' to a name ("e_sk-proj-…").
	"tool output glued key":   "sk-proj-Xw3Pq9Lm2Vt7Kd1Rb8Ny4Hc6Jf0Gs5Ae2Uz9Oi3Lk7Mn1Bv4Cx8Qw6Er0Ty5",
	"planner glued step key":  "sk-ant-api03-Zr4Wq8Np2Ls6Kd0Fh3Jb7Vc1Mx5Gt9Ye4Ua8Io2Pe6Rn0Sk3Dl7Hq1Bw5-Xv9Cz2AA",
	"planner glued rationale": "xoxb-2816523419-6073184527913-Qm7Rn2Xk9Lw4Tp8Vz3Jc6Hd",
	"tool error glued token":  "ghp_Qm7Rn2Xk9Lw4Tp8Vz3Jc6HdA1b2C3d4E5f6G7",
}

// capturingCheckpoints and capturingPackets keep every byte a run stores.
type capturingCheckpoints struct {
	*contextos.InMemoryCheckpoints
	mu   sync.Mutex
	data [][]byte
}

func (c *capturingCheckpoints) Save(ctx context.Context, cp *contextos.Checkpoint) error {
	c.mu.Lock()
	c.data = append(c.data, bytes.Clone(cp.Data))
	c.mu.Unlock()
	return c.InMemoryCheckpoints.Save(ctx, cp)
}

type capturingPackets struct {
	*contextos.InMemoryPackets
	mu   sync.Mutex
	data [][]byte
}

func (c *capturingPackets) Save(ctx context.Context, p *replay.Packet) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.data = append(c.data, b)
	c.mu.Unlock()
	return c.InMemoryPackets.Save(ctx, p)
}

// Secrets are redacted whatever redaction rules the pack names: with the
// seed pack's rules replaced by none, by rules that name nothing secret,
// and as the seed pack has them, a run fed secrets at every way in — the
// request's context, message and channel, the user's additional claims, the run
// context's metadata, a tool's output and error, the planner's outputs,
// rationale, step arguments, memory proposal and error; some vendor keys
// glued after '_' to a name ("e_sk-proj-…") — pauses at its
// approval gate, is approved and resumed, and no record, checkpoint,
// packet, transcript entry, stream event or log line holds any of them.
func TestSecretsNeverStored(t *testing.T) {
	const seedRules = `"redaction_rules": ["pan", "credit_card"]`
	for _, rules := range []string{`"redaction_rules": []`, `"redaction_rules": ["email"]`, seedRules} {
		t.Run(rules, func(t *testing.T) {
			s := storedSecrets
			doc := strings.Replace(string(readTestdata(t, "ctxpack.support-1.0.0.json")), seedRules, rules, 1)
			var logs bytes.Buffer
			cps := &capturingCheckpoints{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints()}
			pks := &capturingPackets{InMemoryPackets: contextos.NewInMemoryPackets()}
			p := contextos.PlannerFunc(func(_ context.Context, pr *contextos.PlanRequest) (*contextos.Plan, error) {
				if pr.Request.RequestID == "req_planner_error" {
					return nil, errors.New("provider: Incorrect API key provided: " + s["planner error (log only)"])
				}
				if pr.Turn == 0 {
					pl := lookupPlan()
					pl.Steps[0].Args["note"] = "use api key " + s["planner step argument"] + ", or key=abc_" + s["planner glued step key"]
					return pl, nil
				}
				pl := refundPlan(4200)
				pl.Decision.Outputs["api_key"] = s["planner output api_key"]
				pl.Decision.Rationale = "Verified. Authorization: Bearer " + s["planner rationale bearer"] + " via token_" + s["planner glued rationale"]
				pl.Memory = []contextos.MemoryProposal{{WriteClass: "case_note", Content: "customer key " + s["planner memory proposal"], Confidence: 0.9}}
				return pl, nil
			})
			o := contextostest.Options{
				Runtime: contextos.Options{Evidence: evidence(t), ReplaySampleRate: 1, Checkpoints: cps, Replays: pks,
					Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
				Scopes: map[string][]string{"adp_payments.issue_refund": {"payments.refund"}},
			}
			h := contextostest.New(t, p, [][]byte{[]byte(doc)}, &o)
			h.Adapter("adp_orders").On("lookup").ReturnOutput(map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200,
				"api_key": s["tool output api_key"], "note": "Authorization: Bearer " + s["tool output bearer"], "ref": "e_" + s["tool output glued key"]})
			h.Adapter("adp_policy").On("eval").FailWith(gateway.NewToolError(gateway.CodeExecutionFailed, true, "upstream refused token "+s["tool error message"]+" and x_"+s["tool error glued token"], nil)).
				ReturnOutput(map[string]any{"eligible": true})
			h.Adapter("adp_payments").On("issue_refund").ReturnOutput(map[string]any{"transaction_id": "txn_q9"}, "refund:txn_q9")

			req, rc := refundRequest(t, 4200, true)
			req.Input.Context["api_key"] = s["request context api_key"]
			req.Input.Message = "Refund ord_881. Authorization: Bearer " + s["bearer in the message"]
			req.Input.Channel = "web " + s["key in the channel"]
			req.User.Claims = map[string]json.RawMessage{
				"github":        json.RawMessage(`"` + s["extra user claim"] + `"`),
				"session_token": json.RawMessage(`"` + s["secret-named user claim"] + `"`),
			}
			rc.User.Claims = req.User.Claims
			rc.Metadata = map[string]any{"deploy": map[string]any{"token": s["run context metadata"]}}

			var events []byte
			var res *contextos.Result
			for ev, err := range h.Runtime.Stream(context.Background(), req, rc) {
				if err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(ev)
				events = append(events, b...)
				if ev.Final != nil {
					res = ev.Final
				}
			}
			if res == nil || res.Status != decision.Deferred {
				t.Fatalf("run = %+v; want it paused at the finance gate", res)
			}
			done := h.Approve(res, contextostest.Approver{UserID: "usr_fin_1", Role: "finance_lead"})
			if done.Status != decision.Decided {
				t.Errorf("resumed run %s: %s", done.Status, done.Record.Rationale.Summary)
			}
			// A planner whose error quotes a key: the error goes to the log.
			req2, rc2 := refundRequest(t, 1200, true)
			req2.RequestID, rc2.RunID = "req_planner_error", ""
			h.Invoke(req2, rc2)

			ctx := context.Background()
			recs, err := h.Decisions.List(ctx, decision.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			records, _ := json.Marshal(recs)
			transcript, _ := json.Marshal(h.Transcript.Entries())
			artefacts := map[string][]byte{"records": records, "transcript": transcript, "events": events, "log": logs.Bytes()}
			for i, b := range cps.data {
				artefacts["checkpoint "+string(rune('a'+i))] = b
			}
			for i, b := range pks.data {
				artefacts["packet "+string(rune('a'+i))] = b
			}
			if len(cps.data) < 3 || len(pks.data) == 0 || logs.Len() == 0 {
				t.Fatalf("%d checkpoints, %d packets, %d log bytes: the run stored too little to check", len(cps.data), len(pks.data), logs.Len())
			}
			for name, b := range artefacts {
				for what, secret := range s {
					if bytes.Contains(b, []byte(secret)) {
						t.Errorf("the %s holds the %s", name, what)
					}
				}
			}
			// What was redacted is marked, not dropped.
			if !bytes.Contains(records, []byte("[REDACTED]")) || !bytes.Contains(logs.Bytes(), []byte("[REDACTED]")) {
				t.Error("the record or the log carries no redaction marker")
			}
			contextostest.AssertReplayEqual(t, h.Replay(done))
		})
	}
}

// The ids and refs a planner writes are free text too: a secret in a
// decision's subject ids or evidence refs, a memory proposal's, a step's
// evidence refs or idempotency key reaches no record, checkpoint, packet,
// transcript entry or stream event, with a pack that names no redaction
// rules. (The critic sends back the decision whose refs it cannot
// resolve; the run goes on.)
func TestSecretsInPlanIDsNeverStored(t *testing.T) {
	s := map[string]string{
		"decision subject id":   "sk_live_51HyQ2mSUBJECTidSecret0001",
		"decision evidence ref": "sk_live_51HyQ2mEVIDENCErefSecret01",
		"memory subject id":     "ghp_0123456789abcdefghijMEMORYSUBJ0123456789",
		"memory evidence ref":   "sk-proj-memoryevidencerefsecret0001",
		"step evidence ref":     "sk-proj-stepevidencerefsecret000001",
		"step idempotency key":  "sk-proj-stepidempotencysecret000001",
	}
	doc := strings.Replace(string(readTestdata(t, "ctxpack.support-1.0.0.json")), `"redaction_rules": ["pan", "credit_card"]`, `"redaction_rules": []`, 1)
	cps := &capturingCheckpoints{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints()}
	pks := &capturingPackets{InMemoryPackets: contextos.NewInMemoryPackets()}
	p := contextos.PlannerFunc(func(_ context.Context, pr *contextos.PlanRequest) (*contextos.Plan, error) {
		switch pr.Turn {
		case 0:
			pl := lookupPlan()
			pl.Steps[0].EvidenceRefs = []string{"kg:" + s["step evidence ref"]}
			return pl, nil
		case 1:
			pl := refundPlan(1200)
			pl.Steps[0].IdempotencyKey = s["step idempotency key"]
			pl.Decision.SubjectIDs = append(pl.Decision.SubjectIDs, "customer:"+s["decision subject id"])
			pl.Decision.EvidenceRefs = append(pl.Decision.EvidenceRefs, "kg:"+s["decision evidence ref"])
			pl.Memory = []contextos.MemoryProposal{{WriteClass: "case_note", Content: "refund issued", Confidence: 0.9,
				SubjectIDs: []string{"customer:" + s["memory subject id"]}, EvidenceRefs: []string{"kg:" + s["memory evidence ref"]}}}
			return pl, nil
		}
		return deniedPlan(), nil
	})
	h := contextostest.New(t, p, [][]byte{[]byte(doc)}, &contextostest.Options{
		Runtime: contextos.Options{Evidence: evidence(t), ReplaySampleRate: 1, Checkpoints: cps, Replays: pks},
		Scopes:  map[string][]string{"adp_payments.issue_refund": {"payments.refund"}},
	})
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 1200, true)
	var events []byte
	for ev, err := range h.Runtime.Stream(context.Background(), req, rc) {
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(ev)
		events = append(events, b...)
	}
	recs, err := h.Decisions.List(context.Background(), decision.Filter{})
	if err != nil || len(recs) == 0 {
		t.Fatalf("records = %d, %v", len(recs), err)
	}
	records, _ := json.Marshal(recs)
	transcript, _ := json.Marshal(h.Transcript.Entries())
	artefacts := map[string][]byte{"records": records, "transcript": transcript, "events": events}
	for i, b := range cps.data {
		artefacts["checkpoint "+string(rune('a'+i))] = b
	}
	for i, b := range pks.data {
		artefacts["packet "+string(rune('a'+i))] = b
	}
	if len(cps.data) == 0 || len(pks.data) == 0 {
		t.Fatalf("%d checkpoints, %d packets: the run stored too little to check", len(cps.data), len(pks.data))
	}
	for name, b := range artefacts {
		for what, secret := range s {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("the %s holds the %s", name, what)
			}
		}
	}
}
