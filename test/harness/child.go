package harness

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/pvguard/pvguard/cmd/pvguard/app"
)

// childArgsEnv, when set, makes the test binary run the pvguard command with the arguments it
// holds (newline separated) instead of its tests.
const childArgsEnv = "PVGUARD_TEST_CHILD_ARGS"

// RunChildIfAsked, called first in a TestMain, runs the pvguard command and exits when the test
// binary was started by ChildCommand; otherwise it returns and the tests run.
func RunChildIfAsked() {
	args, ok := os.LookupEnv(childArgsEnv)
	if !ok {
		return
	}
	cmd := app.NewRootCommand()
	cmd.SetArgs(strings.Split(args, "\n"))
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "pvguard:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// ChildCommand is the test binary re-executed as `pvguard args...` (its TestMain calls
// RunChildIfAsked): a real process, as bin/pvguard would be, that a test can signal or kill.
func ChildCommand(args ...string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the test binary: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), childArgsEnv+"="+strings.Join(args, "\n"))
	return cmd, nil
}
