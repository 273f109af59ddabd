//go:build !linux

package temporaltest

import "os/exec"

// setProcAttr leaves the server in the test's process group: the server
// starts no processes of its own, and only Linux has a parent-death
// signal.
func setProcAttr(*exec.Cmd) {}

// killGroup kills the server process.
func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
