package cli_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pvguard/pvguard/internal/cli"
)

// TestBadFlagsAndArgsExitBadInput runs the command tree as the binary does (cli.ExitCode maps the
// error to the exit status): for test and explain a bad flag or a wrong number of arguments is bad
// input, exit 2; audit's exit 2 means unreadable documents, and its usage errors exit 1.
func TestBadFlagsAndArgsExitBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{args: []string{"test", "--bogus", "x.yaml"}, code: cli.ExitBadInput, msg: "unknown flag: --bogus"},
		{args: []string{"test"}, code: cli.ExitBadInput, msg: "requires at least 1 arg"},
		{args: []string{"test", "--run"}, code: cli.ExitBadInput, msg: "flag needs an argument"},
		{args: []string{"explain", "pvc"}, code: cli.ExitBadInput, msg: "accepts 1 arg"},
		{args: []string{"explain", "pv", "--bogus", "x"}, code: cli.ExitBadInput, msg: "unknown flag: --bogus"},
		{args: []string{"explain", "pvc", "a", "b"}, code: cli.ExitBadInput, msg: "accepts 1 arg"},
		{args: []string{"audit", "--bogus"}, code: 1, msg: "unknown flag: --bogus"},
		{args: []string{"test", "--help"}, code: 0},
		{args: []string{"version"}, code: 0},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			root := cli.NewRootCommand()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(tc.args)
			err := root.Execute()
			if got := cli.ExitCode(err); got != tc.code {
				t.Fatalf("exit code %d (error %v), want %d", got, err, tc.code)
			}
			if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q, want %q in it", err, tc.msg)
			}
		})
	}
}
