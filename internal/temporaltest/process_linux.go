package temporaltest

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the server in a process group of its own, killed
// whole when the test ends, and has it killed when the test process dies
// (its parent-death signal), so a test binary that times out or is
// killed leaves no server behind.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup SIGKILLs cmd's process group: the server keeps nothing that
// must outlive it (its stores are in memory).
func killGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
