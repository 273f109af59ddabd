package replay_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/contextos/contextos/replay"
)

// load reads a packet recorded by the runtime.
func load(name string) *replay.Packet {
	data, err := os.ReadFile("testdata/corpus/" + name)
	if err != nil {
		log.Fatal(err)
	}
	var p replay.Packet
	if err := json.Unmarshal(data, &p); err != nil {
		log.Fatal(err)
	}
	return &p
}

// A packet read from a store is checked before it is trusted: an edit
// made after it was sealed is refused as tampering, naming the member that
// changed and never its content. Sealing again makes the edit part of the
// packet; its replay (Runtime.Replay) then reports a replay_mismatch at
// the step the edit changes.
func Example() {
	p := load("good-decided-approved-1200.json")
	if err := p.CheckIntegrity(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("source:", p.SourceKind, "expected:", p.Expected.Status, "policy:", p.SideEffectPolicy)
	for _, o := range p.Outcomes {
		fmt.Println("recorded:", o.CapabilityID, "attempt", o.Attempt)
	}

	// What playback would serve for the refund, changed after capture.
	p.Outcomes[2].Outcome.Output["transaction_id"] = "txn_forged"
	err := p.CheckIntegrity()
	fmt.Println("tampered:", errors.Is(err, replay.ErrTamper))
	fmt.Println(err)

	if err := p.Seal(); err != nil {
		log.Fatal(err)
	}
	if err := p.CheckIntegrity(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("sealed again: the packet replays, and must report the edit")
	// Output:
	// source: decision_record expected: DECIDED policy: transcript_only
	// recorded: adp_orders.lookup attempt 1
	// recorded: adp_policy.eval attempt 1
	// recorded: adp_payments.issue_refund attempt 1
	// tampered: true
	// replay: packet tampered: the packet does not match packet_hash
	// sealed again: the packet replays, and must report the edit
}

// An evaluation that replays a stored packet records what the replay
// reported in latest_result: the one member the seal leaves out, so the
// packet stays intact.
func ExampleLatestResult() {
	p := load("good-decided-approved-1200.json")
	fmt.Println("before:", p.LatestResult.Status)

	// The status of the replay's Report (what Runtime.Replay returned).
	p.LatestResult = &replay.LatestResult{Status: replay.ReplayEqual, EvalRunID: "eval_1"}
	if err := p.CheckIntegrity(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("after:", p.LatestResult.Status, "intact")

	// Any other member is sealed, the expected status included.
	p.Expected.Status = "REJECTED"
	fmt.Println("expected status changed, tampered:", errors.Is(p.CheckIntegrity(), replay.ErrTamper))
	// Output:
	// before: not_run
	// after: replay_equal intact
	// expected status changed, tampered: true
}
