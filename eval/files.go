package eval

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// readInDir reads the file name (a slash-separated path relative to dir)
// through an os.Root on dir, so neither ".." nor a symbolic link leads
// out of dir. It must be a regular file (a named pipe, a device or a
// directory is refused before it is opened) of at most limit bytes, and
// no more than limit+1 bytes are ever read. Errors give a generic reason,
// never the file's content.
func readInDir(dir, name string, limit int64) ([]byte, error) {
	if dir == "" {
		dir = "."
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, errors.New("cannot be read: its directory cannot be opened")
	}
	defer root.Close()
	return readRooted(root, filepath.FromSlash(name), limit)
}

// readRooted is readInDir on an open root.
func readRooted(root *os.Root, name string, limit int64) ([]byte, error) {
	if !filepath.IsLocal(name) {
		return nil, errors.New("is not a path inside its directory")
	}
	fi, err := root.Stat(name)
	if err != nil {
		return nil, statReason(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("is not a regular file")
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("is larger than %d bytes", limit)
	}
	f, err := root.OpenFile(name, openFlags, 0)
	if err != nil {
		return nil, statReason(err)
	}
	defer f.Close()
	// The file opened may not be the one examined: check it again.
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, errors.New("is not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, errors.New("cannot be read")
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("is larger than %d bytes", limit)
	}
	return data, nil
}

func statReason(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errors.New("does not exist")
	case errors.Is(err, fs.ErrPermission):
		return errors.New("cannot be read: permission denied")
	}
	// os.Root refuses a path or link that leads out of the directory.
	return errors.New("cannot be read inside its directory (a link leading out of it is refused)")
}
