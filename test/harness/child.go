package harness

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"
)

// childArgsEnv, when set, makes the test binary run the pvguard command with the arguments it
// holds (newline separated) instead of its tests.
const childArgsEnv = "PVGUARD_TEST_CHILD_ARGS"

// RunChildIfAsked, called first in a TestMain, runs the command newRoot makes (pvguard's or
// pvguard-dev's) and exits when the test binary was started by ChildCommand; otherwise it returns
// and the tests run.
func RunChildIfAsked(newRoot func() *cobra.Command) {
	args, ok := os.LookupEnv(childArgsEnv)
	if !ok {
		return
	}
	cmd := newRoot()
	cmd.SetArgs(strings.Split(args, "\n"))
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, cmd.Name()+":", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// ChildCommand is the test binary re-executed as the command its TestMain gives RunChildIfAsked,
// with args: a real process, as bin/pvguard or bin/pvguard-dev would be, that a test can signal
// or kill.
func ChildCommand(args ...string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the test binary: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), childArgsEnv+"="+strings.Join(args, "\n"))
	return cmd, nil
}
