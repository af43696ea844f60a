//go:build !linux

package csisidecars

import "os/exec"

// setParentDeathSignal has no portable equivalent outside Linux: Stop must be called.
func setParentDeathSignal(*exec.Cmd) {}
