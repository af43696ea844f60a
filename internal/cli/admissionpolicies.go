package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/pvguard/pvguard/internal/policyparams"
	"github.com/pvguard/pvguard/policy"
)

// staticConfigFile is the AdmissionConfiguration written beside the static manifests.
const staticConfigFile = "admission-config.yaml"

// StaticAdmissionConfig is the AdmissionConfiguration file WriteStaticAdmissionPolicies writes
// into dir.
func StaticAdmissionConfig(dir string) string { return filepath.Join(dir, staticConfigFile) }

func newAdmissionPoliciesCommand() *cobra.Command {
	var configFile, staticDir, prefix, params string
	cmd := &cobra.Command{
		Use:   "admission-policies",
		Short: "Print the ValidatingAdmissionPolicies that enforce the rules' CEL forms in the apiserver (or write them for its manifest-based admission config)",
		Long: `Print, as YAML, the ValidatingAdmissionPolicies and bindings that make the apiserver itself
enforce the guards that need only the object, its old version and the requester (PVG002, PVG003,
PVG011, PVG012 at deny in the policy config), with the config's exemptions and controllers. They
hold while pvguard is down. The chart installs the same objects (admissionPolicies.enabled).

With --params NAMESPACE/NAME, the policies read the config from that ConfigMap instead of holding
it as literals, and the ConfigMap is printed first: this is what the chart installs, and what
` + "`pvguard serve --admission-policy-params`" + ` keeps equal to the config it loads, so that a reload
of the config changes the policies too (docs/reliability.md, "The parameter object").

With --static-dir, write them instead as files for kube-apiserver's manifest-based admission
config (Kubernetes 1.37, ManifestBasedAdmissionControlConfig), named *.static.k8s.io, with an
AdmissionConfiguration that loads them: the API cannot change or delete them, so the guards
survive even the deletion of pvguard (docs/install.md, "Guards that survive the deletion of pvguard").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadPolicyConfig(configFile)
			if err != nil {
				return err
			}
			opts := policy.AdmissionPolicyOptions{Prefix: prefix, Static: staticDir != ""}
			if params != "" {
				ns, name, ok := strings.Cut(params, "/")
				if !ok || ns == "" || name == "" || staticDir != "" {
					return fmt.Errorf("--params=%q: want NAMESPACE/NAME, and no --static-dir (the manifest-based admission config's policies cannot read API objects)", params)
				}
				opts.Params = &policy.ParamObject{Namespace: ns, Name: name}
				if err := writeManifest(cmd.OutOrStdout(), policyparams.Object(*opts.Params, cfg)); err != nil {
					return err
				}
			}
			aps := policy.AdmissionPolicies(cfg, opts)
			if staticDir == "" {
				return writeAdmissionPolicies(cmd.OutOrStdout(), aps)
			}
			return WriteStaticAdmissionPolicies(staticDir, aps, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&configFile, "config", "", "policy config file (default: the built-in defaults)")
	cmd.Flags().StringVar(&staticDir, "static-dir", "", "write the policies for the apiserver's manifest-based admission config into this directory")
	cmd.Flags().StringVar(&prefix, "prefix", "pvguard", "start of every object's name")
	cmd.Flags().StringVar(&params, "params", "", "NAMESPACE/NAME of the ConfigMap the policies read the config from (printed with them); default: the config as literals in the policies")
	return cmd
}

// writeManifest writes one object as a document of a YAML stream.
func writeManifest(w io.Writer, obj any) error {
	out, err := yaml.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encoding %T: %w", obj, err)
	}
	_, err = fmt.Fprintf(w, "---\n%s", out)
	return err
}

// writeAdmissionPolicies writes the policies and bindings as one YAML stream.
func writeAdmissionPolicies(w io.Writer, aps []policy.AdmissionPolicy) error {
	var buf bytes.Buffer
	for _, ap := range aps {
		for _, obj := range []any{ap.Policy, ap.Binding} {
			out, err := yaml.Marshal(obj)
			if err != nil {
				return fmt.Errorf("encoding %s: %w", ap.Policy.Name, err)
			}
			out = bytes.ReplaceAll(out, []byte("\nstatus: {}\n"), []byte("\n")) // a manifest has no status
			buf.WriteString("---\n")
			buf.Write(out)
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// WriteStaticAdmissionPolicies writes one file per policy (with its binding) into dir, and the
// AdmissionConfiguration that points kube-apiserver's ValidatingAdmissionPolicy plugin at dir
// (the file StaticAdmissionConfig names).
func WriteStaticAdmissionPolicies(dir string, aps []policy.AdmissionPolicy, log io.Writer) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("--static-dir %s: %w", dir, err)
	}
	manifests := filepath.Join(abs, "validating-admission-policies")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", manifests, err)
	}
	for _, ap := range aps {
		var buf bytes.Buffer
		if err := writeAdmissionPolicies(&buf, []policy.AdmissionPolicy{ap}); err != nil {
			return err
		}
		file := filepath.Join(manifests, ap.Policy.Name+".yaml")
		if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", file, err)
		}
	}
	config := fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: ValidatingAdmissionPolicy
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: ValidatingAdmissionPolicyConfiguration
      staticManifestsDir: %q
`, manifests)
	file := filepath.Join(abs, staticConfigFile)
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	fmt.Fprintf(log, "wrote %d policies to %s and %s; start kube-apiserver with --admission-control-config-file=%s\n", len(aps), manifests, file, file)
	return nil
}
