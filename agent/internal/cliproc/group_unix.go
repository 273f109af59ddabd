//go:build unix && !linux

package cliproc

import (
	"os/exec"
	"syscall"
)

// setGroup puts cmd in a process group of its own.
func setGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }
