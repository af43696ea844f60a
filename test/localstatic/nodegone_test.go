package localstatic_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/controlplane"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/localstatic"
)

// The node-cleanup controller's identity, as upstream's example deployment installs it
// (deployment/kubernetes/example/node-cleanup-controller/rbac.yaml), in a namespace of its own:
// not one of the components a default install lists.
const (
	cleanupNamespace = "local-static-provisioner"
	cleanupAccount   = "local-volume-node-cleanup-controller"
)

// TestNodeGoneWithPVGuard runs, on a real kube-apiserver with pvguard's default policy and the
// chart's default webhook configurations (components: the chart's four defaults), the local
// static provisioner stand-in on two nodes and a StatefulSet's claim bound to a volume of
// node-a, whose pod waits; node-a is deleted (its provisioner with it). pvguard's audit reports
// both of node-a's volumes (PVG025), naming the bound one's claim, and not node-b's; `explain`
// says the claim waits on a volume whose node is gone and names the pod. Then the node-cleanup
// controller stand-in deletes the claim (uid precondition) and, once the PV controller has
// released it, the volume, and the Available one: every write of the cleanup, and of the
// controllers around it, is admitted without a warning, and the findings go.
func TestNodeGoneWithPVGuard(t *testing.T) {
	h, err := harness.Start("") // the default policy config
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	inst, err := h.Serve(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inst.Stop() })
	if err := h.InstallWebhooks(inst); err != nil {
		t.Fatal(err)
	}
	token, err := harness.ClusterReaderToken(h.Config)
	if err != nil {
		t.Fatal(err)
	}
	reader := harness.WithBearer(h.HTTPSClient(), token)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	admin := h.Client(t, "")
	warned := map[string]*devcluster.Warnings{}
	actor := func(name, user string, groups []string) client.Client {
		w := &devcluster.Warnings{}
		warned[name] = w
		c, err := devcluster.NewClient(h.Config, w, user, groups...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	saGroups := func(ns string) []string {
		return []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	}
	binderUser, binderGroups := controlplane.BinderUser, controlplane.BinderGroups
	pvBinder := actor("PV controller", binderUser, binderGroups)
	pvcProtector := actor("pvc-protection controller", "system:serviceaccount:kube-system:pvc-protection-controller", saGroups("kube-system"))
	pvProtector := actor("pv-protection controller", "system:serviceaccount:kube-system:pv-protection-controller", saGroups("kube-system"))
	statefulSets := actor("StatefulSet controller", "system:serviceaccount:kube-system:statefulset-controller", saGroups("kube-system"))

	const class, ns = "local-storage", "db"
	root := t.TempDir()
	dirA, dirB := filepath.Join(root, "node-a"), filepath.Join(root, "node-b")
	for _, d := range []string{filepath.Join(dirA, "vol1"), filepath.Join(dirA, "vol2"), filepath.Join(dirB, "vol1")} {
		localstatic.MountTmpfs(t, d)
	}
	for _, name := range []string{"node-a", "node-b"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
		harness.Must(t, admin.Create(ctx, n), "creating Node "+name)
	}
	wffc, del := storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimDelete
	harness.Must(t, admin.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class},
		Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wffc, ReclaimPolicy: &del}), "creating the class")
	harness.Must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}), "creating namespace")

	cs, err := kubernetes.NewForConfig(h.Config)
	if err != nil {
		t.Fatal(err)
	}
	// One provisioner per node, as its DaemonSet runs one pod per node: node-a's goes with it.
	startProvisioner := func(node, dir string) (context.CancelFunc, *localstatic.PassErrors) {
		pctx, stop := context.WithCancel(ctx)
		_, errs := localstatic.StartForTest(t, pctx, cs, localstatic.Config{
			Nodes:           []localstatic.Node{{Name: node, Dirs: map[string]string{class: dir}}},
			Classes:         map[string]localstatic.ClassConfig{class: {}},
			NodeLabelsForPV: []string{corev1.LabelHostname},
			DiscoveryPeriod: 200 * time.Millisecond,
		})
		return stop, errs
	}
	stopA, _ := startProvisioner("node-a", dirA)
	startProvisioner("node-b", dirB)
	volumesOn := func(node string) []corev1.PersistentVolume {
		var list corev1.PersistentVolumeList
		harness.Must(t, admin.List(ctx, &list), "listing volumes")
		var out []corev1.PersistentVolume
		for _, pv := range list.Items {
			if pv.Labels[corev1.LabelHostname] == node && pv.DeletionTimestamp == nil {
				out = append(out, pv)
			}
		}
		slices.SortFunc(out, func(a, b corev1.PersistentVolume) int { return strings.Compare(a.Name, b.Name) })
		return out
	}
	// No kube-controller-manager runs: the PV controller's first sync makes a new volume Available.
	harness.Eventually(t, time.Minute, "three volumes discovered and Available", func(ctx context.Context) error {
		all := append(volumesOn("node-a"), volumesOn("node-b")...)
		if len(all) != 3 {
			return fmt.Errorf("%d volumes", len(all))
		}
		for i := range all {
			if all[i].Status.Phase == "" || all[i].Status.Phase == corev1.VolumePending {
				all[i].Status.Phase = corev1.VolumeAvailable
				if err := pvBinder.Status().Update(ctx, &all[i]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	onA := volumesOn("node-a")
	bound, spare := onA[0].Name, onA[1].Name
	onB := volumesOn("node-b")[0].Name

	// A StatefulSet's claim, bound to a volume of node-a (the scheduler chose it, the PV
	// controller completed the binding), and its pod, re-created and waiting.
	claimOf := func(name string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr(class),
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}}}}
	}
	harness.Must(t, statefulSets.Create(ctx, claimOf("data-db-0")), "the StatefulSet controller creating its claim")
	harness.Must(t, controlplane.UpstreamBind(ctx, pvBinder, bound, ns, "data-db-0"), "binding the claim")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-0"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "db", Image: "db"}},
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-0"}}}}}}
	harness.Must(t, admin.Create(ctx, pod), "creating the pod")

	report := func(ctx context.Context) (map[string]string, error) {
		r, err := harness.FetchReport(ctx, reader, inst.BaseURL)
		if err != nil {
			return nil, err
		}
		out := map[string]string{}
		for _, f := range r.Findings {
			if f.Rule == "PVG025" {
				out[f.Object] = f.Message.String() + "; " + f.Hint.String()
			}
		}
		return out, nil
	}
	harness.Eventually(t, time.Minute, "an audit with node-a present", func(ctx context.Context) error {
		r, err := harness.FetchReport(ctx, reader, inst.BaseURL)
		if err != nil {
			return err
		}
		if r.Summary.Objects < 5 { // the class, the claim, three volumes
			return fmt.Errorf("%d objects audited", r.Summary.Objects)
		}
		return nil
	})
	if got, err := report(ctx); err != nil || len(got) != 0 {
		t.Fatalf("with every node present, PVG025 findings %v (%v), want none", got, err)
	}

	// node-a is deleted, and its provisioner with it. The audit runs again at once (a node that
	// goes asks for a full audit): well within the one-minute interval.
	stopA()
	harness.Must(t, admin.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}), "deleting node-a")
	harness.Eventually(t, 30*time.Second, "PVG025 for node-a's volumes", func(ctx context.Context) error {
		got, err := report(ctx)
		if err != nil {
			return err
		}
		if len(got) != 2 || got[bound] == "" || got[spare] == "" {
			return fmt.Errorf("PVG025 findings %v, want %s and %s", got, bound, spare)
		}
		return nil
	})
	got, _ := report(ctx)
	for _, want := range []string{"can be used only on node node-a, which no longer exists", "PersistentVolumeClaim db/data-db-0, which it is bound to", "delete PersistentVolumeClaim db/data-db-0 (a StatefulSet then re-creates it"} {
		if !strings.Contains(got[bound], want) {
			t.Errorf("PVG025 on %s: %q, want it to say %q", bound, got[bound], want)
		}
	}
	if !strings.Contains(got[spare], "delete the volume: its storage went with the node") {
		t.Errorf("PVG025 on %s: %q, want it to say to delete the volume", spare, got[spare])
	}
	if got[onB] != "" {
		t.Errorf("node-b's volume %s reported: %s", onB, got[onB])
	}

	// `pvguard explain pvc db/data-db-0`, live.
	in, err := explain.ReadInput(ctx, admin, admin, ns)
	harness.Must(t, err, "reading the explanation's input")
	e, err := explain.Claim(in, ns, "data-db-0")
	harness.Must(t, err, "explaining the claim")
	if e.WaitingFor != explain.WaitingForNode || !slices.Equal(e.Pods, []string{ns + "/db-0"}) ||
		!strings.Contains(e.State.String(), "stuck: bound to volume "+bound+", which can be used only on node node-a, which no longer exists") ||
		!strings.Contains(e.State.String(), "delete the claim (a StatefulSet re-creates it") {
		t.Errorf("explanation: waiting for %q, pods %v, state %q; want %q, [%s/db-0], the node gone and what frees the claim", e.WaitingFor, e.Pods, e.State.String(), explain.WaitingForNode, ns)
	}

	// The node-cleanup controller, with a short delay (upstream's default is 60s).
	cleanupUser, cleanupGroups := "system:serviceaccount:"+cleanupNamespace+":"+cleanupAccount, saGroups(cleanupNamespace)
	installCleanupRBAC(t, admin)
	cleanupWarnings := &devcluster.Warnings{}
	warned["node-cleanup controller"] = cleanupWarnings
	cleanupCfg := rest.CopyConfig(h.Config)
	cleanupCfg.Impersonate = rest.ImpersonationConfig{UserName: cleanupUser, Groups: cleanupGroups}
	cleanupCfg.WarningHandler = cleanupWarnings
	cleanupCS, err := kubernetes.NewForConfig(cleanupCfg)
	if err != nil {
		t.Fatal(err)
	}
	var (
		cleanupMu   sync.Mutex
		cleanupErrs []string
	)
	cctx, stopCleanup := context.WithCancel(ctx)
	nc, err := localstatic.StartNodeCleanup(cctx, cleanupCS, localstatic.NodeCleanupConfig{
		StorageClassNames:        []string{class},
		PVCDeletionDelay:         time.Second,
		StalePVDiscoveryInterval: 200 * time.Millisecond,
		OnError: func(err error) {
			cleanupMu.Lock()
			defer cleanupMu.Unlock()
			cleanupErrs = append(cleanupErrs, err.Error())
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopCleanup(); <-nc.Done() })

	// The controllers around it: the pod goes (the StatefulSet re-creates it elsewhere later),
	// the pvc-protection controller lets the claim go, the PV controller releases its volume, the
	// pv-protection controller lets the deleted volumes go.
	harness.Must(t, admin.Delete(ctx, pod), "deleting the pod")
	harness.Eventually(t, time.Minute, "the claim and node-a's volumes gone", func(ctx context.Context) error {
		var errs []error
		pvc := &corev1.PersistentVolumeClaim{}
		switch err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-db-0"}, pvc); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return err
		case pvc.DeletionTimestamp != nil && slices.Contains(pvc.Finalizers, "kubernetes.io/pvc-protection"):
			pvc.Finalizers = slices.DeleteFunc(pvc.Finalizers, func(f string) bool { return f == "kubernetes.io/pvc-protection" })
			errs = append(errs, pvcProtector.Update(ctx, pvc), errors.New("claim being deleted"))
		default:
			errs = append(errs, errors.New("claim still there"))
		}
		for _, name := range []string{bound, spare} {
			pv := &corev1.PersistentVolume{}
			switch err := admin.Get(ctx, client.ObjectKey{Name: name}, pv); {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				return err
			case pv.DeletionTimestamp != nil:
				pv.Finalizers = slices.DeleteFunc(pv.Finalizers, func(f string) bool { return f == "kubernetes.io/pv-protection" })
				errs = append(errs, pvProtector.Update(ctx, pv))
			case pv.Spec.ClaimRef != nil && pv.Status.Phase == corev1.VolumeBound && apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-db-0"}, &corev1.PersistentVolumeClaim{})):
				pv.Status.Phase = corev1.VolumeReleased
				errs = append(errs, pvBinder.Status().Update(ctx, pv))
			}
			errs = append(errs, fmt.Errorf("volume %s still there (%s)", name, pv.Status.Phase))
		}
		return errors.Join(errs...)
	})
	if d := nc.Deleted(); !slices.Equal(d, []string{"PersistentVolumeClaim db/data-db-0", "PersistentVolume " + bound}) &&
		!slices.Equal(d, []string{"PersistentVolume " + spare, "PersistentVolumeClaim db/data-db-0", "PersistentVolume " + bound}) &&
		!slices.Equal(d, []string{"PersistentVolumeClaim db/data-db-0", "PersistentVolume " + spare, "PersistentVolume " + bound}) {
		t.Errorf("the node-cleanup controller deleted %v, want the claim then %s, and %s", d, bound, spare)
	}
	harness.Eventually(t, time.Minute, "PVG025 findings gone", func(ctx context.Context) error {
		got, err := report(ctx)
		if err != nil {
			return err
		}
		if len(got) > 0 {
			return fmt.Errorf("PVG025 findings %v", got)
		}
		return nil
	})

	// The StatefulSet re-creates its claim, which node-b's volume serves.
	harness.Must(t, statefulSets.Create(ctx, claimOf("data-db-0")), "the StatefulSet controller re-creating its claim")
	harness.Must(t, controlplane.UpstreamBind(ctx, pvBinder, onB, ns, "data-db-0"), "binding the new claim on node-b")

	for who, w := range warned {
		if ws := w.Take(); len(ws) > 0 {
			t.Errorf("the %s was sent warnings:\n%s", who, strings.Join(ws, "\n"))
		}
	}
	cleanupMu.Lock()
	defer cleanupMu.Unlock()
	if len(cleanupErrs) > 0 {
		t.Errorf("the node-cleanup controller's writes failed:\n%s", strings.Join(cleanupErrs, "\n"))
	}
}

// installCleanupRBAC installs upstream's ClusterRole for the node-cleanup controller and binds
// it to its ServiceAccount.
func installCleanupRBAC(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"get", "list", "watch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
	}
	for _, o := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "local-volume-node-cleanup-controller-runner"}, Rules: rules},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "local-volume-node-cleanup-controller-role"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: cleanupNamespace, Name: cleanupAccount}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "local-volume-node-cleanup-controller-runner"}},
	} {
		harness.Must(t, c.Create(ctx, o), "installing the node-cleanup controller's RBAC")
	}
}

func ptr[T any](v T) *T { return &v }
