package contextos_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/internal/storekit"
)

// BenchmarkPendingApprovals is Runtime.PendingApprovals over 1,000 to
// 100,000 runs in the in-memory checkpoint store, ten of them paused
// (store/sqlite and store/postgres run the same benchmark).
func BenchmarkPendingApprovals(b *testing.B) {
	var cps *contextos.InMemoryCheckpoints
	storekit.PendingApprovals(b, storekit.PendingBench{
		Open: func(*testing.B) (contextos.Options, contextos.CheckpointLister) {
			cps = contextos.NewInMemoryCheckpoints()
			return contextos.Options{Checkpoints: cps}, cps
		},
		Seed: func(b *testing.B, n int, data []byte) {
			ctx := context.Background()
			for i := range n {
				if err := cps.Save(ctx, &contextos.Checkpoint{RunID: "run_seed_" + strconv.Itoa(i+1), Version: 2, Data: data}); err != nil {
					b.Fatal(err)
				}
			}
		},
	})
}
