package csisidecars

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Pin is one line of hack/tools/pins: a tool's binary and the module version it is built from.
type Pin struct {
	Binary, Module, Version, Command string
	// Replaces are the module@version the build puts in place of the module's local replaces
	// (the pin's optional fifth column).
	Replaces []string
	// VersionVar is the Go variable the build sets to Version (the optional sixth column; default
	// main.version).
	VersionVar string
}

// RepoRoot is the checkout this package was built from.
func RepoRoot() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// ReadPin finds a binary's pin in hack/tools/pins.
func ReadPin(binary string) (Pin, error) {
	file := filepath.Join(RepoRoot(), "hack", "tools", "pins")
	f, err := os.Open(file)
	if err != nil {
		return Pin{}, fmt.Errorf("reading the sidecar pins: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 4 || len(fields) > 6 {
			return Pin{}, fmt.Errorf("%s:%d: want `binary module version command [replaces|-] [version-variable]`, got %q", file, n, line)
		}
		if fields[0] == binary {
			p := Pin{Binary: fields[0], Module: fields[1], Version: fields[2], Command: fields[3], VersionVar: "main.version"}
			if len(fields) >= 5 && fields[4] != "-" {
				p.Replaces = strings.Split(fields[4], ",")
			}
			if len(fields) == 6 {
				p.VersionVar = fields[5]
			}
			return p, nil
		}
	}
	if err := sc.Err(); err != nil {
		return Pin{}, fmt.Errorf("reading %s: %w", file, err)
	}
	return Pin{}, fmt.Errorf("%s pins no %s", file, binary)
}

// SourceDir is the pinned module's source in the module cache, as `go mod download` names it
// (hack/build-tools.sh has already downloaded it to build the binary, so this is a lookup).
func (p Pin) SourceDir() (string, error) { return moduleDir(p.Module, p.Version) }

// ReplacementDir is the source of the module version the build put in place of module's local
// replace (the pin's replaces column).
func (p Pin) ReplacementDir(module string) (string, error) {
	for _, mv := range p.Replaces {
		if m, v, ok := strings.Cut(mv, "@"); ok && m == module {
			return moduleDir(m, v)
		}
	}
	return "", fmt.Errorf("the pin of %s replaces no %s (replaces: %v)", p.Binary, module, p.Replaces)
}

func moduleDir(module, version string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = os.TempDir() // outside any module, so no go.mod or go.sum is touched
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr != nil && err == nil {
		err = jerr
	}
	if err != nil || info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %v %s %s", module, version, err, info.Error, strings.TrimSpace(stderr.String()))
	}
	return info.Dir, nil
}

// rbacFiles are the RBAC manifests, in their modules, of the components whose module is not one
// sidecar's (external-snapshotter holds two components); the others have
// deploy/kubernetes/rbac.yaml.
var rbacFiles = map[string]string{
	"snapshot-controller": "deploy/kubernetes/snapshot-controller/rbac-snapshot-controller.yaml",
	"csi-snapshotter":     "deploy/kubernetes/csi-snapshotter/rbac-csi-snapshotter.yaml",
}

// UpstreamRBAC reads the component's own RBAC manifest at its pinned version
// (deploy/kubernetes/rbac.yaml, or the one rbacFiles names) and moves every namespaced object,
// and every ServiceAccount subject, into namespace, as the file's comments ask an installer to
// do. It returns the objects and the ServiceAccount they bind.
func UpstreamRBAC(binary, namespace string) ([]client.Object, *corev1.ServiceAccount, error) {
	pin, err := ReadPin(binary)
	if err != nil {
		return nil, nil, err
	}
	dir, err := pin.SourceDir()
	if err != nil {
		return nil, nil, err
	}
	rel, ok := rbacFiles[binary]
	if !ok {
		rel = "deploy/kubernetes/rbac.yaml"
	}
	file := filepath.Join(dir, filepath.FromSlash(rel))
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, fmt.Errorf("%s's RBAC: %w", binary, err)
	}
	objs, err := decodeRBAC(data, namespace)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", file, err)
	}
	var sa *corev1.ServiceAccount
	for _, o := range objs {
		if s, ok := o.(*corev1.ServiceAccount); ok {
			if sa != nil {
				return nil, nil, fmt.Errorf("%s: two ServiceAccounts, %s and %s", file, sa.Name, s.Name)
			}
			sa = s
		}
	}
	if sa == nil {
		return nil, nil, fmt.Errorf("%s: no ServiceAccount", file)
	}
	return objs, sa, nil
}

// decodeRBAC decodes a multi-document manifest of ServiceAccounts, (Cluster)Roles and
// (Cluster)RoleBindings into namespace. Any other kind is an error: an upstream change that
// adds one should be looked at, not applied blindly.
func decodeRBAC(data []byte, namespace string) ([]client.Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	decode := clientgoscheme.Codecs.UniversalDeserializer().Decode
	var out []client.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, gvk, err := decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decoding a document: %w", err)
		}
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			o.Namespace = namespace
			out = append(out, o)
		case *rbacv1.Role:
			o.Namespace = namespace
			out = append(out, o)
		case *rbacv1.RoleBinding:
			o.Namespace = namespace
			moveSubjects(o.Subjects, namespace)
			out = append(out, o)
		case *rbacv1.ClusterRole:
			out = append(out, o)
		case *rbacv1.ClusterRoleBinding:
			moveSubjects(o.Subjects, namespace)
			out = append(out, o)
		default:
			return nil, fmt.Errorf("unexpected %s in an RBAC manifest", gvk.Kind)
		}
	}
	return out, nil
}

func moveSubjects(subjects []rbacv1.Subject, namespace string) {
	for i := range subjects {
		if subjects[i].Kind == rbacv1.ServiceAccountKind {
			subjects[i].Namespace = namespace
		}
	}
}

// stripComments drops whole-line comments, so a document that is only comments is empty.
func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line)
		}
	}
	return bytes.Join(out, []byte("\n"))
}
