package localstatic_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/localstatic"
)

// TestCycleOnRealAPIServer runs the stand-in for two fake nodes against a real kube-apiserver:
// discovery of tmpfs mount points, a released volume cleaned and deleted, and found again.
func TestCycleOnRealAPIServer(t *testing.T) {
	assets, err := devcluster.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	cp, err := devcluster.Start(assets)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const class = "local-wffc"
	root := t.TempDir()
	dirA, dirB := filepath.Join(root, "node-a"), filepath.Join(root, "node-b")
	for _, d := range []string{filepath.Join(dirA, "vol1"), filepath.Join(dirA, "vol2"), filepath.Join(dirB, "vol1")} {
		localstatic.MountTmpfs(t, d)
	}
	// Not a mount point: upstream reports it and makes no volume of it.
	if err := os.Mkdir(filepath.Join(dirA, "plain"), 0o755); err != nil {
		t.Fatal(err)
	}

	for name, host := range map[string]string{"node-a": "host-a", "node-b": "host-b"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: host}}}
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating Node %s: %v", name, err)
		}
	}
	wffc, del := storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimDelete
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: class},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: &wffc,
		ReclaimPolicy:     &del,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating StorageClass: %v", err)
	}

	p, passErrors := localstatic.StartForTest(t, ctx, cs, localstatic.Config{
		Nodes: []localstatic.Node{
			{Name: "node-a", Dirs: map[string]string{class: dirA}},
			{Name: "node-b", Dirs: map[string]string{class: dirB}},
		},
		Classes:         map[string]localstatic.ClassConfig{class: {}},
		NodeLabelsForPV: []string{corev1.LabelHostname},
		DiscoveryPeriod: 200 * time.Millisecond,
	})

	// Names computed outside Go: FNV-1a 32 of file name + node name + class.
	type want struct{ node, host, path string }
	wants := map[string]want{
		"local-pv-d5fcc937": {"node-a", "host-a", filepath.Join(dirA, "vol1")},
		"local-pv-72e88ab2": {"node-a", "host-a", filepath.Join(dirA, "vol2")},
		"local-pv-5b1a3cf6": {"node-b", "host-b", filepath.Join(dirB, "vol1")},
	}
	pvs := func() map[string]corev1.PersistentVolume {
		list, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]corev1.PersistentVolume{}
		for _, pv := range list.Items {
			out[pv.Name] = pv
		}
		return out
	}
	poll := func(what string, cond func() (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) { return cond() }); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	poll("three PVs discovered", func() (bool, error) { return len(pvs()) >= len(wants), nil })
	// A few more periods, so a PV for the plain directory would have appeared.
	time.Sleep(time.Second)

	got := pvs()
	names := slices.Sorted(maps.Keys(got))
	if len(got) != len(wants) {
		t.Fatalf("PVs %v, want exactly %d", names, len(wants))
	}
	fs := corev1.PersistentVolumeFilesystem
	for name, w := range wants {
		pv, ok := got[name]
		if !ok {
			t.Errorf("no PV %s for %s; PVs: %v", name, w.path, names)
			continue
		}
		if by, want := pv.Annotations["pv.kubernetes.io/provisioned-by"], p.Name(w.node); by != want || !strings.HasPrefix(by, "local-volume-provisioner-"+w.node+"-") {
			t.Errorf("%s: provisioned-by %q, want %q (name and uid of %s)", name, by, want, w.node)
		}
		if want := map[string]string{corev1.LabelHostname: w.host}; !maps.Equal(pv.Labels, want) {
			t.Errorf("%s: labels %v, want %v", name, pv.Labels, want)
		}
		affinity := pv.Spec.NodeAffinity
		if affinity == nil || affinity.Required == nil || len(affinity.Required.NodeSelectorTerms) != 1 ||
			len(affinity.Required.NodeSelectorTerms[0].MatchExpressions) != 1 {
			t.Errorf("%s: node affinity %+v, want one term with one expression", name, affinity)
		} else if e := affinity.Required.NodeSelectorTerms[0].MatchExpressions[0]; e.Key != corev1.LabelHostname || e.Operator != corev1.NodeSelectorOpIn || !slices.Equal(e.Values, []string{w.host}) {
			t.Errorf("%s: node affinity %+v, want %s In [%s]", name, e, corev1.LabelHostname, w.host)
		}
		// A 1M tmpfs is 256 blocks of 4 KiB: too small to round, so exactly 1Mi.
		if c := pv.Spec.Capacity[corev1.ResourceStorage]; c.Cmp(resource.MustParse("1Mi")) != 0 {
			t.Errorf("%s: capacity %s, want 1Mi", name, c.String())
		}
		if pv.Spec.Local == nil || pv.Spec.Local.Path != w.path || pv.Spec.Local.FSType != nil {
			t.Errorf("%s: local source %+v, want path %s and no fsType", name, pv.Spec.Local, w.path)
		}
		if pv.Spec.PersistentVolumeReclaimPolicy != del || pv.Spec.StorageClassName != class ||
			pv.Spec.VolumeMode == nil || *pv.Spec.VolumeMode != fs ||
			!slices.Equal(pv.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) ||
			pv.Spec.ClaimRef != nil || len(pv.Spec.MountOptions) != 0 {
			t.Errorf("%s: spec %+v, want Delete, class %s, Filesystem, [ReadWriteOnce], no claim, no mount options", name, pv.Spec, class)
		}
	}
	for _, e := range passErrors.Take() {
		if !strings.Contains(e, filepath.Join(dirA, "plain")+" is not a mount point") {
			t.Errorf("unexpected pass error: %s", e)
		}
	}
	if len(passErrors.Take()) == 0 {
		t.Error("the plain directory drew no discovery error")
	}
	if t.Failed() {
		t.FailNow()
	}

	// The last pod's data, in the volume to be released and in one that stays bound.
	released := "local-pv-d5fcc937"
	vol1, vol2 := filepath.Join(dirA, "vol1"), filepath.Join(dirA, "vol2")
	if err := os.MkdirAll(filepath.Join(vol1, "app", "db"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(vol1, "app", "db", "data"), filepath.Join(vol1, ".hidden"), filepath.Join(vol2, "keep")} {
		if err := os.WriteFile(f, []byte("written by a pod"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// What the PV controller writes: bound to a claim (claimRef with uid, bound-by-controller,
	// phase Bound), then, the claim deleted, phase Released with the claimRef kept.
	pv := got[released]
	oldUID := pv.UID
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "default", Name: "data-0", UID: types.UID("3b0e8c1e-claim")}
	if pv.Annotations == nil {
		pv.Annotations = map[string]string{}
	}
	pv.Annotations["pv.kubernetes.io/bound-by-controller"] = "yes"
	updated, err := cs.CoreV1().PersistentVolumes().Update(ctx, &pv, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("binding %s: %v", released, err)
	}
	for _, phase := range []corev1.PersistentVolumePhase{corev1.VolumeBound, corev1.VolumeReleased} {
		updated.Status.Phase = phase
		if updated, err = cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("setting %s %s: %v", released, phase, err)
		}
	}

	// The provisioner deletes the PV only after cleaning: whenever the old PV is seen being
	// deleted, or gone, the data must already be gone.
	poll("the released PV to be deleted", func() (bool, error) {
		cur, err := cs.CoreV1().PersistentVolumes().Get(ctx, released, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err), err == nil && cur.UID != oldUID:
			// Gone (and perhaps already found again).
		case err != nil:
			return false, err
		case cur.DeletionTimestamp == nil:
			return false, nil
		default:
			// No kube-controller-manager runs: act as its pv-protection controller, which
			// lets an unused volume go.
			cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == "kubernetes.io/pv-protection" })
			if _, err := cs.CoreV1().PersistentVolumes().Update(ctx, cur, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return false, err
			}
		}
		entries, err := os.ReadDir(vol1)
		if err != nil {
			return false, err
		}
		if len(entries) != 0 {
			return false, errors.New("the PV is being deleted but its volume still holds data")
		}
		return true, nil
	})
	if _, err := os.Stat(filepath.Join(vol2, "keep")); err != nil {
		t.Errorf("the volume that was not released lost its data: %v", err)
	}

	// Rediscovery: the same name again, a new object, free. Its phase is the binder's business.
	poll("the volume to be rediscovered", func() (bool, error) {
		cur, err := cs.CoreV1().PersistentVolumes().Get(ctx, released, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return cur.UID != oldUID && cur.DeletionTimestamp == nil, nil
	})
	cur, err := cs.CoreV1().PersistentVolumes().Get(ctx, released, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cur.Spec.ClaimRef != nil || cur.Annotations["pv.kubernetes.io/bound-by-controller"] != "" ||
		cur.Annotations["pv.kubernetes.io/provisioned-by"] != p.Name("node-a") || cur.Spec.Local == nil || cur.Spec.Local.Path != vol1 {
		t.Errorf("rediscovered PV %+v %+v, want a fresh volume at %s from %s", cur.ObjectMeta, cur.Spec, vol1, p.Name("node-a"))
	}
	if n := len(pvs()); n != len(wants) {
		t.Errorf("%d PVs after rediscovery, want %d", n, len(wants))
	}

	for _, e := range passErrors.Take() {
		if !strings.Contains(e, filepath.Join(dirA, "plain")+" is not a mount point") {
			t.Errorf("unexpected pass error: %s", e)
		}
	}
}
