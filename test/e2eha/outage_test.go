package e2eha

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/controlplane"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// outage is the cluster state the outage tests start from: tenant B's claim "data" bound to its
// volume, tenant A's claim "mine" pending, both written through pvguard's webhooks.
type outage struct {
	user            client.Client // storageUser
	tenantA, theirs string
	tenantB         string
	claimB          *corev1.PersistentVolumeClaim
}

func setUpTenants(t *testing.T) *outage {
	t.Helper()
	ctx := context.Background()
	admin := h.Client(t, "")
	o := &outage{user: asStorageUser(t), tenantA: harness.PrefixedNamespace(t, admin, "ha-down-a"), tenantB: harness.PrefixedNamespace(t, admin, "ha-down-b")}
	o.theirs = o.tenantB + "-data"
	pv := testobj.PV(o.theirs)
	harness.Must(t, o.user.Create(ctx, pv), "creating tenant B's volume")
	o.claimB = harness.FreshPVC(testobj.PVC(o.tenantB, "data"))
	harness.Must(t, o.user.Create(ctx, o.claimB), "creating tenant B's claim")
	binder, err := devcluster.NewClient(h.Config, nil, controlplane.BinderUser, controlplane.BinderGroups...)
	if err != nil {
		t.Fatal(err)
	}
	harness.Must(t, controlplane.UpstreamBind(ctx, binder, o.theirs, o.tenantB, "data"), "binding tenant B's claim as the upstream binder")
	harness.Must(t, o.user.Create(ctx, harness.FreshPVC(testobj.PVC(o.tenantA, "mine"))), "creating tenant A's claim")
	return o
}

// grab is tenant A's claim naming tenant B's volume in spec.volumeName: a misbinding that
// no-double-binding (PVG004, deny by default) refuses.
func (o *outage) grab(name string) *corev1.PersistentVolumeClaim {
	return harness.FreshPVC(testobj.PVC(o.tenantA, name, testobj.VolumeName(o.theirs)))
}

// repoint points tenant B's volume at tenant A's claim, the volume side of the same misbinding.
func (o *outage) repoint(ctx context.Context) error {
	return devcluster.PatchPV(ctx, o.user, o.theirs, func(pv *corev1.PersistentVolume) {
		pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name = o.tenantA, "mine"
	})
}

// checkNothingMisbound fails the test if tenant B's binding changed or tenant A's claims got a
// volume, and reports whether the claim grabName exists.
func (o *outage) checkNothingMisbound(t *testing.T, grabName string) (grabStored bool) {
	t.Helper()
	ctx := context.Background()
	c := h.Client(t, "")
	pv := &corev1.PersistentVolume{}
	harness.Must(t, c.Get(ctx, client.ObjectKey{Name: o.theirs}, pv), "reading tenant B's volume")
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Namespace != o.tenantB || ref.Name != "data" || ref.UID != o.claimB.UID || pv.Status.Phase != corev1.VolumeBound {
		t.Errorf("tenant B's volume changed hands: claimRef %+v, phase %s", pv.Spec.ClaimRef, pv.Status.Phase)
	}
	claimB := &corev1.PersistentVolumeClaim{}
	harness.Must(t, c.Get(ctx, client.ObjectKey{Namespace: o.tenantB, Name: "data"}, claimB), "reading tenant B's claim")
	if claimB.Spec.VolumeName != o.theirs || claimB.Status.Phase != corev1.ClaimBound {
		t.Errorf("tenant B's claim lost its volume: volumeName %q, phase %s", claimB.Spec.VolumeName, claimB.Status.Phase)
	}
	mine := &corev1.PersistentVolumeClaim{}
	harness.Must(t, c.Get(ctx, client.ObjectKey{Namespace: o.tenantA, Name: "mine"}, mine), "reading tenant A's claim")
	if mine.Spec.VolumeName != "" || mine.Status.Phase == corev1.ClaimBound {
		t.Errorf("tenant A's claim got bound: volumeName %q, phase %s", mine.Spec.VolumeName, mine.Status.Phase)
	}
	err := c.Get(ctx, client.ObjectKey{Namespace: o.tenantA, Name: grabName}, &corev1.PersistentVolumeClaim{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("reading claim %s: %v", grabName, err)
	}
	return err == nil
}

// TestBothReplicasDownRefusesStorageWrites stops both replicas with the chart's default
// failurePolicy (Fail): the apiserver must refuse every volume and claim write, naming the
// webhook, so nothing gets misbound while pvguard cannot judge; claims in pvguard's own
// namespace still pass, so pvguard can be repaired. With a replica back, writes pass again and
// the misbinding refused during the outage is refused by policy.
func TestBothReplicasDownRefusesStorageWrites(t *testing.T) {
	const secret = "ha-down-tls"
	lb, insts := replicas(t, 2, secret, nil)
	ctx := context.Background()
	o := setUpTenants(t)

	for _, inst := range insts {
		harness.Must(t, inst.Stop(), "stopping "+inst.BaseURL)
	}
	down := time.Now()
	for _, w := range []struct {
		what string
		do   func(context.Context) error
	}{
		{"create a claim", func(ctx context.Context) error {
			return o.user.Create(ctx, harness.FreshPVC(testobj.PVC(o.tenantA, "new")))
		}},
		{"create a claim naming tenant B's volume", func(ctx context.Context) error { return o.user.Create(ctx, o.grab("grab")) }},
		{"update a claim", func(ctx context.Context) error {
			return devcluster.PatchPVC(ctx, o.user, o.tenantA, "mine", func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Labels = map[string]string{"e2eha.pvguard.io/touched": "yes"}
			})
		}},
		{"point tenant B's volume at tenant A's claim", o.repoint},
		{"create a volume", func(ctx context.Context) error { return o.user.Create(ctx, testobj.PV(o.tenantA+"-new")) }},
		{"write a claim's status", func(ctx context.Context) error {
			mine := &corev1.PersistentVolumeClaim{}
			if err := o.user.Get(ctx, client.ObjectKey{Namespace: o.tenantA, Name: "mine"}, mine); err != nil {
				return err
			}
			mine.Status.Phase = corev1.ClaimBound
			return h.Client(t, "").Status().Update(ctx, mine)
		}},
	} {
		start := time.Now()
		err := w.do(ctx)
		switch {
		case err == nil:
			t.Errorf("with both replicas down, %s was admitted", w.what)
		case !harness.WebhookUnreachable(err):
			t.Errorf("with both replicas down, %s failed without naming pvguard's webhook: %v", w.what, err)
		default:
			t.Logf("down: %s refused after %v: %v", w.what, time.Since(start).Round(time.Millisecond), err)
		}
	}
	// Keep trying the misbinding from both sides for a while: no retry slips through.
	attempts := 0
	for time.Since(down) < 3*time.Second {
		for _, err := range []error{o.user.Create(ctx, o.grab("grab")), o.repoint(ctx)} {
			attempts++
			if !harness.WebhookUnreachable(err) {
				t.Fatalf("with both replicas down, attempt %d at the misbinding: got %v, want the webhook unreachable", attempts, err)
			}
		}
	}
	t.Logf("down: %d further attempts at the misbinding in %v, all refused", attempts, time.Since(down).Round(time.Millisecond))
	if o.checkNothingMisbound(t, "grab") {
		t.Error("the claim naming tenant B's volume was stored while pvguard was down")
	}
	// The way back in: claims in pvguard's own namespace are never sent to it, and writes of
	// other kinds do not involve it.
	repair := harness.FreshPVC(testobj.PVC(namespace, "repair"))
	if err := h.Client(t, "").Create(ctx, repair, client.DryRunAll); err != nil {
		t.Errorf("with both replicas down, a claim in pvguard's own namespace was refused: %v", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: o.tenantA, Name: "unrelated"}}
	if err := h.Client(t, "").Create(ctx, cm, client.DryRunAll); err != nil {
		t.Errorf("with both replicas down, a write pvguard does not review failed: %v", err)
	}

	restart := time.Now()
	back := startReplica(t, lb, secret, nil)
	waitRouted(t, lb, back)
	harness.Must(t, devcluster.WaitForWebhook(ctx, h.Client(t, "")), "waiting for the webhook")
	t.Logf("back: a new replica answered the apiserver %v after it was started (outage %v in all)",
		time.Since(restart).Round(time.Millisecond), time.Since(down).Round(time.Millisecond))

	harness.Must(t, o.user.Create(ctx, harness.FreshPVC(testobj.PVC(o.tenantA, "new"))), "creating a claim with a replica back")
	harness.Must(t, devcluster.PatchPVC(ctx, o.user, o.tenantA, "mine", func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Labels = map[string]string{"e2eha.pvguard.io/touched": "yes"}
	}), "updating a claim with a replica back")
	harness.Must(t, o.user.Create(ctx, testobj.PV(o.tenantA+"-new")), "creating a volume with a replica back")
	if err := o.user.Create(ctx, o.grab("grab")); !harness.DeniedBy(err, "PVG004") {
		t.Errorf("with a replica back, the claim naming tenant B's volume: got %v, want a PVG004 denial", err)
	}
	if err := o.repoint(ctx); !harness.DeniedBy(err, "PVG002") {
		t.Errorf("with a replica back, pointing tenant B's volume at tenant A's claim: got %v, want a PVG002 denial", err)
	}
	if o.checkNothingMisbound(t, "grab") {
		t.Error("the claim naming tenant B's volume was stored")
	}
}

// TestBothReplicasDownIgnoreAdmitsThenAuditReports is the documented trade-off of
// failurePolicy Ignore: with both replicas down the same misbinding is admitted unchecked, and
// once a replica is back its live audit reports the state it left.
func TestBothReplicasDownIgnoreAdmitsThenAuditReports(t *testing.T) {
	const secret = "ha-ignore-tls"
	withAudit := func(o *cli.ServeFlags) { o.Audit.Interval = 2 * time.Second }
	lb, insts := replicas(t, 2, secret, withAudit)
	ctx := context.Background()
	ignore := devcluster.WebhookOptions{BaseURL: "https://" + lb.Addr(), FailurePolicy: admissionregistrationv1.Ignore}
	harness.Must(t, devcluster.InstallWebhooks(ctx, h.Config, ignore), "installing the webhooks with failurePolicy Ignore")
	o := setUpTenants(t)
	if err := o.user.Create(ctx, o.grab("grab-up")); !harness.DeniedBy(err, "PVG004") {
		t.Fatalf("with pvguard up, the claim naming tenant B's volume: got %v, want a PVG004 denial", err)
	}

	for _, inst := range insts {
		harness.Must(t, inst.Stop(), "stopping "+inst.BaseURL)
	}
	harness.Must(t, o.user.Create(ctx, o.grab("grab")), "with both replicas down and failurePolicy Ignore, creating the claim naming tenant B's volume")
	if !o.checkNothingMisbound(t, "grab") {
		t.Fatal("the admitted claim is not stored")
	}

	back := startReplica(t, lb, secret, withAudit)
	waitRouted(t, lb, back)
	hc := replicaHTTP(t, secret)
	var found []string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := harness.FetchReport(ctx, hc, back.BaseURL)
		if err != nil {
			return false, nil
		}
		found = found[:0]
		for _, f := range r.Findings {
			if f.Kind == "PersistentVolumeClaim" && f.Namespace == o.tenantA && f.Object == "grab" {
				found = append(found, f.Rule)
			}
		}
		return strings.Contains(strings.Join(found, " "), "PVG004"), nil
	})
	if err != nil {
		t.Fatalf("the audit of the replica back never reported the admitted misbinding under PVG004 (findings on it: %v)", found)
	}
	t.Logf("audit after the outage reports claim %s/grab under %v", o.tenantA, found)
	if err := o.user.Create(ctx, o.grab("grab-after")); !harness.DeniedBy(err, "PVG004") {
		t.Errorf("with a replica back, a new claim naming tenant B's volume: got %v, want a PVG004 denial", err)
	}
}
