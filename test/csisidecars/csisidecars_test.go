package csisidecars

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

func TestAPIFindings(t *testing.T) {
	cases := []struct {
		name string
		line string
		want bool
	}{
		{name: "a warning client-go relays", want: true,
			line: `I1124 02:20:28.636116   13882 warnings.go:107] "Warning: [PVG013 binder-annotations] pv.kubernetes.io/bind-completed set by alice"`},
		{name: "a denial", want: true,
			line: `E1124 02:20:28.636116   13882 controller.go:1021] error syncing claim "ns/c": admission webhook "pvc.pvguard.io" denied the request: [PVG004 no-double-binding] ...`},
		{name: "a feature gate warning of the component's own", want: false,
			line: `I1124 02:20:28.636116   13882 feature_gate.go:477] "Warning: setting GA feature gate. It will be removed in a future release." featureGate="Topology" value=true`},
		{name: "an ordinary line", want: false,
			line: `I1124 02:20:28.636244   13882 csi-provisioner.go:178] Building kube configs for running in cluster...`},
	}
	for _, tc := range cases {
		log := "I0000 first line\n" + tc.line + "\nI0000 last line\n"
		got := APIFindings(log)
		if (len(got) == 1 && got[0] == tc.line) != tc.want || len(got) > 1 {
			t.Errorf("%s: APIFindings = %q, want found %v", tc.name, got, tc.want)
		}
	}
}

func TestDecodeRBAC(t *testing.T) {
	manifest := `
# only a comment
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: sa
  namespace: default
---
kind: ClusterRoleBinding
apiVersion: rbac.authorization.k8s.io/v1
metadata:
  name: crb
subjects:
  - kind: ServiceAccount
    name: sa
    namespace: default
  - kind: User
    name: alice
roleRef:
  kind: ClusterRole
  name: runner
  apiGroup: rbac.authorization.k8s.io
---
kind: Role
apiVersion: rbac.authorization.k8s.io/v1
metadata:
  name: cfg
  namespace: default
rules: []
`
	objs, err := decodeRBAC([]byte(manifest), "csi")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 3 {
		t.Fatalf("decoded %d objects, want 3", len(objs))
	}
	if sa := objs[0].(*corev1.ServiceAccount); sa.Namespace != "csi" {
		t.Errorf("ServiceAccount in %q, want csi", sa.Namespace)
	}
	crb := objs[1].(*rbacv1.ClusterRoleBinding)
	if crb.Subjects[0].Namespace != "csi" || crb.Subjects[1].Namespace != "" {
		t.Errorf("subjects %+v: want the ServiceAccount moved to csi and the user untouched", crb.Subjects)
	}
	if r := objs[2].(*rbacv1.Role); r.Namespace != "csi" {
		t.Errorf("Role in %q, want csi", r.Namespace)
	}

	if _, err := decodeRBAC([]byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n"), "csi"); err == nil || !strings.Contains(err.Error(), "Secret") {
		t.Errorf("a Secret in an RBAC manifest: err %v, want one naming the kind", err)
	}
	if _, err := decodeRBAC([]byte("kind: [\n"), "csi"); err == nil {
		t.Error("malformed YAML: no error")
	}
}

// TestUpstreamRBAC reads the pinned components' own RBAC manifests (from the module cache that
// `make tools` filled) and checks what each is given.
func TestUpstreamRBAC(t *testing.T) {
	cases := []struct {
		binary, sa string
		// want are resource/verb pairs some ClusterRole must grant.
		want []string
	}{
		{binary: "csi-provisioner", sa: "csi-provisioner", want: []string{
			"persistentvolumes/create", "persistentvolumes/delete", "persistentvolumes/patch",
			"persistentvolumeclaims/update", "csinodes/list", "nodes/list", "storageclasses/list", "events/create",
		}},
		{binary: "csi-resizer", sa: "csi-resizer", want: []string{
			"persistentvolumes/patch", "persistentvolumeclaims/status/patch", "pods/list", "events/create",
		}},
		{binary: SnapshotControllerBinary, sa: "snapshot-controller", want: []string{
			"persistentvolumeclaims/update", "volumesnapshotcontents/create", "volumesnapshotcontents/delete",
			"volumesnapshots/status/patch", "volumesnapshotclasses/list", "events/create",
		}},
		{binary: SnapshotterBinary, sa: "csi-snapshotter", want: []string{
			"volumesnapshotcontents/patch", "volumesnapshotcontents/status/update", "volumesnapshotclasses/get", "events/create",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.binary, func(t *testing.T) {
			objs, sa, err := UpstreamRBAC(tc.binary, "csi-test")
			if err != nil {
				t.Fatal(err)
			}
			if sa.Name != tc.sa || sa.Namespace != "csi-test" {
				t.Errorf("ServiceAccount %s/%s, want csi-test/%s", sa.Namespace, sa.Name, tc.sa)
			}
			var granted []string
			for _, o := range objs {
				switch o := o.(type) {
				case *rbacv1.ClusterRole:
					for _, r := range o.Rules {
						for _, res := range r.Resources {
							for _, v := range r.Verbs {
								granted = append(granted, res+"/"+v)
							}
						}
					}
				case *rbacv1.ClusterRoleBinding:
					for _, s := range o.Subjects {
						if s.Kind == rbacv1.ServiceAccountKind && (s.Namespace != "csi-test" || s.Name != tc.sa) {
							t.Errorf("ClusterRoleBinding %s binds %s/%s, want csi-test/%s", o.Name, s.Namespace, s.Name, tc.sa)
						}
					}
				}
			}
			for _, w := range tc.want {
				if !slices.Contains(granted, w) {
					t.Errorf("upstream RBAC grants %v, lacks %s", granted, w)
				}
			}
		})
	}
}

func TestReadPin(t *testing.T) {
	p, err := ReadPin("csi-provisioner")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Module, "github.com/kubernetes-csi/external-provisioner") || p.Version == "" {
		t.Errorf("pin %+v", p)
	}
	if p.VersionVar != "main.version" {
		t.Errorf("csi-provisioner's version variable %q, want the default main.version", p.VersionVar)
	}
	if p, err := ReadPin("promtool"); err != nil || p.VersionVar != "github.com/prometheus/common/version.Version" {
		t.Errorf("promtool pin %+v, %v", p, err)
	}
	if _, err := ReadPin("no-such-sidecar"); err == nil {
		t.Error("an unpinned binary: no error")
	}
	// The snapshot components are built against the client module of their own release.
	for _, b := range []string{SnapshotControllerBinary, SnapshotterBinary} {
		p, err := ReadPin(b)
		if err != nil {
			t.Fatal(err)
		}
		if want := snapshotClientModule + "@" + p.Version; len(p.Replaces) != 1 || p.Replaces[0] != want {
			t.Errorf("pin %+v: want it to replace ./client with %s", p, want)
		}
	}
}

// TestSnapshotCRDs reads the VolumeSnapshot CRDs of the pinned release from the module cache.
func TestSnapshotCRDs(t *testing.T) {
	files, err := SnapshotCRDs()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	for _, want := range []string{
		"snapshot.storage.k8s.io_volumesnapshotclasses.yaml",
		"snapshot.storage.k8s.io_volumesnapshotcontents.yaml",
		"snapshot.storage.k8s.io_volumesnapshots.yaml",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("snapshot CRDs %v lack %s", names, want)
		}
	}
}

func TestProcess(t *testing.T) {
	t.Setenv("KUBECONFIG", "/should/not/leak")
	dir := t.TempDir()
	p, err := StartProcess("sleeper", "/bin/sh", []string{"-c", `echo "started KUBECONFIG=[$KUBECONFIG]"; exec sleep 60`}, filepath.Join(dir, "sleeper.log"))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.Logs(), "started") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := p.Logs(); !strings.Contains(got, "started KUBECONFIG=[]") {
		t.Errorf("log %q: want $KUBECONFIG scrubbed", got)
	}
	if exited, _ := p.Exited(); exited {
		t.Fatal("the process exited early")
	}
	if err := p.Stop(); err != nil {
		t.Errorf("Stop of a process that ends on SIGTERM: %v", err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}

	q, err := StartProcess("quitter", "/bin/sh", []string{"-c", "exit 3"}, filepath.Join(dir, "quitter.log"))
	if err != nil {
		t.Fatal(err)
	}
	for exited, _ := q.Exited(); !exited; exited, _ = q.Exited() {
		time.Sleep(10 * time.Millisecond)
	}
	if err := q.Stop(); err == nil || !strings.Contains(err.Error(), "already exited") {
		t.Errorf("Stop of a process that died: %v, want an error saying it had exited", err)
	}

	if _, err := StartProcess("missing", filepath.Join(dir, "no-such-binary"), nil, filepath.Join(dir, "m.log")); err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Errorf("a missing binary: %v, want an error pointing at make tools", err)
	}
}
