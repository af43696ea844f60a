package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/clusterview"
	"github.com/pvguard/pvguard/internal/manifests"
	"github.com/pvguard/pvguard/internal/web"
	"github.com/pvguard/pvguard/policy"
)

// AuditFlags are the flags of `pvguard audit`.
type AuditFlags struct {
	Files []string
	// Kubeconfig audits a live cluster instead of files.
	Kubeconfig string
	Output     string
	// FailOn is the action at or above which a finding fails the audit (deny or warn), or none.
	FailOn     policy.Action
	ConfigFile string
	Now        func() time.Time
}

// Exit codes of `pvguard audit`, for CI gates.
const (
	ExitFindings    = 1 // findings at or above --fail-on
	ExitBadManifest = 2 // some documents could not be read; the rest was audited
	ExitIncomplete  = 3 // some rules could not judge some objects; the other findings are reported
)

// ExitError carries an exit code out of a command.
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

func newAuditCommand() *cobra.Command {
	o := AuditFlags{Output: "table", Now: time.Now}
	cmd := &cobra.Command{
		Use:   "audit -f FILE|DIR ...",
		Short: "Audit manifests against the rule catalogue (offline; no cluster needed)",
		Long: "Audit PersistentVolumes, PersistentVolumeClaims, StorageClasses and Nodes from YAML or JSON files\n" +
			"and directories (multi-document files and Lists too). Exit code 1 when findings reach --fail-on,\n" +
			"2 when some documents could not be read (the rest is still audited).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return RunAudit(o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.Files, "filename", "f", nil, "manifest file or directory (repeatable)")
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "audit the live cluster of this kubeconfig instead of files")
	f.StringVarP(&o.Output, "output", "o", o.Output, "table, json, yaml, report (openreports.io Report and ClusterReport objects) or html (the dashboard page as one file)")
	f.StringVar((*string)(&o.FailOn), "fail-on", "", "exit 1 when a finding's action is at least this: deny or warn")
	f.StringVar(&o.ConfigFile, "config", "", "policy config file (actions and exemptions as at admission)")
	return cmd
}

// RunAudit audits the manifests named in o and writes the report to out; problems reading
// documents go to errOut. The returned error is an *ExitError when the exit code matters.
func RunAudit(o AuditFlags, out, errOut io.Writer) error {
	failAt, err := checkAuditFlags(o)
	if err != nil {
		return err
	}
	cfg, err := loadPolicyConfig(o.ConfigFile)
	if err != nil {
		return err
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	r, err := auditSource(o, cfg, now, errOut)
	if err != nil {
		return err
	}
	report := audit.NewReport(r.objects, r.findings)
	for _, e := range r.readErrs {
		report.Errors = append(report.Errors, e.Error())
	}
	for _, e := range r.ruleErrs {
		fmt.Fprintln(errOut, "pvguard audit:", e)
		report.Errors = append(report.Errors, e.Error())
	}
	failed := false
	for _, f := range r.findings {
		failed = failed || failAt[f.Action]
	}
	if err := writeAuditOutput(o, out, r, report, cfg, now); err != nil {
		return err
	}
	return auditExit(o, failed, r)
}

// checkAuditFlags validates the audit flags and returns the actions --fail-on fails at.
func checkAuditFlags(o AuditFlags) (map[policy.Action]bool, error) {
	if (len(o.Files) == 0) == (o.Kubeconfig == "") {
		return nil, errors.New("give either manifests with -f FILE|DIR or a cluster with --kubeconfig")
	}
	switch o.Output {
	case "table", "json", "yaml", "report", "html":
	default:
		return nil, fmt.Errorf("-o %s: want table, json, yaml, report or html", o.Output)
	}
	var failAt map[policy.Action]bool
	switch o.FailOn {
	case "":
	case policy.ActionDeny:
		failAt = map[policy.Action]bool{policy.ActionDeny: true}
	case policy.ActionWarn:
		failAt = map[policy.Action]bool{policy.ActionDeny: true, policy.ActionWarn: true}
	default:
		return nil, fmt.Errorf("--fail-on=%s: want deny or warn", o.FailOn)
	}
	return failAt, nil
}

// auditResult is what one audit of a cluster or of manifests found.
type auditResult struct {
	findings []policy.Finding
	page     web.Page            // the dashboard's bindings and pending claims, read live
	st       *clusterstate.State // the manifests read, for the dashboard's bindings and pending claims
	objects  int
	readErrs []error
	// ruleErrs are the rules that could not judge an object; the other rules' findings on
	// it are still reported.
	ruleErrs []error
}

// auditSource audits the cluster or the manifests the flags name.
func auditSource(o AuditFlags, cfg *policy.Config, now func() time.Time, errOut io.Writer) (auditResult, error) {
	var r auditResult
	if o.Kubeconfig != "" {
		var err error
		if r.findings, r.page, r.objects, r.ruleErrs, err = auditCluster(o.Kubeconfig, cfg, now, errOut); err != nil {
			return r, err
		}
		return r, nil
	}
	r.st, r.objects, r.readErrs = manifests.Load(o.Files)
	for _, e := range r.readErrs {
		fmt.Fprintln(errOut, "pvguard audit:", e)
	}
	if r.objects >= progressMin {
		fmt.Fprintf(errOut, "pvguard audit: auditing %d objects\n", r.objects)
	}
	var err error
	r.findings, err = policy.NewEngine(cfg).Audit(r.st, now(), progressTo(errOut))
	if r.ruleErrs, err = policy.SplitRuleErrors(err); err != nil {
		return r, err
	}
	return r, nil
}

// writeAuditOutput writes the audit's result in the format -o names.
func writeAuditOutput(o AuditFlags, out io.Writer, r auditResult, report audit.Report, cfg *policy.Config, now func() time.Time) error {
	switch o.Output {
	case "report":
		var v policy.View
		if r.st != nil {
			v = r.st
		}
		return writeOpenReports(out, r.findings, now(), v, cfg)
	case "html":
		page := r.page
		if o.Kubeconfig != "" {
			report.Time = now()
		}
		if r.st != nil {
			// Only the dashboard shows them: the other outputs skip the pass over every volume and claim.
			page.Bindings, page.Pending = audit.BindingsOf(r.st), audit.PendingOf(r.st)
		}
		// A file has no explain pages beside it: its pending claims link nowhere.
		page.Report, page.ExplainLinks = report, false
		return web.RenderDashboard(out, page)
	default:
		return writeAuditReport(out, o.Output, report)
	}
}

// auditExit returns the exit error the audit's findings and errors call for, or nil.
func auditExit(o AuditFlags, failed bool, r auditResult) error {
	switch {
	case failed:
		return &ExitError{Code: ExitFindings, Msg: fmt.Sprintf("findings at or above --fail-on=%s", o.FailOn)}
	case len(r.readErrs) > 0:
		return &ExitError{Code: ExitBadManifest, Msg: fmt.Sprintf("%d document(s) could not be read", len(r.readErrs))}
	case len(r.ruleErrs) > 0:
		return &ExitError{Code: ExitIncomplete, Msg: fmt.Sprintf("%d rule evaluation(s) failed; the other findings are reported", len(r.ruleErrs))}
	}
	return nil
}

// auditCluster audits a live cluster: it lists the objects through the apiserver (a cache of
// one read) and confirms missing objects with a second read, exactly as the in-server audit does.
func auditCluster(kubeconfig string, cfg *policy.Config, now func() time.Time, errOut io.Writer) ([]policy.Finding, web.Page, int, []error, error) {
	rc, err := RESTConfig(kubeconfig)
	if err != nil {
		return nil, web.Page{}, 0, nil, err
	}
	c, err := client.New(rc, client.Options{})
	if err != nil {
		return nil, web.Page{}, 0, nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	fmt.Fprintf(errOut, "pvguard audit: reading volumes, claims, classes and nodes from %s\n", rc.Host)
	engine := policy.NewEngine(cfg)
	r := audit.NewRunner(audit.RunnerOptions{Cache: c, Live: clusterview.New(c, c).LiveView, Engine: func() *policy.Engine { return engine },
		Log: logr.Discard(), Now: now, Progress: progressTo(errOut)})
	// The runner publishes what it found even when some rules could not judge an object.
	ruleErrs, err := policy.SplitRuleErrors(r.RunOnce(context.Background()))
	if err != nil {
		return nil, web.Page{}, 0, nil, fmt.Errorf("auditing %s: %w", rc.Host, err)
	}
	findings, _, objects := r.LatestFindings()
	fmt.Fprintf(errOut, "pvguard audit: %d objects audited\n", objects)
	return findings, web.Page{Bindings: r.Bindings(), Pending: r.Pending()}, objects, ruleErrs, nil
}

// progressMin is the size from which an audit reports its progress: smaller ones finish before
// anyone would look.
const progressMin = 1000

// progressTo reports an audit's progress on w in tenths.
func progressTo(w io.Writer) func(done, total int) {
	last := 0
	return func(done, total int) {
		if total < progressMin {
			return
		}
		if tenth := done * 10 / total; tenth > last {
			last = tenth
			fmt.Fprintf(w, "pvguard audit: %d%% (%d of %d objects)\n", tenth*10, done, total)
		}
	}
}

// writeOpenReports prints the openreports.io Report and ClusterReport objects the findings make,
// as a multi-document YAML stream that kubectl apply accepts.
// Each namespace's Report names only what that namespace's readers may read, the volumes of v
// (nil: none) linked to it among them.
func writeOpenReports(out io.Writer, findings []policy.Finding, now time.Time, v policy.View, cfg *policy.Config) error {
	reports, cluster := audit.OpenReports(findings, now, audit.DefaultMaxResults, v, cfg)
	var objs []any
	for _, r := range reports {
		objs = append(objs, r)
	}
	for _, c := range cluster {
		objs = append(objs, c)
	}
	for i, obj := range objs {
		data, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(out, "---\n"); err != nil {
				return err
			}
		}
		if _, err := out.Write(data); err != nil {
			return err
		}
	}
	return nil
}

func writeAuditReport(out io.Writer, format string, r audit.Report) error {
	switch format {
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case "yaml":
		data, err := yaml.Marshal(r)
		if err != nil {
			return err
		}
		_, err = out.Write(data)
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tACTION\tOBJECT\tFIELD\tMESSAGE")
	for _, f := range r.Findings {
		obj := f.Kind + " " + f.Object
		if f.Namespace != "" {
			obj = f.Kind + " " + f.Namespace + "/" + f.Object
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\t%s\t%s; %s\n", f.Rule, f.Name, f.Action, obj, f.Field, f.Message, f.Hint)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	actions := make([]string, 0, len(r.Summary.Actions))
	for a, n := range r.Summary.Actions {
		actions = append(actions, fmt.Sprintf("%d %s", n, a))
	}
	sort.Strings(actions)
	summary := "no findings"
	if len(actions) > 0 {
		summary = strings.Join(actions, ", ")
	}
	_, err := fmt.Fprintf(out, "\n%d objects audited: %s\n", r.Summary.Objects, summary)
	return err
}

// loadPolicyConfig reads the policy config file that --config names (`pvguard audit`,
// `pvguard explain`), or gives the default config for "".
func loadPolicyConfig(file string) (*policy.Config, error) {
	if file == "" {
		return policy.DefaultConfig(), nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading policy config: %w", err)
	}
	cfg, err := policy.ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return cfg, nil
}
