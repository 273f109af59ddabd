package contextos_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

// An evidence item's and a recalled memory item's other members (a ref,
// a source id that is a pre-signed URL, a kind, a snapshot, a tier) come
// from outside the run as their content does: a key in them is redacted
// where they enter, so the planner's request and the replay packet hold
// none of it, and the packet still replays equal. Found by review:
// TestNothingLeaksGeneratedRuns plants only in the contents.
func TestSecretsInSourceItemMembersNeverStored(t *testing.T) {
	const key = "sk-proj-sourceitemmembersecret000001"
	const signed = "https://kb.example.com/doc/7?X-Amz-Signature=4f0c2c1d9e8b7a6f5e4d3c2b1a0f9e8d"
	ev := evidence(t)
	ev = append(ev, compiler.EvidenceItem{EvidenceRef: "kg:note:" + key, Kind: "note " + key, SourceID: signed, Snapshot: "snap " + key, Content: "ops note", Trust: compiler.Trusted})
	mem := newRawMemory(append(propertyMemory(t), compiler.MemoryItem{MemoryRef: "mem:cus_77:" + key, Content: "note", Tier: "semantic " + key, State: compiler.MemoryPromoted, Confidence: 0.9})...)
	pks := &capturingPackets{InMemoryPackets: contextos.NewInMemoryPackets()}
	planner := contextostest.NewPlanner(lookupPlan(), refundPlan(1200))
	h := harness(t, planner, &contextostest.Options{Runtime: contextos.Options{Evidence: ev, Memory: mem, Replays: pks}})
	req, rc := refundRequest(t, 1200, true)
	res := h.Invoke(req, rc)
	if res.Status != decision.Decided {
		t.Fatalf("run = %s (%s)", res.Status, res.Record.Rationale.Summary)
	}
	// A second run on the runtime reads the items it remembers redacted.
	planner.Then(lookupPlan()).Then(refundPlan(1200))
	rc.RunID += "_2"
	if res2 := h.Invoke(req, rc); res2.Status != decision.Decided {
		t.Fatalf("second run = %s (%s)", res2.Status, res2.Record.Rationale.Summary)
	}
	arte := map[string][]byte{}
	arte["planner requests"], _ = json.Marshal(planner.Requests())
	for i, b := range pks.data {
		arte["packet "+string(rune('a'+i))] = b
	}
	if len(pks.data) == 0 || !strings.Contains(string(arte["packet a"]), "mem:cus_77:") || !strings.Contains(string(arte["packet a"]), "kb.example.com") {
		t.Fatal("the packet pins neither item: nothing to check")
	}
	for what, b := range arte {
		for _, s := range []string{key, "4f0c2c1d9e8b7a6f5e4d3c2b1a0f9e8d"} {
			if strings.Contains(string(b), s) {
				t.Errorf("the %s hold %q", what, s)
			}
		}
	}
	contextostest.AssertReplayEqual(t, h.Replay(res))
}
