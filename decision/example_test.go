package decision_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/pack"
)

// A host keeps decision records in a Store: each appended record is
// chained to the one before it by its hash, and Verify checks the chain.
// Validate checks a record against its decision spec and the run's facts;
// errors.As gives the *ValidationError, and Has looks a problem up by its
// code.
func Example() {
	ctx := context.Background()

	// The pack's decision spec and what the run established.
	p := &pack.Pack{}
	p.DecisionLayer.DecisionSpecs = []pack.DecisionSpec{{
		DecisionKey: "support.refund.execute", Version: "1.0.0",
		AllowedOutcomes: []string{"approved", "denied", "escalated"},
	}}
	facts := &decision.Facts{Pack: p, PolicyEvaluated: true}

	rec := &decision.Record{
		RecordID: "dr_example_1", DecisionKey: "support.refund.execute", DecisionVersion: "1.0.0",
		Timestamp: "2026-05-01T10:00:00Z", Status: decision.Decided, Outcome: "approved",
		RunID: "run_example", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", TenantID: "tenant_acme",
		Lineage: decision.Lineage{PackVersion: "1.0.0", CompiledContextHash: "sha256:" + fmt.Sprintf("%064x", 1)},
	}
	if err := decision.Validate(rec, facts); err != nil {
		log.Fatal(err)
	}

	store := decision.NewMemoryStore()
	stored, err := store.Append(ctx, rec)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first record follows genesis:", stored.PrevRecordHash == decision.GenesisHash)
	if err := store.Verify(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("chain verifies")

	// An outcome outside the spec's closed set does not validate.
	bad := *rec
	bad.RecordID, bad.Outcome = "dr_example_2", "partially_approved"
	err = decision.Validate(&bad, facts)
	var ve *decision.ValidationError
	if !errors.As(err, &ve) {
		log.Fatalf("Validate = %v, want a *ValidationError", err)
	}
	fmt.Println("invalid:", errors.Is(err, decision.ErrInvalid), ve.Has(decision.CodeOutcome))
	for _, q := range ve.Problems {
		fmt.Println(q.Code, q.Path)
	}
	// Output:
	// first record follows genesis: true
	// chain verifies
	// invalid: true true
	// outcome_not_allowed outcome
}

// A store's reader decodes each stored record with DecodeStored: a record
// that does not decode (here one an earlier release sealed with a token
// count of 2^63−1, written as the nearest double) is an *UnreadableError
// naming it, which a List returns beside the records that read.
func ExampleDecodeStored() {
	stored := []byte(`{"budget_usage":{"tokens":9223372036854776000},"record_id":"dr_legacy_7"}`)
	_, err := decision.DecodeStored(stored, 7)
	var ue *decision.UnreadableError
	if errors.As(err, &ue) {
		fmt.Println(errors.Is(err, decision.ErrUnreadable), ue.RecordIDs())
		fmt.Println(err)
	}
	// Output:
	// true [dr_legacy_7]
	// decision: a stored record cannot be read: record 7 (dr_legacy_7): budget_usage.tokens: the stored number does not fit int
}
