package e2e

// End-to-end cases for the deny invariants (docs/rules.md states each rule's invariant): each
// unsafe write is refused with its rule ID whatever verb or patch type makes it, and each
// legitimate upstream write is admitted with no warning, made as the identity that makes it in a
// real cluster.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

const (
	annConfirmReclaim    = "pvguard.io/confirm-reclaim-policy"
	annProvisionedBy     = "pv.kubernetes.io/provisioned-by"
	annBoundByController = "pv.kubernetes.io/bound-by-controller"
	annBindCompleted     = "pv.kubernetes.io/bind-completed"
	annSelectedNode      = "volume.kubernetes.io/selected-node"
	finalizerProvisioner = "external-provisioner.volume.kubernetes.io/finalizer"
	finalizerPVProtect   = "kubernetes.io/pv-protection"
	finalizerPVCProtect  = "kubernetes.io/pvc-protection"
	csiDriver            = "csi.example.com"

	// provisionerNamespace and provisionerSA name a CSI external-provisioner that the suite's
	// config does not list under controllers (it lists csi/csi-provisioner), as on a default
	// install, where the chart lists none.
	provisionerNamespace = "csi-default"
	provisionerSA        = "external-provisioner"
)

// write is one API write, made for real or as a server-side dry run (the webhooks judge both).
type write func(dryRun bool) error

func patchOpts(dry bool) []client.PatchOption {
	if dry {
		return []client.PatchOption{client.DryRunAll}
	}
	return nil
}

func updateOpts(dry bool) []client.UpdateOption {
	if dry {
		return []client.UpdateOption{client.DryRunAll}
	}
	return nil
}

func createOpts(dry bool) []client.CreateOption {
	if dry {
		return []client.CreateOption{client.DryRunAll}
	}
	return nil
}

// rawPatchPV sends body as a patch of the given type, as `kubectl patch --type` does.
func rawPatchPV(a *actor, name string, pt types.PatchType, body string) write {
	return func(dry bool) error {
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
		return a.Patch(context.Background(), pv, client.RawPatch(pt, []byte(body)), patchOpts(dry)...)
	}
}

// replacePV reads the volume, changes it and writes the whole object back, as `kubectl edit`,
// `kubectl replace` and most controllers do.
func replacePV(a *actor, name string, mods ...testobj.PVMod) write {
	return func(dry bool) error {
		ctx := context.Background()
		pv := &corev1.PersistentVolume{}
		if err := a.Get(ctx, client.ObjectKey{Name: name}, pv); err != nil {
			return fmt.Errorf("reading volume %s: %w", name, err)
		}
		for _, m := range mods {
			m(pv)
		}
		return a.Update(ctx, pv, updateOpts(dry)...)
	}
}

// replacePVStatus is replacePV for the status subresource.
func replacePVStatus(a *actor, name string, phase corev1.PersistentVolumePhase) write {
	return func(dry bool) error {
		ctx := context.Background()
		pv := &corev1.PersistentVolume{}
		if err := a.Get(ctx, client.ObjectKey{Name: name}, pv); err != nil {
			return fmt.Errorf("reading volume %s: %w", name, err)
		}
		pv.Status.Phase = phase
		var opts []client.SubResourceUpdateOption
		if dry {
			opts = append(opts, client.DryRunAll)
		}
		return a.Status().Update(ctx, pv, opts...)
	}
}

func createPV(a *actor, pv *corev1.PersistentVolume) write {
	return func(dry bool) error { return a.Create(context.Background(), pv.DeepCopy(), createOpts(dry)...) }
}

func createPVC(a *actor, pvc *corev1.PersistentVolumeClaim) write {
	return func(dry bool) error { return a.Create(context.Background(), pvc.DeepCopy(), createOpts(dry)...) }
}

// settleTimeout bounds how long a case waits for pvguard's informer cache to show what the case
// has just written. A write judged on a stale cache could be admitted and change the very state
// the case is about, so the write is first probed as dry runs; past the timeout the real write is
// made and judged anyway, and the case fails with the apiserver's own answer.
const settleTimeout = 10 * time.Second

func settle(w write, done func(error) bool) {
	_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, settleTimeout, true, func(context.Context) (bool, error) {
		return done(w(true)), nil
	})
}

// expectRefused makes w and requires pvguard's denial by rule; it returns the message.
func expectRefused(t *testing.T, w write, rule string) string {
	t.Helper()
	settle(w, func(err error) bool { return err != nil && strings.Contains(err.Error(), "["+rule+" ") })
	msg := expectDenied(t, w(false), rule)
	t.Logf("refused: %s", msg)
	if strings.Contains(msg, "could not evaluate") {
		t.Errorf("the denial carries an internal error: %s", msg)
	}
	return msg
}

// expectQuiet makes w as a and requires it admitted with no warning at all.
func expectQuiet(t *testing.T, a *actor, w write, what string) {
	t.Helper()
	settle(w, func(err error) bool { return err == nil })
	a.warnings.Take()
	harness.Must(t, w(false), what)
	if ws := a.warnings.Take(); len(ws) > 0 {
		t.Errorf("%s: admitted with warnings %q, want none", what, ws)
	}
}

// Identities beyond main_test.go's.

// storageAdmin is a cluster administrator, a person, not a controller: the tenant or operator
// whose hand edits the rules judge.
func storageAdmin(t *testing.T) *actor {
	return newActor(t, "storage-admin@example.com", "system:masters", "system:authenticated")
}

func seeder(t *testing.T) *actor {
	return newActor(t, seederUser, "system:masters", "system:authenticated")
}

// kubeSystemSA impersonates a kube-controller-manager controller's service account; the
// apiserver's bootstrap RBAC gives it its upstream permissions.
func kubeSystemSA(t *testing.T, name string) *actor {
	return newActor(t, "system:serviceaccount:kube-system:"+name,
		"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated")
}

// csiProvisioner impersonates a CSI external-provisioner bound to the ClusterRole its upstream
// deploy/kubernetes/rbac.yaml ships (kubernetes-csi/external-provisioner), and waits until the
// apiserver's authorizer has seen the binding.
func csiProvisioner(t *testing.T) *actor {
	t.Helper()
	ctx := context.Background()
	a := admin(t)
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: uniq(t, "external-provisioner-runner")},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "update"}},
			{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses", "csinodes"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list", "watch", "create", "update", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: provisionerNamespace, Name: provisionerSA}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
	}
	harness.Must(t, a.Create(ctx, role), "creating the external-provisioner ClusterRole")
	harness.Must(t, a.Create(ctx, binding), "binding the external-provisioner ClusterRole")
	t.Cleanup(func() {
		_ = a.Delete(context.Background(), binding)
		_ = a.Delete(context.Background(), role)
	})
	p := newActor(t, "system:serviceaccount:"+provisionerNamespace+":"+provisionerSA,
		"system:serviceaccounts", "system:serviceaccounts:"+provisionerNamespace, "system:authenticated")
	harness.Eventually(t, time.Minute, "the external-provisioner's RBAC in effect", func(context.Context) error {
		return p.List(ctx, &corev1.PersistentVolumeList{}, client.Limit(1))
	})
	return p
}

// quietly runs one write of an upstream flow and requires it admitted with no warning.
func quietly(t *testing.T, a *actor, what string, f func() error) {
	t.Helper()
	a.warnings.Take()
	harness.Must(t, f(), what)
	if ws := a.warnings.Take(); len(ws) > 0 {
		t.Errorf("%s: admitted with warnings %q, want none", what, ws)
	}
}

// boundPair creates a volume and a claim and binds them with the PV controller's four writes.
func boundPair(t *testing.T, ns, claim string, pvMods ...testobj.PVMod) (string, *corev1.PersistentVolumeClaim) {
	t.Helper()
	pv := uniq(t, "pv-"+claim)
	createPair(t, admin(t), pv, ns, claim, pvMods, nil)
	harness.Must(t, bindAsUpstream(context.Background(), binder(t), pv, ns, claim), "binding "+pv+" to "+ns+"/"+claim)
	return pv, harness.GetPVC(t, admin(t), ns, claim)
}

// expectLinked fails unless the volume's claimRef still names the claim with its uid.
func expectLinked(t *testing.T, pvName string, pvc *corev1.PersistentVolumeClaim) {
	t.Helper()
	ref := harness.GetPV(t, admin(t), pvName).Spec.ClaimRef
	if ref == nil || ref.Namespace != pvc.Namespace || ref.Name != pvc.Name || ref.UID != pvc.UID {
		t.Fatalf("volume %s no longer linked to %s/%s uid %s: claimRef %+v", pvName, pvc.Namespace, pvc.Name, pvc.UID, ref)
	}
}

func without(list []string, s string) []string {
	out := make([]string, 0, len(list))
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// markReleased is the PV controller's status write once a volume's claim is gone.
func markReleased(t *testing.T, pvName string) {
	t.Helper()
	b := binder(t)
	quietly(t, b, "the PV controller marking "+pvName+" Released", func() error {
		return replacePVStatus(b, pvName, corev1.VolumeReleased)(false)
	})
}

// 1. A bound pair stays bound: whatever the verb or patch type, clearing a Bound volume's
// claimRef, or dropping only its uid, while its live bind-completed claim names it is refused.
func TestInvariantBoundPairClaimRefKept(t *testing.T) {
	ops := storageAdmin(t)
	for _, tc := range []struct {
		name string
		w    func(pv string) write
	}{
		{"merge patch claimRef null", func(pv string) write {
			return rawPatchPV(ops, pv, types.MergePatchType, `{"spec":{"claimRef":null}}`)
		}},
		{"strategic merge patch claimRef null as kubectl patch", func(pv string) write {
			return rawPatchPV(ops, pv, types.StrategicMergePatchType, `{"spec":{"claimRef":null}}`)
		}},
		{"JSON patch remove claimRef", func(pv string) write {
			return rawPatchPV(ops, pv, types.JSONPatchType, `[{"op":"remove","path":"/spec/claimRef"}]`)
		}},
		{"get clear update as kubectl edit or replace", func(pv string) write {
			return replacePV(ops, pv, testobj.NoClaimRef)
		}},
		{"JSON patch remove claimRef uid", func(pv string) write {
			return rawPatchPV(ops, pv, types.JSONPatchType, `[{"op":"remove","path":"/spec/claimRef/uid"}]`)
		}},
		{"merge patch claimRef uid empty", func(pv string) write {
			return rawPatchPV(ops, pv, types.MergePatchType, `{"spec":{"claimRef":{"uid":""}}}`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A pair of its own: a way wrongly admitted must not change the state the next is judged on.
			ns := harness.PrefixedNamespace(t, admin(t), "keep")
			pv, pvc := boundPair(t, ns, "data")
			msg := expectRefused(t, tc.w(pv), "PVG002")
			expectNoRouteAround(t, msg)
			expectLinked(t, pv, pvc)
		})
	}
}

// expectNoRouteAround fails when a denial's hint suggests freeing the volume by hand, the
// first step of the two-write walks below.
func expectNoRouteAround(t *testing.T, msg string) {
	t.Helper()
	for _, s := range []string{"drop spec.claimRef", "remove spec.claimRef", "clear spec.claimRef", "claimRef to null"} {
		if strings.Contains(msg, s) {
			t.Errorf("the denial suggests a route around the rule (%q): %s", s, msg)
		}
	}
}

// 1. The two-write walks around single-write guards: the first step is refused, so the end
// state is never reached.
func TestInvariantTwoStepWalksRefused(t *testing.T) {
	ctx := context.Background()
	ops := storageAdmin(t)
	clearRef := func(pv string) write {
		return rawPatchPV(ops, pv, types.MergePatchType, `{"spec":{"claimRef":null}}`)
	}

	t.Run("clear claimRef then point it at another claim", func(t *testing.T) {
		ns := harness.PrefixedNamespace(t, admin(t), "walk-repoint")
		pv, pvc := boundPair(t, ns, "data")
		other := harness.FreshPVC(testobj.PVC(ns, "other"))
		harness.Must(t, admin(t).Create(ctx, other), "creating a pending claim")

		expectRefused(t, clearRef(pv), "PVG002")
		repoint := fmt.Sprintf(`{"spec":{"claimRef":{"namespace":%q,"name":%q,"uid":%q}}}`, ns, other.Name, other.UID)
		expectRefused(t, rawPatchPV(ops, pv, types.MergePatchType, repoint), "PVG002")
		expectLinked(t, pv, pvc)
	})

	t.Run("clear claimRef then flip Retain to Delete unconfirmed", func(t *testing.T) {
		ns := harness.PrefixedNamespace(t, admin(t), "walk-reclaim")
		pv, pvc := boundPair(t, ns, "data", testobj.Reclaim(corev1.PersistentVolumeReclaimRetain))

		expectRefused(t, clearRef(pv), "PVG002")
		expectRefused(t, rawPatchPV(ops, pv, types.MergePatchType, `{"spec":{"persistentVolumeReclaimPolicy":"Delete"}}`), "PVG011")
		expectLinked(t, pv, pvc)
		if got := harness.GetPV(t, admin(t), pv).Spec.PersistentVolumeReclaimPolicy; got != corev1.PersistentVolumeReclaimRetain {
			t.Fatalf("reclaim policy of %s is %s, want Retain", pv, got)
		}
	})
}

// 2. A reclaim confirmation counts only in the write that flips the policy: one an earlier
// write left on the volume confirms nothing.
func TestInvariantReclaimConfirmationInTheSameWrite(t *testing.T) {
	ops := storageAdmin(t)
	flip := func(pv string) write {
		return rawPatchPV(ops, pv, types.MergePatchType, `{"spec":{"persistentVolumeReclaimPolicy":"Delete"}}`)
	}
	editFlip := func(pv string) write {
		return replacePV(ops, pv, testobj.Reclaim(corev1.PersistentVolumeReclaimDelete))
	}
	confirmedFlip := func(pv string) write {
		return rawPatchPV(ops, pv, types.MergePatchType, fmt.Sprintf(
			`{"metadata":{"annotations":{%q:"Delete"}},"spec":{"persistentVolumeReclaimPolicy":"Delete"}}`, annConfirmReclaim))
	}
	expectPolicy := func(t *testing.T, pv string, want corev1.PersistentVolumeReclaimPolicy) {
		t.Helper()
		if got := harness.GetPV(t, admin(t), pv).Spec.PersistentVolumeReclaimPolicy; got != want {
			t.Fatalf("reclaim policy of %s is %s, want %s", pv, got, want)
		}
	}

	for _, tc := range []struct {
		name    string
		initial corev1.PersistentVolumeReclaimPolicy
		// leave is the earlier write that leaves a confirmation on the volume.
		leave string
	}{
		{"left by a Delete to Retain flip", corev1.PersistentVolumeReclaimDelete,
			fmt.Sprintf(`{"metadata":{"annotations":{%q:"Delete"}},"spec":{"persistentVolumeReclaimPolicy":"Retain"}}`, annConfirmReclaim)},
		{"set alone", corev1.PersistentVolumeReclaimRetain,
			fmt.Sprintf(`{"metadata":{"annotations":{%q:"Delete"}}}`, annConfirmReclaim)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := harness.PrefixedNamespace(t, admin(t), "confirm")
			pv, _ := boundPair(t, ns, "data", testobj.Reclaim(tc.initial))
			harness.Must(t, rawPatchPV(ops, pv, types.MergePatchType, tc.leave)(false), "leaving a confirmation on "+pv)
			expectPolicy(t, pv, corev1.PersistentVolumeReclaimRetain)

			expectRefused(t, flip(pv), "PVG011")
			expectRefused(t, editFlip(pv), "PVG011")
			expectPolicy(t, pv, corev1.PersistentVolumeReclaimRetain)

			// The same flip confirmed in its own write: the stale annotation goes first, so that
			// the flip adds it.
			harness.Must(t, rawPatchPV(ops, pv, types.MergePatchType, fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, annConfirmReclaim))(false),
				"removing the stale confirmation")
			expectQuiet(t, ops, confirmedFlip(pv), "the flip confirmed in the same write")
			expectPolicy(t, pv, corev1.PersistentVolumeReclaimDelete)
		})
	}

	t.Run("changed to the new policy by the flip", func(t *testing.T) {
		ns := harness.PrefixedNamespace(t, admin(t), "confirm")
		pv, _ := boundPair(t, ns, "data", testobj.Reclaim(corev1.PersistentVolumeReclaimRetain))
		harness.Must(t, rawPatchPV(ops, pv, types.MergePatchType, fmt.Sprintf(`{"metadata":{"annotations":{%q:"Retain"}}}`, annConfirmReclaim))(false),
			"leaving a confirmation of another policy")
		expectRefused(t, flip(pv), "PVG011")
		expectQuiet(t, ops, confirmedFlip(pv), "the flip that changes the confirmation to Delete")
		expectPolicy(t, pv, corev1.PersistentVolumeReclaimDelete)
	})
}

// csiClass creates a StorageClass of the test CSI driver.
func csiClass(t *testing.T, mods ...func(*storagev1.StorageClass)) string {
	t.Helper()
	a := admin(t)
	sc := testobj.StorageClass(uniq(t, "sc"), csiDriver, mods...)
	harness.Must(t, a.Create(context.Background(), sc), "creating StorageClass "+sc.Name)
	t.Cleanup(func() { _ = a.Delete(context.Background(), sc) })
	return sc.Name
}

func reclaimDelete(sc *storagev1.StorageClass) {
	p := corev1.PersistentVolumeReclaimDelete
	sc.ReclaimPolicy = &p
}

// provisioned is the volume an external provisioner saves for a claim once the backend volume
// exists: named pvc-<claim uid>, pointing at the claim with its uid and resourceVersion,
// annotated provisioned-by, holding the provisioner's finalizer, with the class's Delete policy.
func provisioned(pvc *corev1.PersistentVolumeClaim, class string) *corev1.PersistentVolume {
	name := "pvc-" + string(pvc.UID)
	pv := harness.FreshPV(testobj.PV(name,
		testobj.CSI(csiDriver, "vol-"+string(pvc.UID), map[string]string{"storage.kubernetes.io/csiProvisionerIdentity": "1700000000000-0-" + csiDriver}),
		testobj.Class(class),
		testobj.Reclaim(corev1.PersistentVolumeReclaimDelete),
		testobj.PVMeta(testobj.Annotation(annProvisionedBy, csiDriver), testobj.Finalizers(finalizerProvisioner)),
	))
	pv.Spec.ClaimRef = &corev1.ObjectReference{
		Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name,
		UID: pvc.UID, ResourceVersion: pvc.ResourceVersion,
	}
	return pv
}

// 3. The external provisioner saving the volume it provisioned for a claim that went away, or
// was bound to another volume, while provisioning ran: upstream relies on that save to release
// and delete the backend volume, so it is admitted with no warning.
func TestInvariantProvisionerSavesVolumeOfVanishedClaim(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	prov := csiProvisioner(t)
	class := csiClass(t, reclaimDelete)
	claimOf := func(ns string) *corev1.PersistentVolumeClaim {
		pvc := harness.FreshPVC(testobj.PVC(ns, "data", testobj.ClaimClass(class)))
		harness.Must(t, a.Create(ctx, pvc), "creating claim "+ns+"/data")
		return pvc
	}

	// The ordinary save, the claim still waiting for it, for comparison with the races.
	t.Run("claim still pending", func(t *testing.T) {
		ns := harness.PrefixedNamespace(t, admin(t), "prov-pending")
		pvc := claimOf(ns)
		expectQuiet(t, prov, createPV(prov, provisioned(pvc, class)), "saving the volume of a pending claim")
	})

	t.Run("claim deleted", func(t *testing.T) {
		ns := harness.PrefixedNamespace(t, admin(t), "prov-deleted")
		pvc := claimOf(ns)
		harness.DeleteClaim(t, admin(t), kubeSystemSA(t, "pvc-protection-controller"), ns, pvc.Name)
		expectQuiet(t, prov, createPV(prov, provisioned(pvc, class)), "saving the volume of a deleted claim")
	})

	t.Run("claim re-created", func(t *testing.T) {
		ns := harness.PrefixedNamespace(t, admin(t), "prov-recreated")
		pvc := claimOf(ns)
		harness.DeleteClaim(t, admin(t), kubeSystemSA(t, "pvc-protection-controller"), ns, pvc.Name)
		claimOf(ns)
		expectQuiet(t, prov, createPV(prov, provisioned(pvc, class)), "saving the volume of a claim re-created since")
	})

	t.Run("claim bound to another volume", func(t *testing.T) {
		ns := harness.PrefixedNamespace(t, admin(t), "prov-elsewhere")
		pvc := claimOf(ns)
		other := uniq(t, "pv-other")
		harness.Must(t, a.Create(ctx, harness.FreshPV(testobj.PV(other, testobj.Class(class)))), "creating another volume")
		harness.Must(t, bindAsUpstream(ctx, binder(t), other, ns, pvc.Name), "binding the claim to the other volume")
		expectQuiet(t, prov, createPV(prov, provisioned(pvc, class)), "saving the volume of a claim bound elsewhere")
	})
}

// 4. The PV controller re-linking a volume whose claimRef was lost to the bind-completed claim
// that names it (syncBoundClaim, "volume is unbound, fixing") while the claim is mid-expansion:
// the claim asks for more than the volume has yet, and the pair is judged by what the claim was
// given.
func TestInvariantRelinkToOwnerMidExpansion(t *testing.T) {
	ctx := context.Background()
	s := seeder(t)
	ns := harness.PrefixedNamespace(t, admin(t), "relink")
	pvName := uniq(t, "pv")
	expandable := true
	class := csiClass(t, func(sc *storagev1.StorageClass) { sc.AllowVolumeExpansion = &expandable })

	// The lost link is seeded by the exempt seeder: clearing a bound pair's claimRef is what
	// pvguard refuses everyone else.
	pv := harness.FreshPV(testobj.PV(pvName, testobj.Class(class), testobj.Capacity("1Gi")))
	harness.Must(t, s.Create(ctx, pv), "seeding the volume")
	pv.Status.Phase = corev1.VolumeAvailable
	harness.Must(t, s.Status().Update(ctx, pv), "seeding the volume's phase")
	pvc := harness.FreshPVC(testobj.PVC(ns, "data", testobj.ClaimClass(class), testobj.VolumeName(pvName),
		testobj.ClaimMeta(testobj.Annotation(annBindCompleted, "yes"), testobj.Annotation(annBoundByController, "yes"))))
	harness.Must(t, s.Create(ctx, pvc), "seeding the bind-completed claim")
	pvc.Status = corev1.PersistentVolumeClaimStatus{
		Phase:       corev1.ClaimBound,
		Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
	}
	harness.Must(t, s.Status().Update(ctx, pvc), "seeding the claim's status")

	// The tenant asks for more; the resizer has not grown the volume yet. The apiserver's
	// PersistentVolumeClaimResize plugin reads the class from its own informer, so it may take a
	// moment to allow the expansion.
	tenant := storageAdmin(t)
	harness.Eventually(t, time.Minute, "the claim's request raised to 2Gi", func(context.Context) error {
		return patchPVC(ctx, tenant, ns, "data", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
		})
	})

	// The PV controller's re-link is its bind(): PV spec, PV status, PVC spec, PVC status.
	b := binder(t)
	relink := replacePV(b, pvName, func(v *corev1.PersistentVolume) {
		v.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: "data", UID: pvc.UID}
		setAnnotation(&v.Annotations, annBoundByController, "yes")
	})
	settle(relink, func(err error) bool { return err == nil })
	quietly(t, b, "the PV controller re-linking the volume to its mid-expansion claim", func() error {
		return bindAsUpstream(ctx, b, pvName, ns, "data")
	})
	expectLinked(t, pvName, harness.GetPVC(t, admin(t), ns, "data"))
}

// 5. On a default install (the provisioner listed nowhere), the CSI external-provisioner
// removing its own finalizer from the Released volume it has just deleted: the volume is being
// deleted and its claim is gone, so the removal is admitted with no warning and the volume goes.
func TestInvariantProvisionerRemovesItsFinalizerFromDeletedVolume(t *testing.T) {
	ctx := context.Background()
	ns := harness.PrefixedNamespace(t, admin(t), "prov-finalizer")
	prov := csiProvisioner(t)
	class := csiClass(t, reclaimDelete)
	pvc := harness.FreshPVC(testobj.PVC(ns, "data", testobj.ClaimClass(class)))
	harness.Must(t, admin(t).Create(ctx, pvc), "creating the claim")
	pv := provisioned(pvc, class)
	harness.Must(t, prov.Create(ctx, pv), "the provisioner saving the volume it provisioned")
	harness.Must(t, bindAsUpstream(ctx, binder(t), pv.Name, ns, pvc.Name), "the PV controller binding it")

	harness.DeleteClaim(t, admin(t), kubeSystemSA(t, "pvc-protection-controller"), ns, pvc.Name)
	markReleased(t, pv.Name)

	// The provisioner deletes the backend volume, then the PersistentVolume, which its
	// finalizer holds; the pv-protection controller lets a volume that is not Bound go.
	harness.Must(t, prov.Delete(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv.Name}}), "the provisioner deleting the volume")
	if deleting := harness.GetPV(t, admin(t), pv.Name); deleting.DeletionTimestamp == nil {
		t.Fatalf("volume %s was not held by its finalizers (%v)", pv.Name, deleting.Finalizers)
	}
	pvProtector := kubeSystemSA(t, "pv-protection-controller")
	quietly(t, pvProtector, "the pv-protection controller removing its finalizer", func() error {
		return replacePV(pvProtector, pv.Name, func(v *corev1.PersistentVolume) {
			v.Finalizers = without(v.Finalizers, finalizerPVProtect)
		})(false)
	})

	// sig-storage-lib-external-provisioner removes its finalizer with a strategic merge patch
	// computed from the volume it holds.
	removeFinalizer := func(dry bool) error {
		cur := &corev1.PersistentVolume{}
		if err := prov.Get(ctx, client.ObjectKey{Name: pv.Name}, cur); err != nil {
			return err
		}
		next := cur.DeepCopy()
		next.Finalizers = without(next.Finalizers, finalizerProvisioner)
		patch, err := twoWayPatch(cur, next)
		if err != nil {
			return err
		}
		return prov.Patch(ctx, cur, client.RawPatch(types.StrategicMergePatchType, patch), patchOpts(dry)...)
	}
	expectQuiet(t, prov, removeFinalizer, "the provisioner removing its finalizer from the deleted volume")
	harness.Eventually(t, time.Minute, "volume "+pv.Name+" gone", func(context.Context) error {
		err := admin(t).Get(ctx, client.ObjectKey{Name: pv.Name}, &corev1.PersistentVolume{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
}

func twoWayPatch(cur, next *corev1.PersistentVolume) ([]byte, error) {
	a, err := json.Marshal(cur)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(next)
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(a, b, &corev1.PersistentVolume{})
}

// 6. A malformed claimRef yields the PVG014 finding on the field, never an internal error that
// aborts the review.
func TestInvariantMalformedClaimRefIsAFinding(t *testing.T) {
	ctx := context.Background()
	ops := storageAdmin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "malformed")
	live := harness.FreshPVC(testobj.PVC(ns, "data"))
	harness.Must(t, admin(t).Create(ctx, live), "creating a claim")

	for _, tc := range []struct {
		name, field string
		ref         corev1.ObjectReference
	}{
		{"uid without name", "spec.claimRef.name", corev1.ObjectReference{Namespace: ns, UID: live.UID}},
		{"uid without namespace", "spec.claimRef.namespace", corev1.ObjectReference{Name: "data", UID: live.UID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.ref.Kind, tc.ref.APIVersion = "PersistentVolumeClaim", "v1"
			pv := harness.FreshPV(testobj.PV(uniq(t, "pv")))
			pv.Spec.ClaimRef = tc.ref.DeepCopy()
			expectPVG014(t, expectRefusedErr(t, createPV(ops, pv), "PVG014"), tc.field)

			// The same link written onto an existing volume.
			free := uniq(t, "pv-free")
			harness.Must(t, admin(t).Create(ctx, harness.FreshPV(testobj.PV(free))), "creating a volume")
			ref, err := json.Marshal(tc.ref)
			harness.Must(t, err, "encoding the claimRef")
			w := rawPatchPV(ops, free, types.JSONPatchType, `[{"op":"add","path":"/spec/claimRef","value":`+string(ref)+`}]`)
			expectPVG014(t, expectRefusedErr(t, w, "PVG014"), tc.field)
		})
	}
}

// expectRefusedErr is expectRefused returning the error, for its status causes.
func expectRefusedErr(t *testing.T, w write, rule string) error {
	t.Helper()
	settle(w, func(err error) bool { return err != nil && strings.Contains(err.Error(), "["+rule+" ") })
	err := w(false)
	expectDenied(t, err, rule)
	return err
}

// expectPVG014 requires the denial to be PVG014's finding on field, not an internal error.
func expectPVG014(t *testing.T, err error, field string) {
	t.Helper()
	if strings.Contains(err.Error(), "could not evaluate") {
		t.Fatalf("an internal error instead of the finding: %v", err)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		t.Fatalf("the denial carries no status details: %v", err)
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == field && strings.Contains(c.Message, "[PVG014 ") {
			return
		}
	}
	t.Fatalf("no PVG014 cause on %s; causes %+v", field, status.Status().Details.Causes)
}

// 7. Node affinity against volume.kubernetes.io/selected-node when the Node object does not
// exist: judged with the labels every kubelet sets (kubernetes.io/hostname = the node name), and
// the message says so.
func TestInvariantNodeAffinityAssumesAbsentNode(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "absent-node")
	node := "n-absent-" + strings.TrimPrefix(ns, "absent-node-")
	if err := a.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Fatalf("node %s should not exist: %v", node, err)
	}
	selected := testobj.ClaimMeta(testobj.Annotation(annSelectedNode, node))

	t.Run("pre-bound claim and a volume for another node", func(t *testing.T) {
		pv := uniq(t, "pv")
		harness.Must(t, a.Create(ctx, harness.FreshPV(testobj.PV(pv, testobj.NodeAffinity("kubernetes.io/hostname", "other")))), "creating volume")
		msg := expectRefused(t, createPVC(a, harness.FreshPVC(testobj.PVC(ns, "elsewhere", selected, testobj.VolumeName(pv)))), "PVG009")
		expectAssumedNode(t, msg, node)
	})
	t.Run("pre-bound claim and a volume for that node", func(t *testing.T) {
		pv := uniq(t, "pv")
		harness.Must(t, a.Create(ctx, harness.FreshPV(testobj.PV(pv, testobj.NodeAffinity("kubernetes.io/hostname", node)))), "creating volume")
		a.warnings.Take()
		harness.Must(t, a.Create(ctx, harness.FreshPVC(testobj.PVC(ns, "here", selected, testobj.VolumeName(pv)))), "creating the claim")
		if ws := a.warnings.Take(); hasWarning(ws, "PVG009") {
			t.Errorf("a PVG009 warning for a volume on the selected node: %q", ws)
		}
	})

	// The same through the scheduler and the PV controller, as in a cluster.
	scheduler := newActor(t, schedulerUser)
	for _, tc := range []struct {
		name, claim, host, rule string
	}{
		{name: "PV controller bind of a volume for another node", claim: "bind-elsewhere", host: "other", rule: "PVG009"},
		{name: "PV controller bind of a volume for that node", claim: "bind-here", host: node},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pv, claim := uniq(t, "pv"), tc.claim
			createPair(t, a, pv, ns, claim, []testobj.PVMod{testobj.NodeAffinity("kubernetes.io/hostname", tc.host)}, nil)
			harness.Must(t, patchPVC(ctx, scheduler, ns, claim, func(pvc *corev1.PersistentVolumeClaim) {
				setAnnotation(&pvc.Annotations, annSelectedNode, node)
			}), "the scheduler selecting the node")
			pvc := harness.GetPVC(t, admin(t), ns, claim)
			b := binder(t)
			step1 := replacePV(b, pv, func(v *corev1.PersistentVolume) {
				v.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: claim, UID: pvc.UID}
				setAnnotation(&v.Annotations, annBoundByController, "yes")
			})
			if tc.rule != "" {
				expectAssumedNode(t, expectRefused(t, step1, tc.rule), node)
				return
			}
			settle(step1, func(err error) bool { return err == nil })
			quietly(t, b, "binding a volume for the selected node", func() error { return bindAsUpstream(ctx, b, pv, ns, claim) })
		})
	}
}

// expectAssumedNode fails unless a PVG009 message says the node was not found and which label
// it was judged by instead.
func expectAssumedNode(t *testing.T, msg, node string) {
	t.Helper()
	said := strings.Contains(msg, "not found") || strings.Contains(strings.ToLower(msg), "assum")
	if !said || !strings.Contains(msg, "kubernetes.io/hostname="+node) {
		t.Errorf("the message does not say node %s was judged by assumed labels (kubernetes.io/hostname=%s): %s", node, node, msg)
	}
}

// 8. VolumeAttributesClass: upstream binds a claim only to a volume of the same
// volumeAttributesClassName.
func TestInvariantVolumeAttributesClassMatch(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "vac")
	gold, silver := uniq(t, "gold"), uniq(t, "silver")
	// The apiserver (v1.37) does not require the classes to exist (a claim naming a missing one
	// waits in Pending), but a cluster using them has them.
	for name, iops := range map[string]string{gold: "5000", silver: "1000"} {
		vac := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: name}, DriverName: csiDriver, Parameters: map[string]string{"iops": iops}}
		harness.Must(t, a.Create(ctx, vac), "creating VolumeAttributesClass "+name)
		t.Cleanup(func() { _ = a.Delete(context.Background(), vac) })
	}
	volume := func(t *testing.T, vac string) string {
		t.Helper()
		name := uniq(t, "pv")
		pv := harness.FreshPV(testobj.PV(name, testobj.CSI(csiDriver, "h-"+name, nil)))
		pv.Spec.VolumeAttributesClassName = &vac
		harness.Must(t, a.Create(ctx, pv), "creating volume "+name+" of "+vac)
		return name
	}
	claim := func(name, vac, pv string) *corev1.PersistentVolumeClaim {
		pvc := harness.FreshPVC(testobj.PVC(ns, name, testobj.VolumeName(pv)))
		pvc.Spec.VolumeAttributesClassName = &vac
		return pvc
	}

	t.Run("gold claim pre-bound to a silver volume", func(t *testing.T) {
		pv := volume(t, silver)
		expectRefused(t, createPVC(a, claim("mismatch", gold, pv)), "PVG018")
	})
	t.Run("gold claim pre-bound to a gold volume", func(t *testing.T) {
		pv := volume(t, gold)
		a.warnings.Take()
		harness.Must(t, a.Create(ctx, claim("match", gold, pv)), "creating the claim")
		if ws := a.warnings.Take(); hasWarning(ws, "PVG018") {
			t.Errorf("a PVG018 warning for matching classes: %q", ws)
		}
	})
}

// 9. The legitimate upstream flows on a bound pair's volume pass without warnings: the PV
// controller's unbind of a volume whose claim is bound elsewhere, and an admin's reuse of a
// Released Retain volume whose claim was deleted.
func TestInvariantUpstreamUnbindAndReuseQuiet(t *testing.T) {
	ctx := context.Background()

	for _, tc := range []struct {
		name              string
		boundByController bool
	}{
		{"PV controller unbind of a volume it bound clears claimRef", true},
		{"PV controller unbind of a volume a user pre-bound drops the uid", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := harness.PrefixedNamespace(t, admin(t), "unbind")
			// The claim ended up bound to another volume while this one was linked to it.
			_, pvc := boundPair(t, ns, "data")
			pvName := uniq(t, "pv-stale")
			mods := []testobj.PVMod{testobj.ClaimRef(ns, "data", string(pvc.UID)), testobj.Phase(corev1.VolumeBound)}
			if tc.boundByController {
				mods = append(mods, testobj.PVMeta(testobj.Annotation(annBoundByController, "yes")))
			}
			pv := testobj.PV(pvName, mods...)
			status := pv.Status
			s := seeder(t)
			harness.Must(t, s.Create(ctx, harness.FreshPV(pv)), "seeding the stale link")
			pv.Status = status
			harness.Must(t, s.Status().Update(ctx, pv), "seeding the stale link's phase")

			b := binder(t)
			expectQuiet(t, b, replacePV(b, pvName, func(v *corev1.PersistentVolume) {
				// unbindVolume: clear what it bound itself, drop only the uid of a user's pre-binding.
				if _, ok := v.Annotations[annBoundByController]; ok {
					v.Spec.ClaimRef = nil
					delete(v.Annotations, annBoundByController)
				} else {
					v.Spec.ClaimRef.UID = ""
				}
			}), "the PV controller unbinding the volume")
			expectQuiet(t, b, replacePVStatus(b, pvName, corev1.VolumeAvailable), "the PV controller making the volume Available")
			ref := harness.GetPV(t, admin(t), pvName).Spec.ClaimRef
			if tc.boundByController != (ref == nil) {
				t.Fatalf("claimRef after the unbind: %+v", ref)
			}
		})
	}

	ops := storageAdmin(t)
	for _, tc := range []struct {
		name  string
		reuse func(pv string) write
	}{
		{"admin reuse of a Released Retain volume clearing claimRef", func(pv string) write {
			return rawPatchPV(ops, pv, types.MergePatchType, `{"spec":{"claimRef":null}}`)
		}},
		{"admin reuse of a Released Retain volume dropping the uid", func(pv string) write {
			return rawPatchPV(ops, pv, types.JSONPatchType, `[{"op":"remove","path":"/spec/claimRef/uid"}]`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := harness.PrefixedNamespace(t, admin(t), "reuse")
			pv, _ := boundPair(t, ns, "data", testobj.Reclaim(corev1.PersistentVolumeReclaimRetain))
			harness.DeleteClaim(t, admin(t), kubeSystemSA(t, "pvc-protection-controller"), ns, "data")
			markReleased(t, pv)
			expectQuiet(t, ops, tc.reuse(pv), "reusing the Released volume")
			b := binder(t)
			expectQuiet(t, b, replacePVStatus(b, pv, corev1.VolumeAvailable), "the PV controller making the volume Available")
		})
	}
}
