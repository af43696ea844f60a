package e2ecluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/cluster"
	"github.com/pvguard/pvguard/test/harness"
)

// person is the user the outage tests act as for a person's writes (kubectl under one's own
// name): not a ServiceAccount, not a control-plane component, so the people's webhooks
// (webhook.failurePolicy, Fail) judge their writes.
const person = "pat@example.com"

// TestComponentsProceedWithPVGuardDown stops pvguard (every replica: this cluster runs one) with
// its webhooks still registered, pointing at a port nothing listens on, and the chart's admission
// policies installed, in ModeUpstream (kube-controller-manager binds). It runs the same storage
// flow twice, first with pvguard up (the anchor) and then down, each write of it a component's:
// a deployer ServiceAccount (as a GitOps controller or an operator) creates the objects, the
// real kube-controller-manager, kube-scheduler, external-provisioner and external-resizer do the
// rest:
//
//   - a static claim binds to a static volume;
//   - a WaitForFirstConsumer claim is provisioned and bound when its pod is scheduled;
//   - that claim is expanded;
//   - the claim and its pod are deleted and the provisioned volume with them, nothing left
//     Terminating.
//
// With pvguard down each step must take about what it took with pvguard up (the apiserver fails
// a call to a closed port at once, and the components' webhooks fail open), and no component may
// be refused a write. A tenant's ServiceAccount is no component: its claim is refused for want
// of the webhook, the same claim from the deployer admitted. Meanwhile, as a person: clearing
// the claimRef of the Bound static volume is refused by the admission policy ("[PVG002"),
// Retain->Delete without confirmation too ("[PVG011"), as are dropping the claim's
// bind-completed annotation ("[PVG003") and its pvc-protection finalizer ("[PVG012"); and a
// claim naming the Bound volume, which only pvguard judges (PVG004), is refused because the
// people's webhooks fail closed. A component's claim
// naming the Bound volume is admitted (what failing open costs); once pvguard is started
// again, its audit reports that claim under PVG004 and nothing else in the namespace.
func TestComponentsProceedWithPVGuardDown(t *testing.T) {
	if err := cl.Use(cluster.ModeUpstream); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cl.PVGuard() == nil {
			if err := cl.StartPVGuard(); err != nil {
				t.Errorf("starting pvguard again: %v", err)
			}
		}
	})
	ctx := context.Background()
	f := newCSIFlow(t, "outage", cluster.ModeUpstream)
	ns := f.ns
	wffc := ns + "-wffc"
	csiClass(t, wffc, storagev1.VolumeBindingWaitForFirstConsumer)
	deployer := deployerClient(t, ns)
	pat := personClient(t)
	app := tenantAppClient(t, ns)

	up := runOutageFlow(t, f, deployer, wffc, "up")

	logs := map[string]int64{}
	for _, l := range componentLogsWithoutPVGuard() {
		logs[l] = logSize(t, l)
	}
	if err := cl.StopPVGuard(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	t.Logf("pvguard stopped; its webhooks still point at it")

	// A component's write with nothing listening: the apiserver's call fails at once.
	start := time.Now()
	if err := devcluster.PatchPVC(ctx, deployer, ns, "static-up", func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Labels = map[string]string{"outage.pvguard.io/touched": "yes"}
	}); err != nil {
		t.Fatalf("with pvguard down, a component's claim update: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("with pvguard down, a component's claim update took %v: the apiserver waited for the webhook", d)
	} else {
		t.Logf("down: a component's claim update admitted in %v", d.Round(time.Millisecond))
	}

	downTimes := runOutageFlow(t, f, deployer, wffc, "down")
	for _, s := range outageSteps {
		u, d := up[s], downTimes[s]
		t.Logf("%-60s up %6v  down %6v", s, u.Round(10*time.Millisecond), d.Round(10*time.Millisecond))
		// A write of the step's that waited out a timeout costs 2 s; several do in each step.
		if limit := 2*u + 3*time.Second; d > limit {
			t.Errorf("with pvguard down, %s took %v, with it up %v (limit %v)", s, d, u, limit)
		}
	}

	// The guards that hold without pvguard, for a person.
	staticPV := harness.GetPVC(t, cl.Client, ns, "static-down").Spec.VolumeName
	refusedByPolicy := func(what, rule string, write func(context.Context) error) {
		t.Helper()
		start := time.Now()
		err := write(ctx)
		d := time.Since(start)
		switch {
		case err == nil:
			t.Errorf("with pvguard down, a person's %s was admitted, want it refused by %s's admission policy", what, rule)
		case !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") || !strings.Contains(err.Error(), "denied request: ["+rule+" "):
			t.Errorf("with pvguard down, a person's %s: %v, want a denial by the admission policy starting [%s", what, err, rule)
		default:
			t.Logf("down: a person's %s refused by the admission policy in %v: %v", what, d.Round(time.Millisecond), err)
		}
	}
	refusedByPolicy("clearing the claimRef of the Bound volume", "PVG002", func(ctx context.Context) error {
		return devcluster.PatchPV(ctx, pat, staticPV, func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef = nil })
	})
	refusedByPolicy("Retain->Delete without confirmation", "PVG011", func(ctx context.Context) error {
		return devcluster.PatchPV(ctx, pat, staticPV, func(pv *corev1.PersistentVolume) {
			pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
		})
	})
	refusedByPolicy("removal of the Bound claim's bind-completed annotation", "PVG003", func(ctx context.Context) error {
		return devcluster.PatchPVC(ctx, pat, ns, "static-down", func(pvc *corev1.PersistentVolumeClaim) {
			delete(pvc.Annotations, "pv.kubernetes.io/bind-completed")
		})
	})
	refusedByPolicy("removal of the Bound claim's pvc-protection finalizer", "PVG012", func(ctx context.Context) error {
		return devcluster.PatchPVC(ctx, pat, ns, "static-down", func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Finalizers = nil
		})
	})
	// What only pvguard judges: for a person, the webhooks fail closed.
	grab := claim(ns, "grab", ns+"-static", "10Mi")
	grab.Spec.VolumeName = staticPV
	start = time.Now()
	err := pat.Create(ctx, grab.DeepCopy())
	switch {
	case err == nil:
		t.Errorf("with pvguard down, a person's claim naming the Bound volume %s was admitted", staticPV)
	case !harness.WebhookUnreachable(err):
		t.Errorf("with pvguard down, a person's claim naming the Bound volume: %v, want it refused for want of pvguard's webhook", err)
	default:
		t.Logf("down: a person's claim naming the Bound volume refused in %v: %v", time.Since(start).Round(time.Millisecond), err)
	}
	// A component's, for which the webhooks fail open, is admitted: the audit must catch it.
	if err := deployer.Create(ctx, grab.DeepCopy()); err != nil {
		t.Fatalf("with pvguard down, a component's claim naming the Bound volume: %v, want it admitted (componentsFailurePolicy Ignore)", err)
	}
	// A tenant's ServiceAccount is not a component: its writes go to the people's webhooks,
	// which fail closed, so a tenant cannot make its own writes pass unjudged by taking pvguard
	// down (or by flooding it). The same claim from a component proceeds. The claim names a
	// class nothing serves and selects no volume: nothing binds or provisions it.
	plain := claim(ns, "tenant-app", "outage-nothing", "10Mi")
	plain.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"outage.pvguard.io/none": "none"}}
	start = time.Now()
	err = app.Create(ctx, plain.DeepCopy())
	switch {
	case err == nil:
		t.Errorf("with pvguard down, a tenant ServiceAccount's claim was admitted: it went to the components' webhooks, which fail open")
	case !harness.WebhookUnreachable(err):
		t.Errorf("with pvguard down, a tenant ServiceAccount's claim: %v, want it refused for want of pvguard's webhook", err)
	default:
		t.Logf("down: a tenant ServiceAccount's claim refused in %v: %v", time.Since(start).Round(time.Millisecond), err)
	}
	plain.Name = "component-app"
	if err := deployer.Create(ctx, plain.DeepCopy()); err != nil {
		t.Errorf("with pvguard down, a component's claim: %v, want it admitted (componentsFailurePolicy Ignore)", err)
	} else if err := deployer.Delete(ctx, plain); err != nil {
		t.Errorf("deleting the component's claim: %v", err)
	}
	checkNoComponentRefused(t, logs)
	for _, s := range []struct{ pv, claim string }{{harness.GetPVC(t, cl.Client, ns, "static-up").Spec.VolumeName, "static-up"}, {staticPV, "static-down"}} {
		if pv := harness.GetPV(t, cl.Client, s.pv); pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != s.claim || pv.Status.Phase != corev1.VolumeBound ||
			pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
			t.Errorf("volume %s changed during the outage: claimRef %+v, phase %s, reclaim %s", s.pv, pv.Spec.ClaimRef, pv.Status.Phase, pv.Spec.PersistentVolumeReclaimPolicy)
		}
	}

	restart := time.Now()
	if err := cl.StartPVGuard(); err != nil {
		t.Fatal(err)
	}
	t.Logf("pvguard started again after an outage of %v; answering %v after its start", restart.Sub(down).Round(time.Millisecond), time.Since(restart).Round(time.Millisecond))
	var found []audit.Finding
	var objects int
	harness.WaitFor(t, time.Minute, "pvguard's audit to report the claim admitted during the outage under PVG004", func(ctx context.Context) (bool, error) {
		r, err := harness.FetchReport(ctx, cl.PVGuard().HTTPClient(), cl.PVGuard().BaseURL)
		if err != nil {
			return false, err
		}
		objects, found = r.Summary.Objects, found[:0]
		ok := false
		for _, fd := range r.Findings {
			if fd.Namespace != ns && !(fd.Kind == "PersistentVolume" && strings.HasPrefix(fd.Object, ns)) {
				continue
			}
			found = append(found, fd)
			ok = ok || fd.Kind == "PersistentVolumeClaim" && fd.Object == "grab" && fd.Rule == "PVG004"
		}
		return ok, nil
	})
	for _, fd := range found {
		t.Logf("audit after the outage (%d objects): %s %s %s/%s: %s", objects, fd.Rule, fd.Kind, fd.Namespace, fd.Object, fd.Message)
		if fd.Object != "grab" {
			t.Errorf("the audit after the outage reports %s on %s %s, which the outage's flow made: want findings only on the claim admitted unchecked", fd.Rule, fd.Kind, fd.Object)
		}
	}
	// With pvguard back, the person's misbinding is refused by policy again.
	grab.Name = "grab-after"
	if err := pat.Create(ctx, grab); err == nil || !strings.Contains(err.Error(), "[PVG004 ") {
		t.Errorf("with pvguard back, a person's claim naming the Bound volume: %v, want a PVG004 denial", err)
	}
}

// outageSteps are the steps of runOutageFlow, in order.
var outageSteps = []string{
	"static claim created -> Bound to its static volume",
	"pod created -> scheduled, its claim provisioned and Bound",
	"claim expanded (volume and claim at 20Mi)",
	"pod and claim deleted -> provisioned volume gone",
}

// runOutageFlow runs the flow of TestComponentsProceedWithPVGuardDown, its writes made by
// deployer, its objects' names suffixed with tag, and returns each step's duration.
func runOutageFlow(t *testing.T, f *csiFlow, deployer client.Client, wffc, tag string) map[string]time.Duration {
	t.Helper()
	ctx := context.Background()
	ns := f.ns
	out := map[string]time.Duration{}
	const limit = time.Minute

	// A static volume, as a static provisioner makes it, and, once kube-controller-manager has
	// made it Available (a claim it has not seen the volume for would wait for its next
	// resync, 15 s), a claim of its class.
	pvName := ns + "-static-" + tag
	f.volumes = append(f.volumes, pvName)
	if err := deployer.Create(ctx, csiPV(pvName, ns+"-static", cl.Nodes[0], "10Mi")); err != nil {
		t.Fatalf("%s: creating static volume %s: %v", tag, pvName, err)
	}
	harness.WaitFor(t, limit, tag+": volume "+pvName+" Available", func(ctx context.Context) (bool, error) {
		pv := &corev1.PersistentVolume{}
		err := cl.Client.Get(ctx, client.ObjectKey{Name: pvName}, pv)
		return err == nil && pv.Status.Phase == corev1.VolumeAvailable, err
	})
	start := time.Now()
	if err := deployer.Create(ctx, claim(ns, "static-"+tag, ns+"-static", "10Mi")); err != nil {
		t.Fatalf("%s: creating static claim: %v", tag, err)
	}
	harness.WaitFor(t, limit, tag+": claim static-"+tag+" Bound to "+pvName, func(ctx context.Context) (bool, error) {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "static-" + tag}, pvc); err != nil {
			return false, err
		}
		return pvc.Status.Phase == corev1.ClaimBound, nil
	})
	out[outageSteps[0]] = time.Since(start)
	if pv := expectBoundPair(t, harness.GetPVC(t, cl.Client, ns, "static-"+tag)); pv != nil && pv.Name != pvName {
		t.Errorf("%s: static claim bound to %s, want %s", tag, pv.Name, pvName)
	}

	// A WaitForFirstConsumer claim, then its pod once the binder has seen the claim (so the
	// scheduler's informer has it too; see createClaims).
	name := "app-" + tag
	if err := deployer.Create(ctx, claim(ns, name, wffc, "10Mi")); err != nil {
		t.Fatalf("%s: creating claim %s: %v", tag, name, err)
	}
	harness.WaitFor(t, limit, tag+": the binder's event on claim "+name, func(ctx context.Context) (bool, error) {
		var list corev1.EventList
		if err := cl.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "PersistentVolumeClaim" && e.InvolvedObject.Name == name {
				return true, nil
			}
		}
		return false, nil
	})
	time.Sleep(500 * time.Millisecond)
	start = time.Now()
	if err := deployer.Create(ctx, pod(ns, name, name)); err != nil {
		t.Fatalf("%s: creating pod %s: %v", tag, name, err)
	}
	harness.WaitFor(t, limit, tag+": pod "+name+" scheduled and its claim Bound", func(ctx context.Context) (bool, error) {
		p, pvc := &corev1.Pod{}, &corev1.PersistentVolumeClaim{}
		if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
			return false, err
		}
		if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pvc); err != nil {
			return false, err
		}
		return p.Spec.NodeName != "" && pvc.Status.Phase == corev1.ClaimBound, nil
	})
	out[outageSteps[1]] = time.Since(start)
	provisioned := provisionedPair(t, newEndState(), ns, name)
	if provisioned == nil {
		t.FailNow()
	}
	f.volumes = append(f.volumes, provisioned.Name)

	start = time.Now()
	if err := devcluster.PatchPVC(ctx, deployer, ns, name, func(c *corev1.PersistentVolumeClaim) {
		c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("20Mi")
	}); err != nil {
		t.Fatalf("%s: raising claim %s's request: %v", tag, name, err)
	}
	want := resource.MustParse("20Mi")
	harness.WaitFor(t, limit, tag+": claim "+name+" and its volume grown to 20Mi", func(ctx context.Context) (bool, error) {
		pvc, pv := &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolume{}
		if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pvc); err != nil {
			return false, err
		}
		if err := cl.Client.Get(ctx, client.ObjectKey{Name: provisioned.Name}, pv); err != nil {
			return false, err
		}
		return pv.Spec.Capacity.Storage().Cmp(want) == 0 && pvc.Status.Capacity.Storage().Cmp(want) == 0, nil
	})
	out[outageSteps[2]] = time.Since(start)

	start = time.Now()
	if err := deployer.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, client.GracePeriodSeconds(0)); err != nil {
		t.Fatalf("%s: deleting pod %s: %v", tag, name, err)
	}
	if err := deployer.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatalf("%s: deleting claim %s: %v", tag, name, err)
	}
	harness.WaitFor(t, limit, tag+": claim "+name+" and its provisioned volume "+provisioned.Name+" gone", func(ctx context.Context) (bool, error) {
		errPVC := cl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.PersistentVolumeClaim{})
		errPV := cl.Client.Get(ctx, client.ObjectKey{Name: provisioned.Name}, &corev1.PersistentVolume{})
		if !apierrors.IsNotFound(errPVC) || !apierrors.IsNotFound(errPV) {
			return false, fmt.Errorf("claim: %v; volume: %v", errPVC, errPV)
		}
		return true, nil
	})
	out[outageSteps[3]] = time.Since(start)
	checkNothingTerminating(t, ns)
	f.noLeak()
	return out
}

// checkNothingTerminating fails when a claim of ns or any volume is being deleted.
func checkNothingTerminating(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	var claims corev1.PersistentVolumeClaimList
	var pvs corev1.PersistentVolumeList
	if err := cl.Client.List(ctx, &claims, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if err := cl.Client.List(ctx, &pvs); err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		if c.DeletionTimestamp != nil {
			t.Errorf("claim %s/%s left Terminating (finalizers %v)", c.Namespace, c.Name, c.Finalizers)
		}
	}
	for _, pv := range pvs.Items {
		if pv.DeletionTimestamp != nil {
			t.Errorf("volume %s left Terminating (finalizers %v)", pv.Name, pv.Finalizers)
		}
	}
}

// componentLogsWithoutPVGuard are the logs of the components that write to the API, pvguard's
// aside (it is what is down).
func componentLogsWithoutPVGuard() []string {
	logs := []string{cl.ControllerManagerLog(), cl.SchedulerLog()}
	for _, s := range cl.CSI.Sidecars() {
		logs = append(logs, s.LogPath)
	}
	return logs
}

// checkNoComponentRefused fails when a component's log says, after the offsets in from, that
// one of its writes was refused or warned about, or failed for want of pvguard's webhook.
func checkNoComponentRefused(t *testing.T, from map[string]int64) {
	t.Helper()
	for l, off := range from {
		data, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(string(data[off:]), "\n") {
			if strings.Contains(line, "failed calling webhook") || strings.Contains(line, "denied the request") ||
				strings.Contains(line, "denied request") || strings.Contains(line, "warnings.go:") && strings.Contains(line, "Warning: ") {
				t.Errorf("%s: a component's write was refused or warned about while pvguard was down:\n%s", l, line)
			}
		}
	}
}

// The deployer: a ServiceAccount of its own namespace that the suite's install lists among the
// components (cluster.Options.Components), as an installer lists a GitOps controller or an
// operator that writes volumes and claims.
const (
	deployerNamespace = "gitops"
	deployerAccount   = "deployer"
)

// deployerClient is the deployer, allowed to create, update and delete volumes, claims and pods
// in ns (and any namespace): a component, for which pvguard's components' webhooks
// (webhook.componentsFailurePolicy, Ignore) judge every write.
func deployerClient(t *testing.T, ns string) client.Client {
	t.Helper()
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	return serviceAccountClient(t, deployerNamespace, deployerAccount, "outage-deployer-"+ns, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumes", "persistentvolumeclaims", "pods"}, Verbs: all},
	})
}

// tenantAppClient is a ServiceAccount "app" of the tenant namespace ns that may create, read,
// update and delete the claims of ns (a Role): a tenant's workload, not a component, for which
// pvguard's people's webhooks (webhook.failurePolicy, Fail) judge every write.
func tenantAppClient(t *testing.T, ns string) client.Client {
	t.Helper()
	ctx := context.Background()
	cfg, err := cl.ServiceAccountConfig(ctx, ns, "app")
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-claims"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-claims"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "app"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}}
	create(t, role, binding)
	c, err := devcluster.NewClient(cfg, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, time.Minute, "the tenant's RBAC in effect", func(ctx context.Context) (bool, error) {
		err := c.List(ctx, &corev1.PersistentVolumeClaimList{}, client.InNamespace(ns), client.Limit(1))
		return err == nil, err
	})
	return c
}

// serviceAccountClient creates the ServiceAccount namespace/name, grants it rules through a
// ClusterRole called role (removed when the test ends) and returns a client acting as it once
// its RBAC is in effect.
func serviceAccountClient(t *testing.T, namespace, name, role string, rules []rbacv1.PolicyRule) client.Client {
	t.Helper()
	cfg, err := cl.ServiceAccountConfig(context.Background(), namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	bindClusterRole(t, role, rbacv1.Subject{Kind: "ServiceAccount", Namespace: namespace, Name: name}, rules)
	c, err := devcluster.NewClient(cfg, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, time.Minute, "the RBAC of "+namespace+"/"+name+" in effect", func(ctx context.Context) (bool, error) {
		err := c.List(ctx, &corev1.PersistentVolumeClaimList{}, client.Limit(1))
		return err == nil, err
	})
	return c
}

// personClient acts as person (impersonated by the admin), who may read, create and update
// volumes and claims everywhere, as a storage administrator may.
func personClient(t *testing.T) client.Client {
	t.Helper()
	bindClusterRole(t, "outage-person", rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: person}, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumes", "persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
	})
	c, err := devcluster.NewClient(cl.Admin, &devcluster.Warnings{}, person)
	if err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, time.Minute, "the person's RBAC in effect", func(ctx context.Context) (bool, error) {
		err := c.List(ctx, &corev1.PersistentVolumeList{}, client.Limit(1))
		return err == nil, err
	})
	return c
}

// bindClusterRole creates a ClusterRole with rules and binds it to subject, both removed when
// the test ends.
func bindClusterRole(t *testing.T, name string, subject rbacv1.Subject, rules []rbacv1.PolicyRule) {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: []rbacv1.Subject{subject},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}}
	create(t, role, binding)
	t.Cleanup(func() {
		_ = cl.Client.Delete(context.Background(), binding)
		_ = cl.Client.Delete(context.Background(), role)
	})
}
