package e2eha

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/devcluster"
	"github.com/pvguard/pvguard/internal/cli"
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
	o := &outage{user: asStorageUser(t), tenantA: newNamespace(t, "ha-down-a"), tenantB: newNamespace(t, "ha-down-b")}
	o.theirs = o.tenantB + "-data"
	pv := testobj.PV(o.theirs)
	mustDo(t, "creating tenant B's volume", o.user.Create(ctx, pv))
	o.claimB = fresh(testobj.PVC(o.tenantB, "data"))
	mustDo(t, "creating tenant B's claim", o.user.Create(ctx, o.claimB))
	binder, err := devcluster.NewClient(h.Config, nil, controlplane.BinderUser, controlplane.BinderGroups...)
	if err != nil {
		t.Fatal(err)
	}
	mustDo(t, "binding tenant B's claim as the upstream binder", controlplane.UpstreamBind(ctx, binder, o.theirs, o.tenantB, "data"))
	mustDo(t, "creating tenant A's claim", o.user.Create(ctx, fresh(testobj.PVC(o.tenantA, "mine"))))
	return o
}

func fresh(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	pvc.UID, pvc.Status = "", corev1.PersistentVolumeClaimStatus{}
	return pvc
}

func mustDo(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// grab is tenant A's claim naming tenant B's volume in spec.volumeName: a misbinding that
// no-double-binding (PVG004, deny by default) refuses.
func (o *outage) grab(name string) *corev1.PersistentVolumeClaim {
	return fresh(testobj.PVC(o.tenantA, name, testobj.VolumeName(o.theirs)))
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
	c := adminClient(t)
	pv := &corev1.PersistentVolume{}
	mustDo(t, "reading tenant B's volume", c.Get(ctx, client.ObjectKey{Name: o.theirs}, pv))
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Namespace != o.tenantB || ref.Name != "data" || ref.UID != o.claimB.UID || pv.Status.Phase != corev1.VolumeBound {
		t.Errorf("tenant B's volume changed hands: claimRef %+v, phase %s", pv.Spec.ClaimRef, pv.Status.Phase)
	}
	claimB := &corev1.PersistentVolumeClaim{}
	mustDo(t, "reading tenant B's claim", c.Get(ctx, client.ObjectKey{Namespace: o.tenantB, Name: "data"}, claimB))
	if claimB.Spec.VolumeName != o.theirs || claimB.Status.Phase != corev1.ClaimBound {
		t.Errorf("tenant B's claim lost its volume: volumeName %q, phase %s", claimB.Spec.VolumeName, claimB.Status.Phase)
	}
	mine := &corev1.PersistentVolumeClaim{}
	mustDo(t, "reading tenant A's claim", c.Get(ctx, client.ObjectKey{Namespace: o.tenantA, Name: "mine"}, mine))
	if mine.Spec.VolumeName != "" || mine.Status.Phase == corev1.ClaimBound {
		t.Errorf("tenant A's claim got bound: volumeName %q, phase %s", mine.Spec.VolumeName, mine.Status.Phase)
	}
	err := c.Get(ctx, client.ObjectKey{Namespace: o.tenantA, Name: grabName}, &corev1.PersistentVolumeClaim{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("reading claim %s: %v", grabName, err)
	}
	return err == nil
}

// webhookUnreachable reports whether err is the apiserver refusing a write because it could not
// call one of pvguard's webhooks.
func webhookUnreachable(err error) bool {
	return err != nil && strings.Contains(err.Error(), "failed calling webhook") && strings.Contains(err.Error(), ".pvguard.io\"")
}

func deniedBy(err error, rule string) bool {
	return err != nil && strings.Contains(err.Error(), "denied the request") && strings.Contains(err.Error(), "["+rule+" ")
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
		mustDo(t, "stopping "+inst.BaseURL, inst.Stop())
	}
	down := time.Now()
	for _, w := range []struct {
		what string
		do   func(context.Context) error
	}{
		{"create a claim", func(ctx context.Context) error { return o.user.Create(ctx, fresh(testobj.PVC(o.tenantA, "new"))) }},
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
			return adminClient(t).Status().Update(ctx, mine)
		}},
	} {
		start := time.Now()
		err := w.do(ctx)
		switch {
		case err == nil:
			t.Errorf("with both replicas down, %s was admitted", w.what)
		case !webhookUnreachable(err):
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
			if !webhookUnreachable(err) {
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
	repair := fresh(testobj.PVC(namespace, "repair"))
	if err := adminClient(t).Create(ctx, repair, client.DryRunAll); err != nil {
		t.Errorf("with both replicas down, a claim in pvguard's own namespace was refused: %v", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: o.tenantA, Name: "unrelated"}}
	if err := adminClient(t).Create(ctx, cm, client.DryRunAll); err != nil {
		t.Errorf("with both replicas down, a write pvguard does not review failed: %v", err)
	}

	restart := time.Now()
	back := startReplica(t, lb, secret, nil)
	waitRouted(t, lb, back)
	mustDo(t, "waiting for the webhook", devcluster.WaitForWebhook(ctx, adminClient(t)))
	t.Logf("back: a new replica answered the apiserver %v after it was started (outage %v in all)",
		time.Since(restart).Round(time.Millisecond), time.Since(down).Round(time.Millisecond))

	mustDo(t, "creating a claim with a replica back", o.user.Create(ctx, fresh(testobj.PVC(o.tenantA, "new"))))
	mustDo(t, "updating a claim with a replica back", devcluster.PatchPVC(ctx, o.user, o.tenantA, "mine", func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Labels = map[string]string{"e2eha.pvguard.io/touched": "yes"}
	}))
	mustDo(t, "creating a volume with a replica back", o.user.Create(ctx, testobj.PV(o.tenantA+"-new")))
	if err := o.user.Create(ctx, o.grab("grab")); !deniedBy(err, "PVG004") {
		t.Errorf("with a replica back, the claim naming tenant B's volume: got %v, want a PVG004 denial", err)
	}
	if err := o.repoint(ctx); !deniedBy(err, "PVG002") {
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
	withAudit := func(o *cli.ServeOptions) { o.AuditInterval = 2 * time.Second }
	lb, insts := replicas(t, 2, secret, withAudit)
	ctx := context.Background()
	ignore := devcluster.WebhookOptions{BaseURL: "https://" + lb.Addr(), FailurePolicy: admissionregistrationv1.Ignore}
	mustDo(t, "installing the webhooks with failurePolicy Ignore", devcluster.InstallWebhooks(ctx, h.Config, ignore))
	o := setUpTenants(t)
	if err := o.user.Create(ctx, o.grab("grab-up")); !deniedBy(err, "PVG004") {
		t.Fatalf("with pvguard up, the claim naming tenant B's volume: got %v, want a PVG004 denial", err)
	}

	for _, inst := range insts {
		mustDo(t, "stopping "+inst.BaseURL, inst.Stop())
	}
	mustDo(t, "with both replicas down and failurePolicy Ignore, creating the claim naming tenant B's volume", o.user.Create(ctx, o.grab("grab")))
	if !o.checkNothingMisbound(t, "grab") {
		t.Fatal("the admitted claim is not stored")
	}

	back := startReplica(t, lb, secret, withAudit)
	waitRouted(t, lb, back)
	hc := replicaHTTP(t, secret)
	var found []string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := fetchReport(ctx, hc, back)
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
	if err := o.user.Create(ctx, o.grab("grab-after")); !deniedBy(err, "PVG004") {
		t.Errorf("with a replica back, a new claim naming tenant B's volume: got %v, want a PVG004 denial", err)
	}
}

func fetchReport(ctx context.Context, hc *http.Client, inst *harness.Instance) (*audit.Report, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, inst.BaseURL+"/api/v1/report", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	r := &audit.Report{}
	return r, json.NewDecoder(resp.Body).Decode(r)
}
