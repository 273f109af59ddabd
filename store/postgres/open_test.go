package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/contextos/contextos/internal/pgtest"
	"github.com/contextos/contextos/store/postgres"
)

func TestOpenMigratesOnceUnderConcurrentOpens(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	stores := make([]*postgres.Store, 6)
	errs := make([]error, 6)
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = postgres.Open(ctx, url, nil) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	v, err := stores[0].SchemaVersion(ctx)
	if err != nil || v < 1 {
		t.Fatalf("SchemaVersion = %d, %v", v, err)
	}
}

func TestOpenRefusesBadURLWithoutEchoingIt(t *testing.T) {
	for _, url := range []string{"", "postgres://user:s3cret-pw@[::1", "host=x port=notaport password=s3cret-pw"} {
		_, err := postgres.Open(context.Background(), url, nil)
		if !errors.Is(err, postgres.ErrConfig) || strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("Open(%q) = %v, want ErrConfig without the password", url, err)
		}
	}
}
