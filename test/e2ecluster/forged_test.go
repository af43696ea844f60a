package e2ecluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/test/cluster"
	"github.com/pvguard/pvguard/test/harness"
)

// TestForgedHandOffRefused checks that what the populators, CDI and Velero do is not a way in:
// a tenant-like identity (a ServiceAccount allowed to update volumes) that re-points a volume
// bound to a live claim is refused by PVG002 when
//
//   - it is a plain steal: the volume of another namespace's claim, to its own claim;
//   - it forges a hand-off: to a claim with a dataSourceRef, no volume and its exact uid, but from
//     a claim whose name does not end with "-<that uid>";
//   - the "hand-off" is to a target that is already bound to another volume, from a claim named
//     prime-<target uid>.
//
// Each write must come back from the apiserver as a denial naming PVG002, and the volume must be
// left as it was.
func TestForgedHandOffRefused(t *testing.T) {
	forEachMode(t, func(t *testing.T, m cluster.Mode) *endState {
		ctx := context.Background()
		f := newCSIFlow(t, "forged", m)
		ns := f.ns
		tenantNS := extraNamespace(t, "forged-tenant-"+string(m))
		// A class name without a StorageClass: static volumes only, nothing provisions.
		class := "forged-" + string(m)
		node := cl.Nodes[0]
		tenant := tenantClient(t, tenantNS)

		// An unbound claim of the tenant's, and a populator-style target (dataSourceRef, no
		// volume): both with a selector no volume matches, so that nothing binds them.
		nothing := &metav1.LabelSelector{MatchLabels: map[string]string{"forged.example.com/none": "none"}}
		mine := claim(tenantNS, "mine", class, "10Mi")
		mine.Spec.Selector = nothing
		forgedTarget := claim(tenantNS, "restore", class, "10Mi")
		forgedTarget.Spec.Selector = nothing
		forgedTarget.Spec.DataSourceRef = dataSourceRef("hello.example.com", "Hello", "hello")
		// Bound pairs: another namespace's claim, a target bound to a volume of its own, and a
		// claim named after that target's uid; each volume pre-bound to its claim by an
		// administrator.
		victim := claim(ns, "victim", class, "10Mi")
		boundTarget := claim(tenantNS, "bound-target", class, "10Mi")
		boundTarget.Spec.DataSourceRef = dataSourceRef("hello.example.com", "Hello", "hello")
		pvs := map[string]*corev1.PersistentVolume{}
		// Each volume is made, pre-bound, and Available before its claim, which the binder then
		// binds at once (no claim is ever without its volume, no provisioning is tried).
		preBound := func(c *corev1.PersistentVolumeClaim, key string) {
			pv := csiPV(fmt.Sprintf("forged-%s-%s", m, key), class, node, "10Mi")
			pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: c.Namespace, Name: c.Name}
			pvs[key] = pv
			f.createPVs(pv)
			harness.WaitFor(t, time.Minute, "volume "+pv.Name+" Available", func(ctx context.Context) (bool, error) {
				got := &corev1.PersistentVolume{}
				err := cl.Client.Get(ctx, client.ObjectKeyFromObject(pv), got)
				return err == nil && got.Status.Phase == corev1.VolumeAvailable, err
			})
		}
		preBound(victim, "victim")
		preBound(boundTarget, "bound-target")
		create(t, victim, mine, forgedTarget, boundTarget)
		prime := claim(tenantNS, "prime-"+string(boundTarget.UID), class, "10Mi")
		preBound(prime, "prime")
		create(t, prime)
		harness.WaitFor(t, time.Minute, "the pre-bound claims Bound", func(ctx context.Context) (bool, error) {
			for _, c := range []*corev1.PersistentVolumeClaim{victim, boundTarget, prime} {
				got := &corev1.PersistentVolumeClaim{}
				if err := cl.Client.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil || got.Status.Phase != corev1.ClaimBound {
					return false, err
				}
			}
			return true, nil
		})

		s := newEndState()
		attempt := func(what, volume string, to *corev1.PersistentVolumeClaim) {
			t.Helper()
			to = harness.GetPVC(t, cl.Client, to.Namespace, to.Name)
			pv, err := tenant.CoreV1().PersistentVolumes().Get(ctx, volume, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			was := *pv.Spec.ClaimRef
			// As CDI's Rebind writes it: a full Update with the target's namespace, name, uid and
			// resourceVersion.
			pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: to.Namespace, Name: to.Name, UID: to.UID, ResourceVersion: to.ResourceVersion}
			_, err = tenant.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{})
			switch {
			case err == nil:
				t.Errorf("%s: re-pointing volume %s from %s/%s to %s/%s was admitted, want it refused by PVG002", what, volume, was.Namespace, was.Name, to.Namespace, to.Name)
			case !apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "denied the request") || !strings.Contains(err.Error(), "PVG002"):
				t.Errorf("%s: re-pointing volume %s: %v, want a denial naming PVG002", what, volume, err)
			default:
				t.Logf("%s: refused: %v", what, err)
				s.add("refused by PVG002: "+what, 1)
			}
			if after := harness.GetPV(t, cl.Client, volume); after.Spec.ClaimRef == nil || after.Spec.ClaimRef.UID != was.UID {
				t.Errorf("%s: volume %s now names %+v, want it left bound to %s/%s", what, volume, after.Spec.ClaimRef, was.Namespace, was.Name)
			}
		}
		attempt("a plain steal", pvs["victim"].Name, mine)
		attempt("a forged hand-off from a claim not named after the target", pvs["victim"].Name, forgedTarget)
		attempt("a hand-off to a target already bound", pvs["prime"].Name, boundTarget)

		s.reasons = kindReasons(t, ns, f.volumes)
		return s
	})
}

// tenantClient is a ServiceAccount of the tenant's namespace that may read claims and read and
// update volumes (a ClusterRole granted to it): what an ordinary user with that right can do.
func tenantClient(t *testing.T, ns string) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	cfg, err := cl.ServiceAccountConfig(ctx, ns, "mover")
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "forged-volume-mover"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "forged-volume-mover-" + ns},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "mover"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}}
	if err := cl.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	create(t, binding)
	t.Cleanup(func() { _ = cl.Client.Delete(context.Background(), binding) })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, time.Minute, "the tenant's RBAC in effect", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, err
	})
	return cs
}
