package e2ecluster

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/cluster"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/localstatic"
)

// TestLocalStaticProvisionerCycle is flow a: the local static provisioner (test/localstatic, a
// stand-in modelled on its v2.9.0 source) discovers tmpfs mount points under one directory per
// fake node as local volumes of a WaitForFirstConsumer class with reclaim policy Delete; the
// mode's binder makes them Available; pods with a claim each are scheduled, the scheduler binds
// the volumes it chose and the binder completes; pods and claims deleted, the volumes are
// Released, the provisioner's deleter cleans and deletes them, the pv-protection controller lets
// them go, and they are discovered again under the same names, Available, empty.
func TestLocalStaticProvisionerCycle(t *testing.T) {
	const perNode = 2
	forEachMode(t, func(t *testing.T, m cluster.Mode) *endState {
		ctx := context.Background()
		before := readCounters(t)
		f := newFlow(t, "localstatic", m)
		ns := f.ns
		class := "local-cycle-" + string(m)
		wffc, del := storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimDelete
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "kubernetes.io/no-provisioner",
			VolumeBindingMode: &wffc, ReclaimPolicy: &del}
		create(t, sc)
		t.Cleanup(func() { _ = cl.Client.Delete(context.Background(), sc) })

		root := t.TempDir()
		var nodes []localstatic.Node
		for _, n := range cl.Nodes {
			dir := filepath.Join(root, n)
			for i := range perNode {
				localstatic.MountTmpfs(t, filepath.Join(dir, fmt.Sprintf("vol%d", i)))
			}
			nodes = append(nodes, localstatic.Node{Name: n, Dirs: map[string]string{class: dir}})
		}
		warnings := &devcluster.Warnings{}
		// Stopped before the flow's own cleanup deletes the volumes, or it would find them again.
		p, passErrors := localstatic.StartForTest(t, ctx, localProvisionerClient(t, warnings), localstatic.Config{
			Nodes:           nodes,
			Classes:         map[string]localstatic.ClassConfig{class: {}},
			NodeLabelsForPV: []string{corev1.LabelHostname},
			// Upstream's default is 10 s; a shorter period only makes the cycle quicker.
			DiscoveryPeriod: 250 * time.Millisecond,
		})

		want := perNode * len(cl.Nodes)
		discovered := waitDiscovered(t, class, want)
		for _, pv := range discovered {
			f.volumes = append(f.volumes, pv.Name)
		}
		s := newEndState()
		for _, pv := range discovered {
			s.add(fmt.Sprintf("discovered volume: %s, reclaim %s, provisioned-by its node's provisioner %v",
				pv.Status.Phase, pv.Spec.PersistentVolumeReclaimPolicy, pv.Annotations["pv.kubernetes.io/provisioned-by"] == p.Name(volumeNode(&pv))), 1)
		}

		var claims []*corev1.PersistentVolumeClaim
		for i := range want {
			claims = append(claims, claim(ns, fmt.Sprintf("app-%d", i), class, "1Mi"))
		}
		createClaims(t, claims...)
		var pods []*corev1.Pod
		for _, c := range claims {
			pd := pod(ns, c.Name, c.Name)
			create(t, pd)
			pods = append(pods, pd)
		}
		harness.WaitFor(t, 2*time.Minute, "every claim Bound and every pod scheduled", func(ctx context.Context) (bool, error) {
			for _, pd := range pods {
				got, scheduled := &corev1.PersistentVolumeClaim{}, &corev1.Pod{}
				if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pd.Name}, got); err != nil || got.Status.Phase != corev1.ClaimBound {
					return false, err
				}
				if err := cl.Client.Get(ctx, client.ObjectKeyFromObject(pd), scheduled); err != nil || scheduled.Spec.NodeName == "" {
					return false, err
				}
			}
			return true, nil
		})
		uids := map[string]types.UID{}
		for _, pd := range pods {
			pd = getPod(t, ns, pd.Name)
			pvc := harness.GetPVC(t, cl.Client, ns, pd.Name)
			pv := expectBoundPair(t, pvc)
			if pv == nil {
				continue
			}
			if n := volumeNode(pv); n != pd.Spec.NodeName {
				t.Errorf("claim %s is bound to %s on %s, but its pod runs on %s", pvc.Name, pv.Name, n, pd.Spec.NodeName)
			} else {
				s.add("claim Bound on a discovered volume of its pod's node", 1)
			}
			if w := claimRefWriters(pv); !slices.Equal(w, []string{"kube-scheduler"}) {
				t.Errorf("volume %s: spec.claimRef written by %v, want kube-scheduler alone", pv.Name, w)
			}
			shape(s, pvc, pv)
			uids[pv.Name] = pv.UID
			// Data the deleter must remove before the volume is offered again.
			if err := os.WriteFile(filepath.Join(pv.Spec.Local.Path, "data"), []byte(pvc.Name), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		settleUnused(t, s, ns)

		// Release: pods, then claims. The provisioner's deleter cleans each Released volume and
		// deletes it; the pv-protection controller lets it go; discovery makes it again.
		deletePods(t, pods...)
		for _, c := range claims {
			if err := cl.Client.Delete(ctx, c); err != nil {
				t.Fatalf("deleting claim %s: %v", c.Name, err)
			}
		}
		harness.WaitFor(t, 2*time.Minute, "every volume deleted and discovered again, Available", func(ctx context.Context) (bool, error) {
			for name, uid := range uids {
				pv := &corev1.PersistentVolume{}
				err := cl.Client.Get(ctx, client.ObjectKey{Name: name}, pv)
				if apierrors.IsNotFound(err) {
					return false, fmt.Errorf("volume %s not discovered again yet", name)
				}
				if err != nil {
					return false, err
				}
				if pv.UID == uid || pv.Status.Phase != corev1.VolumeAvailable {
					return false, fmt.Errorf("volume %s: uid %s (was %s) %s", name, pv.UID, uid, pv.Status.Phase)
				}
			}
			return true, nil
		})
		for _, pv := range waitDiscovered(t, class, want) {
			if pv.Spec.ClaimRef != nil {
				t.Errorf("rediscovered volume %s has claimRef %+v", pv.Name, pv.Spec.ClaimRef)
			}
			if _, err := os.Stat(filepath.Join(pv.Spec.Local.Path, "data")); !os.IsNotExist(err) {
				t.Errorf("rediscovered volume %s still holds its previous claim's data (%v)", pv.Name, err)
			}
			s.add(fmt.Sprintf("volume after its claim's deletion: cleaned, deleted, rediscovered %s, annotations %v, finalizers %v",
				pv.Status.Phase, slices.Sorted(maps.Keys(pv.Annotations)), pv.Finalizers), 1)
		}
		// pvguard's default policy names no local static provisioner; its writes must draw no
		// warning all the same (PVG013 judges a new volume carrying provisioned-by by state).
		if ws := warnings.Take(); len(ws) > 0 {
			t.Errorf("the local static provisioner was sent warnings:\n%s", strings.Join(ws, "\n"))
		}
		if errs := passErrors.Take(); len(errs) > 0 {
			t.Errorf("the provisioner's passes failed:\n%s", strings.Join(errs, "\n"))
		}
		s.reasons = kindReasons(t, ns, f.volumes)
		checkAdmission(t, before, readCounters(t))
		return s
	})
}

// waitDiscovered waits until the class has n volumes, all Available, and returns them.
func waitDiscovered(t *testing.T, class string, n int) []corev1.PersistentVolume {
	t.Helper()
	var out []corev1.PersistentVolume
	harness.WaitFor(t, time.Minute, fmt.Sprintf("%d volumes of class %s discovered and Available", n, class), func(ctx context.Context) (bool, error) {
		var list corev1.PersistentVolumeList
		if err := cl.Client.List(ctx, &list); err != nil {
			return false, err
		}
		out = out[:0]
		for _, pv := range list.Items {
			if pv.Spec.StorageClassName == class && pv.DeletionTimestamp == nil {
				if pv.Status.Phase != corev1.VolumeAvailable {
					return false, fmt.Errorf("volume %s %s", pv.Name, pv.Status.Phase)
				}
				out = append(out, pv)
			}
		}
		return len(out) == n, fmt.Errorf("%d volumes", len(out))
	})
	return out
}

// The local static provisioner's identity, as its Helm chart installs it: a ServiceAccount bound
// to the apiserver's system:persistent-volume-provisioner ClusterRole, plus reading Nodes (the
// chart's own ClusterRole). It is not one of the controllers pvguard's default policy knows.
const (
	localProvisionerNamespace = "local-static-provisioner"
	localProvisionerAccount   = "local-static-provisioner"
)

// localProvisionerClient installs that identity and returns a client acting as it, the
// apiserver's warnings to it collected in w.
func localProvisionerClient(t *testing.T, w *devcluster.Warnings) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	cfg, err := cl.ServiceAccountConfig(ctx, localProvisionerNamespace, localProvisionerAccount)
	if err != nil {
		t.Fatal(err)
	}
	cfg.WarningHandler = w
	subject := rbacv1.Subject{Kind: "ServiceAccount", Namespace: localProvisionerNamespace, Name: localProvisionerAccount}
	for _, o := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "local-static-provisioner-node"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "local-static-provisioner-node"}, Subjects: []rbacv1.Subject{subject},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "local-static-provisioner-node"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "local-static-provisioner-pv"}, Subjects: []rbacv1.Subject{subject},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:persistent-volume-provisioner"}},
	} {
		if err := cl.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("installing the local static provisioner's RBAC: %v", err)
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
