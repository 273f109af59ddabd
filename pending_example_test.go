package contextos_test

import (
	"context"
	"fmt"

	"github.com/contextos/contextos"
)

// A checkpoint store that is a PendingIndex keeps, with each save, the
// approval the run waits for (the runtime sets Checkpoint.Awaiting when a
// run pauses at a gate, and leaves it nil when the run is resumed or
// ends): PendingApprovals and PendingApprovalsOf read only the runs it
// lists.
func ExamplePendingIndex() {
	ctx := context.Background()
	store := contextos.NewInMemoryCheckpoints()
	paused := func(run, tenant string) *contextos.Checkpoint {
		return &contextos.Checkpoint{RunID: run, Version: 2, Data: []byte(`{}`),
			Awaiting: &contextos.AwaitedApproval{TenantID: tenant, GateID: "GATE_FINANCE_APPROVAL"}}
	}
	a, b := paused("run_a", "tenant_acme"), paused("run_b", "tenant_other")
	for _, c := range []*contextos.Checkpoint{a, b, {RunID: "run_c", Version: 2, Data: []byte(`{}`)}} {
		if err := store.Save(ctx, c); err != nil {
			fmt.Println(err)
			return
		}
	}
	var index contextos.PendingIndex = store
	all, _ := index.PendingRunIDs(ctx, "")
	acme, _ := index.PendingRunIDs(ctx, "tenant_acme")
	fmt.Println("awaiting:", all, "of tenant_acme:", acme)
	// run_a is resumed: its next save awaits nothing.
	a.Awaiting = nil
	if err := store.Save(ctx, a); err != nil {
		fmt.Println(err)
		return
	}
	all, _ = index.PendingRunIDs(ctx, "")
	fmt.Println("awaiting:", all)
	// Output:
	// awaiting: [run_a run_b] of tenant_acme: [run_a]
	// awaiting: [run_b]
}
