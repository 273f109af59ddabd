//go:build unix

package cliproc

import (
	"os/exec"
	"syscall"

	"github.com/contextos/contextos/agent"
)

// killGroup kills the process and everything it started.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
	}
}

func exitStatus(cmd *exec.Cmd, err error) agent.ExitStatus {
	ps := cmd.ProcessState
	if ps == nil {
		return agent.ExitStatus{Code: -1, Signal: "unknown"}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return agent.ExitStatus{Code: -1, Signal: ws.Signal().String()}
	}
	return agent.ExitStatus{Code: ps.ExitCode()}
}
