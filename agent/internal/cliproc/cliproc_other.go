//go:build !unix

package cliproc

import (
	"os/exec"

	"github.com/contextos/contextos/agent"
)

func setGroup(*exec.Cmd) {}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

func exitStatus(cmd *exec.Cmd, err error) agent.ExitStatus {
	if cmd.ProcessState == nil {
		return agent.ExitStatus{Code: -1, Signal: "unknown"}
	}
	if code := cmd.ProcessState.ExitCode(); code >= 0 {
		return agent.ExitStatus{Code: code}
	}
	return agent.ExitStatus{Code: -1, Signal: "killed"}
}
