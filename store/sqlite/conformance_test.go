package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/contextos/contextos/store/sqlite"
	"github.com/contextos/contextos/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.RunTests(t, func(t *testing.T) storetest.Opener {
		path := filepath.Join(t.TempDir(), "contextos.db")
		return func(t *testing.T, o storetest.Options) storetest.Stores {
			s, err := sqlite.Open(context.Background(), path, &sqlite.Options{Now: o.Now, ClaimTTL: o.ClaimTTL})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
}
