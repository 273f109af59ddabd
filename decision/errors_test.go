package decision_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/contextos/contextos/decision"
)

// Every Store method of both stores returns context.Canceled, checkable
// with errors.Is, for a cancelled context, and stores nothing.
func TestStoresHonourCancelledContext(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) decision.Store{
		"memory": func(*testing.T) decision.Store { return decision.NewMemoryStore() },
		"file": func(t *testing.T) decision.Store {
			s, err := decision.OpenFileStore(filepath.Join(t.TempDir(), "records.jsonl"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			calls := map[string]func() error{
				"Append": func() error { _, err := s.Append(ctx, &decision.Record{RecordID: "dr_1"}); return err },
				"Get":    func() error { _, err := s.Get(ctx, "dr_1"); return err },
				"List":   func() error { _, err := s.List(ctx, decision.Filter{}); return err },
				"Verify": func() error { return s.Verify(ctx) },
			}
			for call, f := range calls {
				if err := f(); !errors.Is(err, context.Canceled) {
					t.Errorf("%s = %v, want context.Canceled", call, err)
				}
			}
			if got, err := s.List(context.Background(), decision.Filter{}); err != nil || len(got) != 0 {
				t.Errorf("List after cancelled Append = %v, %v; want nothing stored", got, err)
			}
		})
	}
}
