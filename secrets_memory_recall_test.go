package contextos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
)

// What a memory store recalls is text from outside the run, as an
// evidence source's content is: a key in a recalled item is redacted
// where it enters, so the planner's request, the replay packet that pins
// the recall, the records, checkpoints and events hold none of it, and
// the packet still replays equal. Found by TestNothingLeaksGeneratedRuns.
func TestSecretsInRecalledMemoryNeverStored(t *testing.T) {
	const secret = "sk-proj-memoryrecallsecret000000001"
	cps := &capturingCheckpoints{InMemoryCheckpoints: contextos.NewInMemoryCheckpoints()}
	pks := &capturingPackets{InMemoryPackets: contextos.NewInMemoryPackets()}
	planner := contextostest.NewPlanner(lookupPlan(), refundPlan(1200))
	mem := newRawMemory(append(propertyMemory(t), compiler.MemoryItem{MemoryRef: "mem:cus_77:note", Content: "Customer gave api_key=" + secret,
		Tier: "semantic", State: compiler.MemoryPromoted, Confidence: 0.9})...)
	h := harness(t, planner, &contextostest.Options{Runtime: contextos.Options{Memory: mem, Checkpoints: cps, Replays: pks}})
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
	if final == nil || final.Status != decision.Decided {
		t.Fatalf("run = %+v", final)
	}
	recs, _ := h.Decisions.List(context.Background(), decision.Filter{})
	arte := map[string][]byte{"events": events}
	arte["records"], _ = json.Marshal(recs)
	arte["planner requests"], _ = json.Marshal(planner.Requests())
	for i, b := range cps.data {
		arte["checkpoint "+string(rune('a'+i))] = b
	}
	for i, b := range pks.data {
		arte["packet "+string(rune('a'+i))] = b
	}
	if len(pks.data) == 0 || !bytes.Contains(arte["packet a"], []byte("mem:cus_77:note")) {
		t.Fatal("the packet pins no recalled memory: nothing to check")
	}
	for what, b := range arte {
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("the %s holds the key", what)
		}
	}
	contextostest.AssertReplayEqual(t, h.Replay(final))
}
