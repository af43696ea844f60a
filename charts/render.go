// Package charts holds pvguard's Helm chart (charts/pvguard, embedded) and renders it with the
// Helm library, so tests and tools use the webhook configurations, RBAC and Deployment exactly as
// `helm install` would create them.
package charts

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// chartFiles is the chart directory, including its crds/ and any dot-files.
//
//go:embed all:pvguard
var chartFiles embed.FS

// chartDir is the chart's directory in chartFiles (and under charts/ in the repository).
const chartDir = "pvguard"

// Manifest is one rendered Kubernetes object.
type Manifest struct {
	// Template is the template the object came from, as `helm template` names it in its
	// "# Source:" comments, e.g. "pvguard/templates/deployment.yaml".
	Template string
	Object   *unstructured.Unstructured
}

// Render renders the chart as `helm template` would for the release name and namespace, with
// the values merged over values.yaml (validated against values.schema.json). It returns each
// manifest as an unstructured object with the template it came from, ordered by template name
// and then by position in the template. NOTES.txt and the CRDs (crds/, which Helm installs
// before the templates) are not included.
func Render(release, namespace string, values map[string]any) ([]Manifest, error) {
	ch, err := load()
	if err != nil {
		return nil, err
	}
	opts := common.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}
	top, err := chartutil.ToRenderValues(ch, values, opts, nil)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s: %w", ch.Name(), err)
	}
	rendered, err := engine.Engine{}.RenderWithContext(context.Background(), ch, top)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s: %w", ch.Name(), err)
	}
	names := make([]string, 0, len(rendered))
	for name := range rendered {
		if path.Ext(name) == ".txt" { // NOTES.txt
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	var out []Manifest
	for _, name := range names {
		objs, err := decodeManifests(name, rendered[name])
		if err != nil {
			return nil, err
		}
		for _, obj := range objs {
			out = append(out, Manifest{Template: name, Object: obj})
		}
	}
	return out, nil
}

// WebhookConfigurations renders the chart and returns its ValidatingWebhookConfiguration and
// MutatingWebhookConfiguration, typed.
func WebhookConfigurations(release, namespace string, values map[string]any) (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration, error) {
	manifests, err := Render(release, namespace, values)
	if err != nil {
		return nil, nil, err
	}
	var (
		v *admissionregistrationv1.ValidatingWebhookConfiguration
		m *admissionregistrationv1.MutatingWebhookConfiguration
	)
	for _, mf := range manifests {
		var target runtime.Object
		switch mf.Object.GroupVersionKind() {
		case admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration"):
			if v != nil {
				return nil, nil, fmt.Errorf("%s: a second ValidatingWebhookConfiguration %s", mf.Template, mf.Object.GetName())
			}
			v = &admissionregistrationv1.ValidatingWebhookConfiguration{}
			target = v
		case admissionregistrationv1.SchemeGroupVersion.WithKind("MutatingWebhookConfiguration"):
			if m != nil {
				return nil, nil, fmt.Errorf("%s: a second MutatingWebhookConfiguration %s", mf.Template, mf.Object.GetName())
			}
			m = &admissionregistrationv1.MutatingWebhookConfiguration{}
			target = m
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(mf.Object.Object, target, true); err != nil {
			return nil, nil, fmt.Errorf("%s: %s %s: %w", mf.Template, mf.Object.GetKind(), mf.Object.GetName(), err)
		}
	}
	switch {
	case v == nil:
		return nil, nil, errors.New("the chart rendered no ValidatingWebhookConfiguration")
	case m == nil:
		return nil, nil, errors.New("the chart rendered no MutatingWebhookConfiguration")
	}
	return v, m, nil
}

// load loads the embedded chart, as Helm's loader reads a chart directory or archive.
func load() (*chart.Chart, error) {
	var files []*archive.BufferedFile
	err := fs.WalkDir(chartFiles, chartDir, func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := chartFiles.ReadFile(name)
		if err != nil {
			return err
		}
		files = append(files, &archive.BufferedFile{Name: strings.TrimPrefix(name, chartDir+"/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the embedded chart: %w", err)
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("loading the embedded chart: %w", err)
	}
	return ch, nil
}

// decodeManifests splits a rendered template into its YAML documents and decodes each non-empty
// one.
func decodeManifests(template, content string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(content)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", template, i, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		// Strict: a duplicated key is an error, not a silently dropped field.
		data, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", template, i, err)
		}
		if string(bytes.TrimSpace(data)) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", template, i, err)
		}
		if u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("%s: document %d: %s %q has no apiVersion", template, i, u.GetKind(), u.GetName())
		}
		out = append(out, u)
	}
}

// stripComments drops whole-line YAML comments, so a document of comments only counts as empty.
func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for line := range bytes.Lines(doc) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			b.Write(line)
		}
	}
	return b.Bytes()
}
