package postgres_test

import (
	"context"
	"testing"

	"github.com/contextos/contextos/internal/pgtest"
	"github.com/contextos/contextos/store/postgres"
	"github.com/contextos/contextos/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.RunTests(t, func(t *testing.T) storetest.Opener {
		url := pgtest.URL(t)
		return func(t *testing.T, o storetest.Options) storetest.Stores {
			s, err := postgres.Open(context.Background(), url, &postgres.Options{Now: o.Now, ClaimTTL: o.ClaimTTL})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
}
