//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package decision

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// fileLock is the exclusive creation of a lock file, removed on release.
// After a crash the file stays: an operator removes it once no writer
// runs.
type fileLock struct {
	f    *os.File
	path string
}

func acquireLock(path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		holder := ""
		if g, err := os.Open(path); err == nil {
			holder = readHolder(g)
			g.Close()
		}
		return nil, lockError(path, holder)
	}
	if err != nil {
		return nil, fmt.Errorf("decision: create lock file: %w", err)
	}
	f.WriteAt([]byte(holderText()), 0)
	return &fileLock{f: f, path: path}, nil
}

func (l *fileLock) release() error {
	err := l.f.Close()
	if rerr := os.Remove(l.path); err == nil {
		err = rerr
	}
	return err
}
