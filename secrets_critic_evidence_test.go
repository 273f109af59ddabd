package contextos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

type secretCritic struct {
	verdict contextos.CriticVerdict
	reason  string
	n       int
}

func (c *secretCritic) Verify(_ context.Context, in *contextos.CriticInput) (contextos.Judgement, error) {
	c.n++
	if c.n == 1 {
		return contextos.Judgement{Verdict: c.verdict, Reason: c.reason}, nil
	}
	return contextos.Judgement{Verdict: contextos.VerdictOK}, nil
}

func (c *secretCritic) Score(_ context.Context, in *contextos.CriticInput) (contextos.Judgement, error) {
	return contextos.Judgement{Verdict: contextos.VerdictAccept}, nil
}

// A host critic's reason and an evidence source's content are text from
// outside the run too; a key in them must reach no stored artefact.
func TestSecretsFromHostCriticAndEvidenceNeverStored(t *testing.T) {
	const secret = "sk-proj-hr4criticevidencesecret001"
	type setup struct {
		critic   contextos.Critic
		evidence func(t *testing.T) compiler.EvidenceSource
	}
	withSecretEvidence := func(t *testing.T) compiler.EvidenceSource {
		ev := evidence(t)
		ev = append(ev, compiler.EvidenceItem{EvidenceRef: "kg:note:n1", Kind: "note", Content: "ops note: api_key=" + secret, Trust: compiler.Trusted})
		return ev
	}
	plain := func(t *testing.T) compiler.EvidenceSource { return evidence(t) }
	cases := map[string]setup{
		"critic replan reason": {critic: &secretCritic{verdict: contextos.VerdictReplan, reason: "retry without key " + secret}, evidence: plain},
		"critic reject reason": {critic: &secretCritic{verdict: contextos.VerdictReject, reason: "leaked key " + secret}, evidence: plain},
		"evidence content":     {evidence: withSecretEvidence},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			doc := strings.Replace(string(readTestdata(t, "ctxpack.support-1.0.0.json")), `"redaction_rules": ["pan", "credit_card"]`, `"redaction_rules": []`, 1)
			var logs bytes.Buffer
			cps := &capturingCheckpoints{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints()}
			pks := &capturingPackets{InMemoryPackets: contextos.NewInMemoryPackets()}
			p := contextos.PlannerFunc(func(_ context.Context, pr *contextos.PlanRequest) (*contextos.Plan, error) {
				if pr.Turn == 0 {
					return lookupPlan(), nil
				}
				return deniedPlan(), nil
			})
			h := contextostest.New(t, p, [][]byte{[]byte(doc)}, &contextostest.Options{
				Runtime: contextos.Options{Evidence: c.evidence(t), Critic: c.critic, ReplaySampleRate: 1, Checkpoints: cps, Replays: pks,
					Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
				Scopes: map[string][]string{"adp_payments.issue_refund": {"payments.refund"}},
			})
			scriptDefaults(h, "")
			req, rc := refundRequest(t, 1200, true)
			var events []byte
			var final *contextos.Result
			for ev, err := range h.Runtime.Stream(context.Background(), req, rc) {
				if err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(ev)
				events = append(events, b...)
				if ev.Final != nil {
					final = ev.Final
				}
			}
			arte := map[string][]byte{"events": events, "log": logs.Bytes()}
			if final != nil {
				b, _ := json.Marshal(final)
				arte["result"] = b
				t.Logf("status %s: %s", final.Status, final.Record.Rationale.Summary)
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
			for what, b := range arte {
				if bytes.Contains(b, []byte(secret)) {
					t.Errorf("the %s holds the secret", what)
				}
			}
		})
	}
}
