package csisidecars

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal kills the component when the test binary dies, so no sidecar outlives a
// test killed by a timeout.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
