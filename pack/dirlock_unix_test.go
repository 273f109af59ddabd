//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pack_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/pack/packtest"
)

// holdDirLock takes the directory registry's writer lock as another
// process would, and returns its release (idempotent).
func holdDirLock(t *testing.T, dir string) func() {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	return func() { once.Do(func() { f.Close() }) }
}

// A writer waiting for the directory's lock, held by another process,
// gives up when its ctx is done, even behind another waiting writer of
// the same handle.
func TestDirRegistryWritersWaitingForTheLockHonourCtx(t *testing.T) {
	reg, dir := newDirRegistry(t)
	e := packtest.Publish(t, reg, packtest.NewSigner(1).Sign(t, canonical(t)), "rev")
	unlock := holdDirLock(t, dir) // "another process"
	defer unlock()
	first := make(chan error, 1)
	go func() {
		_, err := reg.SetState(context.Background(), e.Ref, pack.StateDeprecated, "old")
		first <- err
	}()
	for _, name := range []string{"SetState", "Put", "Review", "Pin"} {
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		var err error
		switch name {
		case "SetState":
			_, err = reg.SetState(short, e.Ref, pack.StateRevoked, "recall")
		case "Put":
			_, err = reg.Put(short, packtest.Bare(t, canonical(t)))
		case "Review":
			_, err = reg.Review(short, e.Ref, pack.Signoff{Reviewer: "ana", Role: pack.RoleSecurity})
		case "Pin":
			d, derr := pack.NewDeployments(reg, nil)
			if derr != nil {
				t.Fatal(derr)
			}
			_, err = d.Pin(short, "prod", e.Ref, "")
		}
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s while the lock is held elsewhere = %v, want context.DeadlineExceeded", name, err)
		}
	}
	select {
	case err := <-first:
		t.Fatalf("the first writer finished while the lock was held elsewhere: %v", err)
	default:
	}
	unlock()
	if err := <-first; err != nil {
		t.Errorf("the first writer after the lock was released: %v", err)
	}
	if got, err := reg.Get(ctx, e.Ref); err != nil || got.State != pack.StateDeprecated {
		t.Errorf("state = %s, %v; want deprecated (and nothing the cancelled writers did)", got.State, err)
	}
}
