package cli

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pvguard/pvguard/internal/policytest"
)

// TestFlags are the flags of `pvguard test`.
type TestFlags struct {
	// Paths are the suites' files and directories.
	Paths []string
	// Output is text or json; Run selects cases by name (a regular expression); Verbose lists
	// the cases that pass too (the root's -v).
	Output  string
	Run     string
	Verbose bool
}

func newTestCommand() *cobra.Command {
	o := TestFlags{Output: "text"}
	cmd := &cobra.Command{
		Use:   "test DIR|FILE...",
		Short: "Test a policy config offline: writes, audits and explanations against fixtures of cluster state",
		Long: "Run policy test suites (apiVersion pvguard.io/v1alpha1, kind PolicyTest; docs/testing-policies.md):\n" +
			"each write goes through pvguard's own webhook handlers under the suite's policy config, with the\n" +
			"fixtures as the cluster state; audit and explain cases run the audit and explain over the fixtures.\n" +
			"Directories are searched for suite files; -v lists the cases that pass too. Exit code 1 when a case\n" +
			"fails, 2 when a suite cannot be read or a flag or argument is bad.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Paths = args
			o.Verbose, _ = cmd.Flags().GetBool("verbose")
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return RunTest(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.Output, "output", "o", o.Output, "text or json")
	f.StringVar(&o.Run, "run", "", "run only the cases whose name matches this regular expression")
	return cmd
}

// RunTest runs the suites o names and writes the report to out; the suites that cannot be read
// are named on errOut. The returned error is an *ExitError: ExitFindings when a case failed,
// ExitBadInput when a suite could not be read (the others still run).
func RunTest(ctx context.Context, o TestFlags, out, errOut io.Writer) error {
	if o.Output != "text" && o.Output != "json" {
		return badInput("-o %s: want text or json", o.Output)
	}
	// fail ends a run that cannot start; -o json reports it all the same, in the report's errors.
	fail := func(err error) error {
		if o.Output == "json" {
			if werr := policytest.WriteJSON(out, policytest.Report{}, []error{err}); werr != nil {
				return werr
			}
		}
		return err
	}
	var run *regexp.Regexp
	if o.Run != "" {
		var err error
		if run, err = regexp.Compile(o.Run); err != nil {
			return fail(badInput("--run: %v", err))
		}
	}
	suites, errs := policytest.Load(o.Paths)
	for _, e := range errs {
		fmt.Fprintln(errOut, "pvguard test:", e)
	}
	if len(suites) == 0 && len(errs) == 0 {
		return fail(badInput("no %s suites in %s", policytest.Kind, strings.Join(o.Paths, ", ")))
	}
	rep := policytest.Run(ctx, suites, policytest.Options{Run: run})
	if rep.Cases == 0 && run != nil {
		fmt.Fprintf(errOut, "pvguard test: no case matches --run %s\n", o.Run)
	}
	var err error
	if o.Output == "json" {
		err = policytest.WriteJSON(out, rep, errs)
	} else {
		err = policytest.WriteText(out, rep, errs, o.Verbose)
	}
	switch {
	case err != nil:
		return err
	case len(errs) > 0:
		return badInput("%d problem(s) reading the suites", len(errs))
	case rep.Failed > 0:
		return &ExitError{Code: ExitFindings, Msg: fmt.Sprintf("%d of %d case(s) failed", rep.Failed, rep.Cases)}
	}
	return nil
}
