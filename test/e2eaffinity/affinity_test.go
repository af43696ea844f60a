// Package e2eaffinity shows, on the real kube-apiserver, what pvguard does with a change of a
// linked volume's node affinity: with the MutablePVNodeAffinity feature gate on, PVG009 refuses
// a change that leaves a pod using the claim on a node the volume no longer reaches, and admits
// one that widens the affinity or keeps the pods' nodes; the audit reports a bound pair whose
// pod is out of the volume's reach, and the explanation of its claim says so. With the gate off the apiserver refuses any such change by
// itself, as it always has.
package e2eaffinity

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/harness"
)

const gate = "MutablePVNodeAffinity"

// start runs a control plane (the gate on or off) with one pvguard instance, its webhooks
// installed, its messages rendered for the requester's RBAC rights and its audit running every
// second.
func start(t *testing.T, gateOn bool) (*harness.Harness, *harness.Instance) {
	t.Helper()
	flags := map[string]string{}
	if gateOn {
		flags["feature-gates"] = gate + "=true"
	}
	h, err := harness.StartWith("", devcluster.Options{LogDir: t.TempDir(), APIServerFlags: flags})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop() })
	// Messages name what the requester may read (its RBAC rights), as with a client CA.
	inst, err := h.Serve(func(o *cli.ServeFlags) { o.Audit.Interval, o.Webhook.ReadRights = time.Second, "rbac" })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inst.Stop() })
	harness.Must(t, h.InstallWebhooks(inst), "installing the webhooks")
	return h, inst
}

// hosts is a node affinity on kubernetes.io/hostname.
func hosts(names ...string) *corev1.VolumeNodeAffinity {
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: names}},
	}}}}
}

// setup makes nodes node-1 to node-3, and in a new namespace a claim "data" bound to volume
// pv-<namespace> reachable from node-1 and node-2, as the PV controller's four writes make it.
func setup(ctx context.Context, t *testing.T, h *harness.Harness, admin client.Client) (string, *corev1.PersistentVolume) {
	t.Helper()
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		err := admin.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{corev1.LabelHostname: n}}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating node %s: %v", n, err)
		}
	}
	ns := harness.Namespace(t, admin, "affinity")
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	harness.Must(t, admin.Create(ctx, claim), "creating the claim")
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + ns, Annotations: map[string]string{storage.AnnBoundByController: "yes"}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disks/data"}},
			NodeAffinity:                  hosts("node-1", "node-2"),
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: "data", UID: claim.UID},
		},
	}
	harness.Must(t, admin.Create(ctx, pv), "creating the volume")
	pv.Status.Phase = corev1.VolumeBound
	harness.Must(t, admin.Status().Update(ctx, pv), "the volume's status")
	claim.Spec.VolumeName = pv.Name
	claim.Annotations = map[string]string{storage.AnnBindCompleted: "yes", storage.AnnBoundByController: "yes"}
	harness.Must(t, admin.Update(ctx, claim), "binding the claim")
	claim.Status.Phase = corev1.ClaimBound
	harness.Must(t, admin.Status().Update(ctx, claim), "the claim's status")
	return ns, pv
}

// runPod makes pod name of namespace ns, using the claim "data", on node, and marks it Running
// (no kubelet runs with the harness).
func runPod(ctx context.Context, t *testing.T, admin client.Client, ns, name, node string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		},
	}
	harness.Must(t, admin.Create(ctx, pod), "creating pod "+name)
	pod.Status.Phase = corev1.PodRunning
	harness.Must(t, admin.Status().Update(ctx, pod), "marking pod "+name+" Running")
}

// setAffinity writes the volume with a new node affinity, from the stored volume.
func setAffinity(ctx context.Context, c client.Client, name string, aff *corev1.VolumeNodeAffinity, opts ...client.UpdateOption) error {
	pv := &corev1.PersistentVolume{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, pv); err != nil {
		return err
	}
	pv.Spec.NodeAffinity = aff
	return c.Update(ctx, pv, opts...)
}

func TestNodeAffinityChangeWithTheGateOn(t *testing.T) {
	h, inst := start(t, true)
	ctx := context.Background()
	admin := h.Client(t, "pat@example.com", "system:masters")
	ns, pv := setup(ctx, t, h, admin)
	runPod(ctx, t, admin, ns, "app-0", "node-1")

	// pvguard's informer sees the pod a moment after it is made: dry runs until it refuses, then
	// the write itself.
	harness.WaitFor(t, 30*time.Second, "pvguard refusing a dry-run narrowing away from the pod's node", func(ctx context.Context) (bool, error) {
		return harness.DeniedBy(setAffinity(ctx, admin, pv.Name, hosts("node-2"), client.DryRunAll), "PVG009"), nil
	})
	refused := setAffinity(ctx, admin, pv.Name, hosts("node-2"))
	if !harness.DeniedBy(refused, "PVG009") {
		t.Fatalf("narrowing %s to node-2 while pod %s/app-0 runs on node-1: %v; want PVG009's refusal", pv.Name, ns, refused)
	}
	msg := refused.Error()
	t.Logf("narrowing away from the pod's node: %v", refused)
	if !strings.Contains(msg, "Pod "+ns+"/app-0") || !strings.Contains(msg, "node node-1") {
		t.Errorf("refusal %q does not name the pod %s/app-0 and node node-1", msg, ns)
	}
	if got := harness.GetPV(t, admin, pv.Name); !equalHosts(got, "node-1", "node-2") {
		t.Errorf("the refused write changed the volume: %+v", got.Spec.NodeAffinity)
	}

	// A vendor's controller that may update volumes but not read pods is refused too, and told
	// the node but not the pod.
	vendor := "system:serviceaccount:storage-vendor:controller"
	grantVolumes(ctx, t, admin, vendor)
	err := setAffinity(ctx, h.Client(t, vendor, "system:serviceaccounts", "system:authenticated"), pv.Name, hosts("node-2"))
	t.Logf("the same write by a controller that may not read pods: %v", err)
	if !harness.DeniedBy(err, "PVG009") || strings.Contains(err.Error(), "app-0") || !strings.Contains(err.Error(), policy.HiddenPod) || !strings.Contains(err.Error(), "node node-1") {
		t.Errorf("refusal for a writer who may not read pods: %v; want PVG009 naming node node-1 and %q, not the pod", err, policy.HiddenPod)
	}

	harness.Must(t, setAffinity(ctx, admin, pv.Name, hosts("node-1", "node-2", "node-3")), "widening the affinity")
	harness.Must(t, setAffinity(ctx, admin, pv.Name, hosts("node-1")), "narrowing the affinity to the pod's node")
	if got := harness.GetPV(t, admin, pv.Name); !equalHosts(got, "node-1") {
		t.Errorf("the volume's affinity is %+v, want node-1 only", got.Spec.NodeAffinity)
	}

	// A pod placed on node-3 (spec.nodeName, past the scheduler) is out of the volume's reach:
	// no write of the volume made that state, so the audit reports it.
	runPod(ctx, t, admin, ns, "app-1", "node-3")
	token, err := harness.ClusterReaderToken(h.Config)
	harness.Must(t, err, "getting a cluster reader's token")
	hc := harness.WithBearer(caClient(h.CAPEM), token)
	var found *audit.Finding
	harness.WaitFor(t, 30*time.Second, "the audit reporting the pod out of the volume's reach", func(ctx context.Context) (bool, error) {
		r, err := harness.FetchReport(ctx, hc, inst.BaseURL)
		if err != nil {
			return false, nil
		}
		i := slices.IndexFunc(r.Findings, func(f audit.Finding) bool {
			return f.Rule == "PVG009" && f.Object == pv.Name && strings.Contains(f.Message.String(), ns+"/app-1")
		})
		if i >= 0 {
			found = &r.Findings[i]
		}
		return found != nil, nil
	})
	t.Logf("audit: %s: %s; %s", found.Object, found.Message, found.Hint)
	if !strings.Contains(found.Message.String(), "node node-3") || found.Field != "spec.nodeAffinity" {
		t.Errorf("audit finding %+v does not name node node-3 on spec.nodeAffinity", found)
	}

	// `pvguard explain pvc` (its live read) says the claim's pod cannot run where it is.
	in, err := explain.ReadInput(ctx, admin, admin, ns)
	harness.Must(t, err, "reading the explanation's input")
	e, err := explain.Claim(in, ns, "data")
	harness.Must(t, err, "explaining the claim")
	t.Logf("explain: %s", e.State)
	if s := e.State.String(); !strings.Contains(s, "pod app-1 is on node node-3, which the node affinity of volume "+pv.Name+" does not admit") || strings.Contains(s, "app-0 is on") {
		t.Errorf("explanation %q does not say that pod app-1 (and only it) is out of the volume's reach", s)
	}
}

func TestNodeAffinityChangeWithTheGateOff(t *testing.T) {
	h, _ := start(t, false)
	ctx := context.Background()
	admin := h.Client(t, "pat@example.com", "system:masters")
	ns, pv := setup(ctx, t, h, admin)
	runPod(ctx, t, admin, ns, "app-0", "node-1")
	for _, aff := range []*corev1.VolumeNodeAffinity{hosts("node-2"), hosts("node-1", "node-2", "node-3")} {
		err := setAffinity(ctx, admin, pv.Name, aff)
		if err == nil || !apierrors.IsInvalid(err) || strings.Contains(err.Error(), "denied the request") {
			t.Errorf("changing the affinity to %v with %s off: %v; want the apiserver's own refusal (Invalid), not pvguard's", aff.Required.NodeSelectorTerms[0].MatchExpressions[0].Values, gate, err)
		} else {
			t.Logf("with %s off the apiserver refuses: %v", gate, err)
		}
	}
}

// grantVolumes lets user get, list and update volumes, and nothing else.
func grantVolumes(ctx context.Context, t *testing.T, admin client.Client, user string) {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "volume-writer"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"get", "list", "update"},
	}}}
	harness.Must(t, admin.Create(ctx, role), "creating the volume writer's role")
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "volume-writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	harness.Must(t, admin.Create(ctx, binding), "binding the volume writer's role")
}

func equalHosts(pv *corev1.PersistentVolume, names ...string) bool {
	a := pv.Spec.NodeAffinity
	return a != nil && a.Required != nil && len(a.Required.NodeSelectorTerms) == 1 &&
		len(a.Required.NodeSelectorTerms[0].MatchExpressions) == 1 &&
		slices.Equal(a.Required.NodeSelectorTerms[0].MatchExpressions[0].Values, names)
}

func caClient(caPEM []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}
