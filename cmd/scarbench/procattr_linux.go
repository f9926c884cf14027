package main

import (
	"os/exec"
	"syscall"
)

// setDeathSignal kills the child when scarbench dies, so that no server is
// left running after an interrupted benchmark.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
