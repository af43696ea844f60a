package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/pvguard/pvguard/certs"
)

// Version is stamped at build time with -ldflags "-X github.com/pvguard/pvguard/internal/cli.Version=...".
var Version = "dev"

// PluginName is the name kubectl runs the binary by as a plugin: `kubectl pvguard ARGS` runs
// kubectl-pvguard ARGS, the first program of that name on PATH.
const PluginName = "kubectl-pvguard"

// IsPlugin says whether argv0 (os.Args[0]) runs the binary as the kubectl plugin: its base name
// is kubectl-pvguard, or kubectl-pvguard.exe on Windows, where kubectl also finds it.
func IsPlugin(argv0 string) bool {
	base := filepath.Base(argv0)
	if ext := filepath.Ext(base); strings.EqualFold(ext, ".exe") {
		base = strings.TrimSuffix(base, ext)
	}
	return base == PluginName
}

// NewRootCommand builds the pvguard command tree.
func NewRootCommand() *cobra.Command { return NewRootCommandFor("pvguard") }

// NewRootCommandFor builds the command tree for the binary invoked as argv0: the same commands
// and flags either way, but run as the kubectl plugin its help and errors say `kubectl pvguard`.
// kubectl hands a plugin every argument after its name and passes on its exit code, so nothing
// else differs: `explain` takes kubectl's connection flags under either name.
func NewRootCommandFor(argv0 string) *cobra.Command {
	var verbose bool
	root := &cobra.Command{
		Use:           "pvguard",
		Short:         "Admission and audit webhooks for PersistentVolumes, PersistentVolumeClaims and StorageClasses",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	if IsPlugin(argv0) {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl pvguard"}
	}
	root.PersistentFlags().BoolVarP(&verbose, "verbose", "v", false, "log at debug level; for pvguard test, list the passing cases too")
	logger := func(w io.Writer) logr.Logger { return NewLogger(w, verbose) }
	explain, test := newExplainCommand(), newTestCommand()
	// explain and test exit ExitBadInput on bad input, a bad flag or argument included; audit's
	// exit 2 says that documents could not be read, and its usage errors exit 1.
	badFlagsAndArgs(explain)
	badFlagsAndArgs(test)
	root.AddCommand(newServeCommand(logger), newAuditCommand(), explain, test, newCertsCommand(), newAdmissionPoliciesCommand(), newVersionCommand())
	return root
}

// badFlagsAndArgs makes a bad flag or a wrong number of arguments, of cmd and every command
// under it, an *ExitError with ExitBadInput, as the commands' own bad input is.
func badFlagsAndArgs(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return badInput("%v", err)
	})
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if args := c.Args; args != nil {
			c.Args = func(c *cobra.Command, a []string) error {
				if err := args(c, a); err != nil {
					return badInput("%v", err)
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cmd)
}

// ExitCode is the exit status of the binary whose command returned err: 0 for none, the code of
// an *ExitError, else 1.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var exit *ExitError
	if errors.As(err, &exit) {
		return exit.Code
	}
	return 1
}

// NewLogger is pvguard's logger: JSON lines to w, at debug level when verbose. controller-runtime's
// own components (certwatcher, manager) log through its root logger, which it becomes.
func NewLogger(w io.Writer, verbose bool) logr.Logger {
	lvl := zapcore.InfoLevel
	if verbose {
		lvl = zapcore.DebugLevel
	}
	log := zap.New(zap.WriteTo(w), zap.Level(lvl))
	ctrllog.SetLogger(log)
	return log
}

// ParseServeArgs parses `pvguard serve` arguments (flags only) into options, exactly as the
// command does: tests run the chart's container arguments through it.
func ParseServeArgs(args []string) (ServeFlags, error) {
	o := DefaultServeFlags()
	f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	o.AddFlags(f)
	if err := f.Parse(args); err != nil {
		return o, fmt.Errorf("pvguard serve %v: %w", args, err)
	}
	if f.NArg() > 0 {
		return o, fmt.Errorf("pvguard serve: unexpected arguments %v", f.Args())
	}
	return o, nil
}

func newServeCommand(logger func(io.Writer) logr.Logger) *cobra.Command {
	o := DefaultServeFlags()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the admission webhooks against a cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return Serve(ctx, o, logger(os.Stderr))
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func newCertsCommand() *cobra.Command {
	var (
		dir   string
		hosts []string
	)
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Generate a CA and a serving certificate into a directory (tls.crt, tls.key, ca.crt)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := issueSelfSigned(dir, hosts); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s, %s and %s to %s\n", certs.CertFile, certs.KeyFile, certs.CAFile, dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "certs", "output directory")
	cmd.Flags().StringSliceVar(&hosts, "hosts", []string{"pvguard.pvguard-system.svc", "localhost", "127.0.0.1"}, "DNS names and IPs the certificate is for")
	return cmd
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			goVersion := ""
			if bi, ok := debug.ReadBuildInfo(); ok {
				goVersion = bi.GoVersion
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pvguard %s (%s)\n", Version, goVersion)
		},
	}
}
