package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/manifests"
)

// ExplainOptions are the flags of `pvguard explain`.
type ExplainOptions struct {
	Files      []string
	Kubeconfig string
	Output     string
}

// ExitBadInput is the exit code of `pvguard explain` for a bad request: an unknown object, a
// malformed name, unreadable manifests.
const ExitBadInput = 2

func newExplainCommand() *cobra.Command {
	o := ExplainOptions{Output: "table"}
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Explain why a PersistentVolumeClaim is Pending, or the state of a PersistentVolume",
	}
	pvc := &cobra.Command{
		Use:   "pvc NAMESPACE/NAME",
		Short: "Explain a claim: its state, what it waits for, each volume against each check, and the verdict",
		Long: "Explain a PersistentVolumeClaim from manifests (-f FILE|DIR, read as `pvguard audit -f` reads them)\n" +
			"or from a live cluster (--kubeconfig, else in-cluster, else $KUBECONFIG). Exit code 2 on bad input.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return RunExplainClaim(o, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	pv := &cobra.Command{
		Use:   "pv NAME",
		Short: "Explain a volume: its phase and since when, its claim, what the binder does next, its finalizers and findings",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return RunExplainVolume(o, args[0], time.Now(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	for _, sub := range []*cobra.Command{pvc, pv} {
		f := sub.Flags()
		f.StringArrayVarP(&o.Files, "filename", "f", nil, "manifest file or directory (repeatable); without it, the live cluster")
		f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the live cluster (default: in-cluster, else $KUBECONFIG)")
		f.StringVarP(&o.Output, "output", "o", o.Output, "table or json")
		cmd.AddCommand(sub)
	}
	return cmd
}

// RunExplainClaim explains the claim NAMESPACE/NAME and writes the explanation to out.
func RunExplainClaim(o ExplainOptions, ref string, out, errOut io.Writer) error {
	bad := func(format string, a ...any) error {
		return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf(format, a...)}
	}
	namespace, name, ok := strings.Cut(ref, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return bad("%q: want NAMESPACE/NAME", ref)
	}
	if o.Output != "table" && o.Output != "json" {
		return bad("-o %s: want table or json", o.Output)
	}
	in, err := loadInput(o, namespace, errOut)
	if err != nil {
		return err
	}
	e, err := explain.Claim(in, namespace, name)
	if errors.Is(err, explain.ErrUnknownClaim) {
		return bad("%v", err)
	}
	if err != nil {
		return err
	}
	if o.Output == "json" {
		return writeJSON(out, e)
	}
	return explain.WriteText(out, e)
}

// RunExplainVolume explains the volume NAME and writes the explanation to out.
func RunExplainVolume(o ExplainOptions, name string, now time.Time, out, errOut io.Writer) error {
	if name == "" || strings.Contains(name, "/") {
		return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("%q: want the name of a PersistentVolume", name)}
	}
	if o.Output != "table" && o.Output != "json" {
		return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("-o %s: want table or json", o.Output)}
	}
	in, err := loadInput(o, "", errOut)
	if err != nil {
		return err
	}
	e, err := explain.Volume(in, name, now)
	if errors.Is(err, explain.ErrUnknownVolume) {
		return &ExitError{Code: ExitBadInput, Msg: err.Error()}
	}
	if err != nil {
		return err
	}
	if o.Output == "json" {
		return writeJSON(out, e)
	}
	return explain.WriteVolumeText(out, e)
}

func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// loadInput reads the manifests of o.Files, or else the live cluster; namespace is the one whose
// pods and events a live read lists ("" for none).
func loadInput(o ExplainOptions, namespace string, errOut io.Writer) (explain.Input, error) {
	if len(o.Files) > 0 && o.Kubeconfig != "" {
		return explain.Input{}, &ExitError{Code: ExitBadInput, Msg: "give either manifests with -f or a cluster with --kubeconfig, not both"}
	}
	if len(o.Files) == 0 {
		return readCluster(context.Background(), o.Kubeconfig, namespace)
	}
	snap, _, readErrs := manifests.Load(o.Files)
	for _, e := range readErrs {
		fmt.Fprintln(errOut, "pvguard explain:", e)
	}
	if len(readErrs) > 0 {
		return explain.Input{}, &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("%d document(s) could not be read", len(readErrs))}
	}
	return explain.Input{Claims: snap.PVCs, Volumes: snap.PVs, Classes: snap.Classes, Nodes: snap.Nodes}, nil
}

// readCluster reads what an explanation reads from a live cluster (readInput).
func readCluster(ctx context.Context, kubeconfig, namespace string) (explain.Input, error) {
	rc, err := RESTConfig(kubeconfig)
	if err != nil {
		return explain.Input{}, err
	}
	c, err := client.New(rc, client.Options{})
	if err != nil {
		return explain.Input{}, fmt.Errorf("connecting to the cluster: %w", err)
	}
	in, err := readInput(ctx, c, namespace)
	if err != nil {
		return explain.Input{}, fmt.Errorf("reading %s: %w", rc.Host, err)
	}
	return in, nil
}

// readInput lists all claims, volumes, classes and nodes (of nodes only names and labels, as
// the binder reads them), and the pods and events of the claim's namespace: the reads the
// server's explain pages make (audit.ReadExplainInput), and pods and events besides.
func readInput(ctx context.Context, c client.Reader, namespace string) (explain.Input, error) {
	return audit.ReadExplainInput(ctx, c, c, namespace)
}
