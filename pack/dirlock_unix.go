//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockWriters takes the directory's writer lock: an flock(2) on
// <root>/.lock, held for one read-modify-write. The system releases it
// when its holder exits, so it cannot go stale; it excludes writers in
// other processes and other DirRegistry values on the same directory. It
// waits for the lock until ctx is done.
func (d *DirRegistry) lockWriters(ctx context.Context) (func(), error) {
	// Read-only: flock needs no write access, so users who may write the
	// directory share the lock file whoever created it.
	f, err := d.root.OpenFile(".lock", os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pack: registry: open lock file: %w", err)
	}
	wait := time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("pack: registry: lock: %w", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}
