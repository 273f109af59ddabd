package contextos_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/replay"
)

// secondVerifyRejects rejects the second plan it verifies: a replay,
// which verifies again, sees it pass, and differs from its packet.
type secondVerifyRejects struct{ n atomic.Int32 }

func (c *secondVerifyRejects) Verify(context.Context, *contextos.CriticInput) (contextos.Judgement, error) {
	if c.n.Add(1) == 2 {
		return contextos.Judgement{Verdict: contextos.VerdictReject, Reason: "no"}, nil
	}
	return contextos.Judgement{Verdict: contextos.VerdictOK}, nil
}

func (c *secondVerifyRejects) Score(context.Context, *contextos.CriticInput) (contextos.Judgement, error) {
	return contextos.Judgement{Verdict: contextos.VerdictAccept}, nil
}

// A replay's report is a surface the nothing-leaks promise covers
// (TestNothingLeaksGeneratedRuns scans it): a mismatch's details, which
// quote the records' outcomes and evidence refs (planner text, kept as
// given in the record and the packet), quote them with every built-in
// rule applied. Found by review: the generated runs seldom replay
// unequal, and never with personal data in what differs.
func TestReplayReportQuotesNoPersonalData(t *testing.T) {
	const email, ref = "report.leak@example.org", "kg:card 4111111111111111"
	pl := deniedPlan()
	pl.Decision.Outcome = "denied, mail " + email
	pl.Decision.EvidenceRefs = append(pl.Decision.EvidenceRefs, ref)
	h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), pl, pl, pl), &contextostest.Options{Runtime: contextos.Options{Critic: &secondVerifyRejects{}, ReplaySampleRate: 1}})
	req, rc := refundRequest(t, 1200, true)
	res, err := h.Runtime.Invoke(context.Background(), req, rc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Record.Outcome, email) {
		t.Fatalf("record outcome %q: the run did not keep the planner's outcome", res.Record.Outcome)
	}
	p, err := h.Replays.Get(context.Background(), res.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := h.Runtime.Replay(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rep)
	if rep.Status != replay.ReplayMismatch || !strings.Contains(string(b), "outcome") {
		t.Fatalf("report %s: want a mismatch naming the outcome", b)
	}
	for _, s := range []string{email, "4111111111111111"} {
		if strings.Contains(string(b), s) {
			t.Errorf("the report quotes %q: %s", s, b)
		}
	}
}
