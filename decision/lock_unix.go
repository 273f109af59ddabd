//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package decision

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// fileLock is an flock(2) lock on a lock file: the system releases it when
// the holder exits, so it cannot go stale. The file itself stays; it only
// names the last holder.
type fileLock struct{ f *os.File }

func acquireLock(path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("decision: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := readHolder(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, lockError(path, holder)
		}
		return nil, fmt.Errorf("decision: lock %s: %w", path, err)
	}
	// Name the holder for the next one to be refused (best effort).
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(holderText()), 0)
	}
	return &fileLock{f: f}, nil
}

func (l *fileLock) release() error {
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	return l.f.Close()
}
