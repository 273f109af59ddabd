//go:build !linux

package cliproc

import (
	"context"
	"os/exec"
)

// start starts cmd itself, in its own process group where the system has
// them. Nothing ties the group to this process's life here: only Linux
// has a parent-death signal.
func start(_ context.Context, cmd *exec.Cmd) (*proc, error) {
	setGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := &proc{cmd: cmd, waited: make(chan struct{})}
	ch.exited = ch.waited
	go func() {
		ch.werr = cmd.Wait()
		close(ch.waited)
	}()
	return ch, nil
}
