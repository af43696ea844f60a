package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/internal/manifests"
	"github.com/pvguard/pvguard/policy"
)

// ExplainFlags are the flags of `pvguard explain` (and of `kubectl pvguard explain`).
type ExplainFlags struct {
	// Files are the manifests of an offline explanation (-f); without them, the live cluster.
	Files []string
	// Kubeconfig and Overrides are kubectl's connection flags: --kubeconfig, and --context,
	// --cluster, --user, -s/--server, --token, --insecure-skip-tls-verify, -n/--namespace and
	// the rest of client-go's override flags. The live cluster and the current namespace are
	// resolved from them as kubectl resolves them (clientConfig).
	Kubeconfig string
	Overrides  clientcmd.ConfigOverrides
	// ConnectionFlags names the connection flags given on the command line, -n aside; with -f
	// they are refused, since manifests are not a cluster.
	ConnectionFlags []string
	Output          string
	// ConfigFile is the policy config (--config, as `pvguard audit` takes it; "" for the
	// default), and BinderIdentity the user the binder writes as (--binder-identity, ""
	// for DefaultBinderIdentity): the POLICY
	// column judges each pair as that binder would before binding it, under that config. A
	// volume's findings are its audit under that config.
	ConfigFile     string
	BinderIdentity string
	// Server and ServerCA name a pvguard server (--pvguard-server, its dashboard's address: a
	// port-forward) and the CA of its serving certificate (--pvguard-certificate-authority).
	// When the live cluster forbids one of the explanation's reads, the explanation is asked of
	// that server instead, as the same user: it answers what that user's RBAC lets them list.
	Server, ServerCA string
	// AllCandidates (--all-candidates) asks for every candidate volume of a claim: from the
	// server, its full list page by page; locally, every row instead of the closest ones and
	// counts by the check the others fail.
	AllCandidates bool
}

// DefaultBinderIdentity is the user pvguard's binder writes as when the chart is installed as
// the README installs it (release pvguard in namespace pvguard-system): the chart's
// ServiceAccount, named after the release (a test renders the chart to hold this to it).
const DefaultBinderIdentity = "system:serviceaccount:pvguard-system:pvguard"

// ExitBadInput is the exit code of `pvguard explain` for a bad request: an unknown object, a
// malformed name, unreadable manifests, flags or a kubeconfig that name no usable cluster.
const ExitBadInput = 2

func newExplainCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Explain why a PersistentVolumeClaim is Pending, or the state of a PersistentVolume",
	}
	pvc := &cobra.Command{
		Use:   "pvc [NAMESPACE/]NAME",
		Short: "Explain a claim: its state, what it waits for, each volume against each check, and the verdict",
		Long: "Explain a PersistentVolumeClaim from manifests (-f FILE|DIR, read as `pvguard audit -f` reads them)\n" +
			"or from a live cluster, found as kubectl finds it (--kubeconfig, else $KUBECONFIG, else ~/.kube/config,\n" +
			"else in-cluster; --context, --server and the other connection flags as kubectl's). The claim is\n" +
			"NAMESPACE/NAME, or NAME in the -n namespace, else (live) the namespace of the kubeconfig's context.\n" +
			"Exit code 2 on bad input.",
		Args: cobra.ExactArgs(1),
	}
	pv := &cobra.Command{
		Use:   "pv NAME",
		Short: "Explain a volume: its phase and since when, its claim, what the binder does next, its finalizers and findings",
		Args:  cobra.ExactArgs(1),
	}
	var (
		claim, volume           = ExplainFlags{}, ExplainFlags{}
		claimGiven, volumeGiven = bindExplainFlags(pvc.Flags(), &claim), bindExplainFlags(pv.Flags(), &volume)
	)
	pvc.RunE = func(cmd *cobra.Command, args []string) error {
		claim.ConnectionFlags = claimGiven()
		return RunExplainClaim(claim, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	pv.RunE = func(cmd *cobra.Command, args []string) error {
		volume.ConnectionFlags = volumeGiven()
		return RunExplainVolume(volume, args[0], time.Now(), cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	cmd.AddCommand(pvc, pv)
	return cmd
}

// bindExplainFlags defines the flags of `explain pvc` and `explain pv` on f, writing into o:
// -f, -o and kubectl's connection flags (--kubeconfig and client-go's override flags, with -s
// for --server as kubectl has it). given names the connection flags set on the command line,
// -n aside: -n also applies to manifests.
func bindExplainFlags(f *pflag.FlagSet, o *ExplainFlags) (given func() []string) {
	o.Output = "table"
	f.StringArrayVarP(&o.Files, "filename", "f", nil, "manifest file or directory (repeatable); without it, the live cluster")
	f.StringVarP(&o.Output, "output", "o", o.Output, "table or json")
	f.StringVar(&o.ConfigFile, "config", "", "policy config file, as pvguard serve reads it (default: the default config)")
	f.StringVar(&o.Server, "pvguard-server", os.Getenv(serverEnv),
		"a pvguard server (https://HOST:PORT, e.g. a port-forward of its Service) to ask first, as the same user; when it cannot be reached, the explanation is made from your own reads (default $"+serverEnv+")")
	f.BoolVar(&o.AllCandidates, "all-candidates", false,
		fmt.Sprintf("show every candidate volume of a claim (default: the %d closest, and the others counted by the check they fail)", localTop))
	f.StringVar(&o.ServerCA, "pvguard-certificate-authority", os.Getenv(serverCAEnv),
		"the CA of the pvguard server's serving certificate (default $"+serverCAEnv+", else the system's)")
	f.StringVar(&o.BinderIdentity, "binder-identity", DefaultBinderIdentity,
		"the user the binder writes as, which policy judges each pair as (upstream's binder: system:serviceaccount:kube-system:persistent-volume-binder)")
	// The connection flags go to a set of their own first, to be told apart from the others.
	conn := pflag.NewFlagSet("connection", pflag.ContinueOnError)
	conn.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the live cluster (default: $KUBECONFIG, else ~/.kube/config, else in-cluster)")
	names := clientcmd.RecommendedConfigOverrideFlags("")
	names.ClusterOverrideFlags.APIServer.ShortName = "s"
	clientcmd.BindOverrideFlags(&o.Overrides, conn, names)
	f.AddFlagSet(conn)
	return func() []string {
		var set []string
		conn.VisitAll(func(fl *pflag.Flag) {
			if fl.Changed && fl.Name != clientcmd.FlagNamespace {
				set = append(set, "--"+fl.Name)
			}
		})
		return set
	}
}

// clientConfig is the cluster the connection flags name, resolved as kubectl resolves it:
// --kubeconfig, else $KUBECONFIG, else ~/.kube/config, else in-cluster, with the flags
// overriding what the kubeconfig's context says.
func (o ExplainFlags) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	overrides := o.Overrides
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &overrides)
}

// cluster is the live cluster to read, or nil to read o.Files; manifests together with
// connection flags are bad input. Nothing is read yet.
func (o ExplainFlags) cluster() (clientcmd.ClientConfig, error) {
	if len(o.Files) == 0 {
		return o.clientConfig(), nil
	}
	given := o.ConnectionFlags
	if o.Kubeconfig != "" && !slices.Contains(given, "--kubeconfig") {
		given = append(given, "--kubeconfig")
	}
	if len(given) > 0 {
		return nil, badInput("give either manifests with -f or a cluster with %s, not both", strings.Join(given, ", "))
	}
	return nil, nil
}

// restConfig is cc's client configuration (nil for none); flags or a kubeconfig that name no
// usable cluster are bad input.
func restConfig(cc clientcmd.ClientConfig) (*rest.Config, error) {
	if cc == nil {
		return nil, nil
	}
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, badInput("the kubeconfig and flags name no usable cluster: %v", err)
	}
	return rc, nil
}

// claimRequest resolves what `explain pvc REF` asks for: the claim's namespace and name
// (claimKey), and the cluster to read (nil: the manifests).
func (o ExplainFlags) claimRequest(ref string) (namespace, name string, rc *rest.Config, err error) {
	cc, err := o.cluster()
	if err != nil {
		return "", "", nil, err
	}
	var contextNamespace func() (string, error)
	if cc != nil {
		contextNamespace = func() (string, error) {
			ns, _, err := cc.Namespace()
			return ns, err
		}
	}
	if namespace, name, err = claimKey(ref, o.Overrides.Context.Namespace, contextNamespace); err != nil {
		return "", "", nil, err
	}
	rc, err = restConfig(cc)
	return namespace, name, rc, err
}

func badInput(format string, a ...any) error {
	return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf(format, a...)}
}

// claimKey resolves the claim `explain pvc REF` names: REF is NAMESPACE/NAME, or NAME in the
// namespace of -n (flagNamespace), else in contextNamespace's (the kubeconfig context's, as
// kubectl takes it; nil offline, where a namespace must be given). A namespace in REF that -n
// contradicts is bad input, as is a malformed REF.
func claimKey(ref, flagNamespace string, contextNamespace func() (string, error)) (namespace, name string, err error) {
	namespace, name, qualified := strings.Cut(ref, "/")
	if !qualified {
		namespace, name = "", ref
	}
	if name == "" || strings.Contains(name, "/") || (qualified && namespace == "") {
		return "", "", badInput("%q: want NAME or NAMESPACE/NAME", ref)
	}
	switch {
	case qualified && flagNamespace != "" && flagNamespace != namespace:
		return "", "", badInput("%q names namespace %s, but -n says %s: give one of them", ref, namespace, flagNamespace)
	case qualified:
		return namespace, name, nil
	case flagNamespace != "":
		return flagNamespace, name, nil
	case contextNamespace == nil:
		return "", "", badInput("%q: give its namespace (NAMESPACE/NAME or -n NAMESPACE); manifests have no current namespace", ref)
	}
	namespace, err = contextNamespace()
	if err != nil {
		return "", "", badInput("claim %q: reading the namespace of the kubeconfig's context: %v", ref, err)
	}
	return namespace, name, nil
}

// RunExplainClaim explains the claim REF (NAMESPACE/NAME, or NAME: see claimKey) and writes the
// explanation to out. Live, it asks the pvguard server first when one is named (--pvguard-server),
// as the user of the kubeconfig; when the server cannot be reached, or none is named, it
// explains from the user's own reads (readClaimLive), saying so on errOut.
func RunExplainClaim(o ExplainFlags, ref string, out, errOut io.Writer) error {
	if o.Output != "table" && o.Output != "json" {
		return badInput("-o %s: want table or json", o.Output)
	}
	namespace, name, rc, err := o.claimRequest(ref)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if rc == nil {
		in, err := loadInput(o, nil, namespace, name, errOut)
		if err != nil {
			return err
		}
		return explainLocally(o, in, settledPairs{}, namespace, name, out, errOut)
	}
	serverDown := false
	if o.Server != "" {
		e, err := askServerClaim(ctx, o, rc, namespace, name, o.AllCandidates)
		var down *serverUnreachable
		if !errors.As(err, &down) {
			if err != nil {
				return err
			}
			return writeExplanation(out, o.Output, e)
		}
		serverDown = true
		fmt.Fprintf(errOut, "pvguard explain: %v; explaining from your own reads instead (the server's answer is the authoritative one)\n", err)
	}
	engine, identity, err := policyOf(o)
	if err != nil {
		return err
	}
	limitLocalReadMemory(os.Getenv("GOMEMLIMIT"))
	in, settled, err := readClaimLive(ctx, rc, namespace, name)
	switch {
	case forbidden(err) && serverDown:
		return fmt.Errorf("%w; and the pvguard server %s could not be reached", err, o.Server)
	case forbidden(err):
		return fmt.Errorf("%w; %s", err, forbiddenHint)
	case errors.Is(err, explain.ErrUnknownClaim):
		return badInput("%v", err)
	case err != nil:
		return err
	}
	if in.State, err = readKindsLive(ctx, rc, in.State, engine.Reads()); err != nil {
		return err
	}
	in.Policy, in.Identity = engine, identity
	return explainLocally(o, in, settled, namespace, name, out, errOut)
}

// writeExplanation writes a claim's explanation as -o asks.
func writeExplanation(out io.Writer, output string, e *explain.Explanation) error {
	if output == "json" {
		return writeJSON(out, e)
	}
	return explain.WriteText(out, e)
}

// RunExplainVolume explains the volume NAME and writes the explanation to out. Volumes belong to
// no namespace: -n is ignored, as kubectl ignores it for them.
func RunExplainVolume(o ExplainFlags, name string, now time.Time, out, errOut io.Writer) error {
	if name == "" || strings.Contains(name, "/") {
		return badInput("%q: want the name of a PersistentVolume", name)
	}
	if o.Output != "table" && o.Output != "json" {
		return badInput("-o %s: want table or json", o.Output)
	}
	cc, err := o.cluster()
	if err != nil {
		return err
	}
	rc, err := restConfig(cc)
	if err != nil {
		return err
	}
	in, err := loadInput(o, rc, "", "", errOut)
	if rc != nil && forbidden(err) {
		if o.Server == "" {
			return fmt.Errorf("%w; %s", err, forbiddenHint)
		}
		fmt.Fprintf(errOut, "pvguard explain: %v; asking the pvguard server %s, which shows what your RBAC lets you list\n", err, o.Server)
		e := &explain.VolumeExplanation{}
		if err := askServer(context.Background(), o, rc, "pv/"+name, e); err != nil {
			return err
		}
		return writeVolumeExplanation(out, o.Output, e)
	}
	if err != nil {
		return err
	}
	e, err := explain.Volume(in, name, now)
	if errors.Is(err, explain.ErrUnknownVolume) {
		return badInput("%v", err)
	}
	if err != nil {
		return err
	}
	return writeVolumeExplanation(out, o.Output, e)
}

// writeVolumeExplanation writes a volume's explanation as -o asks.
func writeVolumeExplanation(out io.Writer, output string, e *explain.VolumeExplanation) error {
	if output == "json" {
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

// loadInput reads the cluster of rc, or, when rc is nil, the manifests of o.Files; namespace is
// the one whose pods and events a live read lists ("" for none), and claim the claim explained
// ("" for none), whose provisioner's Lease a live read looks for. The input carries the policy
// engine of o's config and the binder's identity.
func loadInput(o ExplainFlags, rc *rest.Config, namespace, claim string, errOut io.Writer) (explain.Input, error) {
	engine, identity, err := policyOf(o)
	if err != nil {
		return explain.Input{}, err
	}
	var in explain.Input
	if rc != nil {
		if in, err = readCluster(context.Background(), rc, namespace, claim); err != nil {
			return explain.Input{}, err
		}
	} else {
		state, _, readErrs := manifests.Load(o.Files)
		for _, e := range readErrs {
			fmt.Fprintln(errOut, "pvguard explain:", e)
		}
		if len(readErrs) > 0 {
			return explain.Input{}, badInput("%d document(s) could not be read", len(readErrs))
		}
		in = explain.Input{State: state}
	}
	in.Policy, in.Identity = engine, identity
	return in, nil
}

// policyOf is the policy engine of o's config and the binder's identity (--config,
// --binder-identity).
func policyOf(o ExplainFlags) (*policy.Engine, policy.UserInfo, error) {
	cfg, err := loadPolicyConfig(o.ConfigFile)
	if err != nil {
		return nil, policy.UserInfo{}, badInput("%v", err)
	}
	identity, err := binderIdentity(o.BinderIdentity)
	if err != nil {
		return nil, policy.UserInfo{}, err
	}
	return policy.NewEngine(cfg), identity, nil
}

// binderIdentity is the user --binder-identity names, with the groups the API server gives it:
// a ServiceAccount's (system:serviceaccount:NS:NAME) are system:serviceaccounts,
// system:serviceaccounts:NS and system:authenticated, as policy's exemptions by group see them;
// "" is DefaultBinderIdentity.
func binderIdentity(name string) (policy.UserInfo, error) {
	if name = strings.TrimSpace(name); name == "" {
		name = DefaultBinderIdentity
	}
	u := policy.UserInfo{Username: name, Groups: []string{user.AllAuthenticated}}
	if strings.HasPrefix(name, serviceaccount.ServiceAccountUsernamePrefix) {
		ns, _, err := serviceaccount.SplitUsername(name)
		if err != nil {
			return policy.UserInfo{}, badInput("--binder-identity %q: want system:serviceaccount:NAMESPACE:NAME", name)
		}
		u.Groups = append(serviceaccount.MakeGroupNames(ns), user.AllAuthenticated)
	}
	return u, nil
}

// readCluster reads what an explanation reads from the cluster of rc (readInput).
func readCluster(ctx context.Context, rc *rest.Config, namespace, claim string) (explain.Input, error) {
	c, err := client.New(rc, client.Options{})
	if err != nil {
		return explain.Input{}, fmt.Errorf("connecting to %s: %w", rc.Host, err)
	}
	in, err := readInput(ctx, c, namespace, claim)
	if err != nil {
		return explain.Input{}, fmt.Errorf("reading %s: %w", rc.Host, err)
	}
	return in, nil
}

// readInput lists all claims, volumes, classes and nodes (of nodes only names and labels, as
// the binder reads them), the pods and events of the claim's namespace, and the Leases named for
// the claim's provisioner: the reads the server's explain pages make (explain.ReadInput,
// explain.ReadProvisionerLeases), and pods and events besides.
func readInput(ctx context.Context, c client.Reader, namespace, claim string) (explain.Input, error) {
	in, err := explain.ReadInput(ctx, c, c, namespace)
	if err != nil || claim == "" {
		return in, err
	}
	in.Now = time.Now()
	return in, explain.ReadProvisionerLeases(ctx, c, &in, namespace, claim)
}
