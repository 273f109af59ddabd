package contextos_test

import (
	"context"
	"fmt"
	"time"

	"github.com/contextos/contextos"
)

// A checkpoint saved with a lease holds the run's claim for that long on
// the store's clock; Load says what is left of it, and a takeover is
// refused until it has lapsed.
func ExampleInMemoryCheckpoints_lease() {
	ctx := context.Background()
	now := time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC)
	store := contextos.NewInMemoryCheckpoints()
	store.Now = func() time.Time { return now }
	if err := store.Save(ctx, &contextos.Checkpoint{RunID: "run_1", Version: 2, Data: []byte(`{}`), Lease: 10 * time.Minute}); err != nil {
		fmt.Println(err)
		return
	}
	now = now.Add(4 * time.Minute)
	c, err := store.Load(ctx, "run_1")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("lease left:", c.Lease)
	now = now.Add(7 * time.Minute)
	if c, err = store.Load(ctx, "run_1"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("lease left:", c.Lease)
	// Output:
	// lease left: 6m0s
	// lease left: 0s
}
