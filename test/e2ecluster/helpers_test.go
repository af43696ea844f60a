package e2ecluster

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/test/cluster"
	"github.com/pvguard/pvguard/test/csisidecars"
	"github.com/pvguard/pvguard/test/harness"
)

// --- modes ---

// endState is what a flow asserts about its end, in a form both modes must agree on: counts of
// facts (no names that differ between runs) and the set of event reasons.
type endState struct {
	facts   map[string]int
	reasons map[string]bool
}

func newEndState() *endState { return &endState{facts: map[string]int{}, reasons: map[string]bool{}} }

func (s *endState) add(fact string, n int) { s.facts[fact] += n }

func (s *endState) String() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(s.facts)) {
		fmt.Fprintf(&b, "  %s: %d\n", k, s.facts[k])
	}
	fmt.Fprintf(&b, "  event reasons: %s\n", strings.Join(slices.Sorted(maps.Keys(s.reasons)), ", "))
	return b.String()
}

// equivalentReasons are event reasons that differ between the binders by design, documented in
// docs/binder.md: upstream says WaitForPodScheduled instead of WaitForFirstConsumer when it finds
// an unscheduled pod using the claim; pvguard does not watch pods and always says
// WaitForFirstConsumer.
var equivalentReasons = map[string]string{
	"PersistentVolumeClaim/WaitForPodScheduled": "PersistentVolumeClaim/WaitForFirstConsumer",
}

// forEachMode runs flow in both modes, the cluster's current mode first (one switch per test),
// and checks that both end in the same state.
func forEachMode(t *testing.T, flow func(t *testing.T, m cluster.Mode) *endState) {
	t.Helper()
	modes := slices.Clone(cluster.Modes)
	if cl.Mode() == cluster.ModeUpstream {
		slices.Reverse(modes)
	}
	states := map[cluster.Mode]*endState{}
	for _, m := range modes {
		ok := t.Run(string(m), func(t *testing.T) {
			if err := cl.Use(m); err != nil {
				t.Fatal(err)
			}
			s := flow(t, m)
			if s != nil {
				t.Logf("end state (%s):\n%s", m, s)
				states[m] = s
			}
			if err := cl.Alive(); err != nil {
				t.Error(err)
			}
		})
		if !ok {
			t.Errorf("mode %s failed; %s", m, cl.Logs())
		}
	}
	p, u := states[cluster.ModePVGuard], states[cluster.ModeUpstream]
	if p == nil || u == nil {
		return
	}
	if !maps.Equal(p.facts, u.facts) {
		t.Errorf("the modes end in different states:\npvguard:\n%supstream:\n%s", p, u)
	}
	norm := func(r map[string]bool) []string {
		out := map[string]bool{}
		for k := range r {
			if e, ok := equivalentReasons[k]; ok {
				k = e
			}
			out[k] = true
		}
		return slices.Sorted(maps.Keys(out))
	}
	if pr, ur := norm(p.reasons), norm(u.reasons); !slices.Equal(pr, ur) {
		t.Errorf("the modes record different event reasons:\npvguard:  %v\nupstream: %v", pr, ur)
	}
}

// --- objects ---

// flow is one flow's run in one mode: its namespace and the volumes it made. At the end the
// namespace is deleted and the namespace controller must remove it and everything in it, then
// the volumes are deleted and the pv-protection controller must let each go: nothing is left
// Terminating.
type flow struct {
	t       *testing.T
	ns      string
	volumes []string
}

func newFlow(t *testing.T, name string, m cluster.Mode) *flow {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: harness.PrefixedNamespace(t, cl.Client, name+"-"+string(m))}}
	f := &flow{t: t, ns: ns.Name}
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("PVGUARD_CLUSTER_KEEP_OBJECTS") != "" {
			t.Logf("PVGUARD_CLUSTER_KEEP_OBJECTS: namespace %s and volumes %v left in place", ns.Name, f.volumes)
			return
		}
		ctx := context.Background()
		if err := cl.Client.Delete(ctx, ns); err != nil {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
			return
		}
		harness.WaitFor(t, time.Minute, "namespace "+ns.Name+" and everything in it deleted", func(ctx context.Context) (bool, error) {
			err := cl.Client.Get(ctx, client.ObjectKeyFromObject(ns), ns)
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
		for _, name := range f.volumes {
			pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
			if err := cl.Client.Delete(ctx, pv); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting volume %s: %v", name, err)
			}
		}
		for _, name := range f.volumes {
			harness.WaitFor(t, time.Minute, "volume "+name+" deleted (pv-protection finalizer removed)", func(ctx context.Context) (bool, error) {
				err := cl.Client.Get(ctx, client.ObjectKey{Name: name}, &corev1.PersistentVolume{})
				return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
			})
		}
	})
	return f
}

// localClass creates a class for local static volumes, as the local static provisioner's docs
// configure one: no provisioner, WaitForFirstConsumer.
func localClass(t *testing.T, name string) {
	t.Helper()
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wffc}
	if err := cl.Client.Create(context.Background(), sc); err != nil {
		t.Fatalf("creating class %s: %v", name, err)
	}
	t.Cleanup(func() { _ = cl.Client.Delete(context.Background(), sc) })
}

// localPV is a local volume on one node, as an administrator (or the local static provisioner)
// creates it.
func localPV(name, class, node, size string, reclaim corev1.PersistentVolumeReclaimPolicy) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              class,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disks/" + name}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
}

// createPVs creates volumes (deleted at the flow's end) and waits until the mode's binder has
// made each free one Available: the scheduler considers no other volume.
func (f *flow) createPVs(pvs ...*corev1.PersistentVolume) {
	t := f.t
	t.Helper()
	ctx := context.Background()
	for _, pv := range pvs {
		if err := cl.Client.Create(ctx, pv); err != nil {
			t.Fatalf("creating volume %s: %v", pv.Name, err)
		}
		f.volumes = append(f.volumes, pv.Name)
	}
	for _, pv := range pvs {
		if pv.Spec.ClaimRef != nil {
			continue
		}
		harness.WaitFor(t, time.Minute, "volume "+pv.Name+" Available", func(ctx context.Context) (bool, error) {
			got := &corev1.PersistentVolume{}
			err := cl.Client.Get(ctx, client.ObjectKeyFromObject(pv), got)
			return err == nil && got.Status.Phase == corev1.VolumeAvailable, err
		})
	}
}

func claim(ns, name, class, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
}

// pod is a pod using the claims; no kubelet runs, so it is only ever scheduled.
func pod(ns, name string, claims ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	for i, c := range claims {
		v := fmt.Sprintf("data%d", i)
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: v, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: v, MountPath: "/" + v})
	}
	return p
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := cl.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// deletePods deletes pods at once (no kubelet confirms a graceful deletion).
func deletePods(t *testing.T, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		if err := cl.DeletePod(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
}

// --- reading the cluster ---

func getPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	if err := cl.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		t.Fatalf("reading pod %s/%s: %v", ns, name, err)
	}
	return p
}

// volumeNode is the one node a volume's affinity names: by kubernetes.io/hostname (local
// volumes) or by the CSI plugin's topology key, whose value is the node's name.
func volumeNode(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if (e.Key == corev1.LabelHostname || cl.CSI != nil && e.Key == cl.CSI.TopologyKey()) && len(e.Values) == 1 {
				return e.Values[0]
			}
		}
	}
	return ""
}

// claimRefWriters are the field managers that own a volume's spec.claimRef (server-side field
// tracking records who last changed a field): kube-scheduler when the scheduler chose the
// volume, pvguard (the test binary) or kube-controller-manager when a binder did.
func claimRefWriters(pv *corev1.PersistentVolume) []string {
	var out []string
	for _, mf := range pv.ManagedFields {
		if mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"f:claimRef"`) {
			out = append(out, mf.Manager)
		}
	}
	sort.Strings(out)
	return out
}

// expectBoundPair checks that a claim and its volume are bound to each other, both ways, and
// returns the volume.
func expectBoundPair(t *testing.T, pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	t.Helper()
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		t.Errorf("claim %s/%s: phase %q volume %q, want Bound", pvc.Namespace, pvc.Name, pvc.Status.Phase, pvc.Spec.VolumeName)
		return nil
	}
	if pvc.Annotations["pv.kubernetes.io/bind-completed"] != "yes" {
		t.Errorf("claim %s/%s is Bound without bind-completed", pvc.Namespace, pvc.Name)
	}
	pv := harness.GetPV(t, cl.Client, pvc.Spec.VolumeName)
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.Namespace != pvc.Namespace || ref.Name != pvc.Name || ref.UID != pvc.UID || pv.Status.Phase != corev1.VolumeBound {
		t.Errorf("volume %s of claim %s/%s: claimRef %+v phase %q, want the claim with its uid and Bound", pv.Name, pvc.Namespace, pvc.Name, ref, pv.Status.Phase)
	}
	return pv
}

// kindReasons are the reasons of the events recorded on the namespace's objects and on the
// named volumes (whose events go to the default namespace), as "Kind/Reason".
func kindReasons(t *testing.T, ns string, volumes []string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	ctx := context.Background()
	var list corev1.EventList
	if err := cl.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing events: %v", err)
	}
	for _, e := range list.Items {
		out[e.InvolvedObject.Kind+"/"+e.Reason] = true
	}
	if err := cl.Client.List(ctx, &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		t.Fatalf("listing events: %v", err)
	}
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "PersistentVolume" && slices.Contains(volumes, e.InvolvedObject.Name) {
			out[e.InvolvedObject.Kind+"/"+e.Reason] = true
		}
	}
	return out
}

// --- latency ---

// boundWatch records when each claim of a namespace is first seen Bound.
type boundWatch struct {
	mu    sync.Mutex
	bound map[string]time.Time
	stop  func()
}

func watchBound(t *testing.T, ns string) *boundWatch {
	t.Helper()
	w, err := cl.Clientset.CoreV1().PersistentVolumeClaims(ns).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watching claims: %v", err)
	}
	bw := &boundWatch{bound: map[string]time.Time{}, stop: w.Stop}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			pvc, ok := ev.Object.(*corev1.PersistentVolumeClaim)
			if !ok || pvc.Status.Phase != corev1.ClaimBound {
				continue
			}
			bw.mu.Lock()
			if _, seen := bw.bound[pvc.Name]; !seen {
				bw.bound[pvc.Name] = time.Now()
			}
			bw.mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return bw
}

func (bw *boundWatch) at(name string) (time.Time, bool) {
	bw.mu.Lock()
	defer bw.mu.Unlock()
	at, ok := bw.bound[name]
	return at, ok
}

// quantile is the q-quantile of durations (nearest rank).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// --- pvguard's view ---

// pvguardCounters are what a flow reads from pvguard before and after: its binder's lost writes
// (409s), binds and errors, and every admission finding.
type pvguardCounters struct {
	conflicts int
	metrics   map[string]float64
	// logs are the components' log sizes, to scan what a flow adds to them.
	logs map[string]int64
}

// componentLogs are the logs of the components that write to the API: pvguard's own binder
// logs a refused write's error too.
func componentLogs() []string {
	logs := []string{cl.ControllerManagerLog(), cl.SchedulerLog(), cl.PVGuard().Log}
	if cl.CSI != nil {
		for _, s := range cl.CSI.Sidecars() {
			logs = append(logs, s.LogPath)
		}
	}
	return logs
}

func readCounters(t *testing.T) pvguardCounters {
	t.Helper()
	p := cl.PVGuard()
	m, err := p.Metrics("pvguard_binder_binds_total", "pvguard_binder_errors_total", "pvguard_admission_findings_total", "pvguard_admission_reviews_total",
		"pvguard_binder_shadow_disagreements_total")
	if err != nil {
		t.Fatal(err)
	}
	logs := map[string]int64{}
	for _, l := range componentLogs() {
		logs[l] = logSize(t, l)
	}
	return pvguardCounters{conflicts: p.Conflicts(), metrics: m, logs: logs}
}

// since returns the counters' changes, non-zero ones only.
func (c pvguardCounters) since(before pvguardCounters) (conflicts int, deltas map[string]float64) {
	deltas = map[string]float64{}
	for k, v := range c.metrics {
		if d := v - before.metrics[k]; d != 0 {
			deltas[k] = d
		}
	}
	return c.conflicts - before.conflicts, deltas
}

// checkAdmission fails when a component was refused a write (or warned) during the flow: every
// write in these flows is a real component's, or an ordinary user's, and must pass. It logs what
// pvguard counted.
//
// pvguard's own counters cannot say that: kube-apiserver runs an update's admission first
// against the object in its watch cache, and when that fails (a webhook's denial included) it
// reads the object from etcd and runs the update again (etcd3 store, GuaranteedUpdate: "it's
// possible we were working with stale data"). A webhook can thus deny a write judged on a stale
// old object that the apiserver then admits on the current one: the external-provisioner's
// finalizer removal right after its DELETE is seen once without the deletionTimestamp (PVG012)
// and then with it. So a denial pvguard counts is not necessarily a refused write; what the
// component's client received is in its log. (The test's own writes fail on a refusal.)
func checkAdmission(t *testing.T, before, after pvguardCounters) {
	t.Helper()
	conflicts, deltas := after.since(before)
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(deltas)) {
		lines = append(lines, fmt.Sprintf("%s +%g", k, deltas[k]))
		if strings.Contains(k, `decision="error"`) {
			t.Errorf("pvguard could not evaluate a review: %s (%s)", k, cl.Logs())
		}
	}
	t.Logf("pvguard during the flow: %d binder conflicts (409); %s", conflicts, strings.Join(lines, "; "))
	// What the components were told: client-go logs every warning the apiserver relays, and a
	// refused write's error names the webhook that denied it.
	for l, off := range before.logs {
		data, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		if off > int64(len(data)) {
			off = 0
		}
		if found := csisidecars.APIFindings(string(data[off:])); len(found) > 0 {
			t.Errorf("%s was sent warnings or denials during the flow:\n%s", l, strings.Join(found, "\n"))
		}
	}
}

// shape adds the facts both binders must agree on about a bound pair: the annotations and
// finalizers of the claim and of the volume (names only: values may name objects).
func shape(s *endState, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) {
	keys := func(m map[string]string) string { return strings.Join(slices.Sorted(maps.Keys(m)), ",") }
	s.add(fmt.Sprintf("bound claim: annotations [%s] finalizers %v", keys(pvc.Annotations), pvc.Finalizers), 1)
	if pv != nil {
		s.add(fmt.Sprintf("bound volume: annotations [%s] finalizers %v", keys(pv.Annotations), pv.Finalizers), 1)
	}
}

// settleUnused waits until kube-controller-manager v1.37's pvc-protection controller has given
// every Bound claim of the namespace its Unused status condition (False while a pod that is not
// terminated uses the claim, True otherwise), and counts the claims by phase and condition. Both binders write claim status
// too: neither may drop the condition or keep it from settling.
func settleUnused(t *testing.T, s *endState, ns string) {
	t.Helper()
	var claims corev1.PersistentVolumeClaimList
	harness.WaitFor(t, time.Minute, "every claim's Unused condition to settle", func(ctx context.Context) (bool, error) {
		var pl corev1.PodList
		if err := cl.Client.List(ctx, &pl, client.InNamespace(ns)); err != nil {
			return false, err
		}
		if err := cl.Client.List(ctx, &claims, client.InNamespace(ns)); err != nil {
			return false, err
		}
		used := map[string]bool{}
		for _, p := range pl.Items {
			for _, v := range p.Spec.Volumes {
				if v.PersistentVolumeClaim != nil {
					used[v.PersistentVolumeClaim.ClaimName] = true
				}
			}
		}
		for _, c := range claims.Items {
			if c.Status.Phase != corev1.ClaimBound || c.DeletionTimestamp != nil {
				continue // the controller tracks only Bound claims ("to avoid conflict with the PV controller")
			}
			want := corev1.ConditionTrue
			if used[c.Name] {
				want = corev1.ConditionFalse
			}
			if got := unusedCondition(&c); got != want {
				return false, fmt.Errorf("claim %s: Unused %q, want %q", c.Name, got, want)
			}
		}
		return true, nil
	})
	for _, c := range claims.Items {
		s.add(fmt.Sprintf("claim %s with Unused=%s", c.Status.Phase, unusedCondition(&c)), 1)
	}
}

func unusedCondition(c *corev1.PersistentVolumeClaim) corev1.ConditionStatus {
	for _, cond := range c.Status.Conditions {
		if cond.Type == corev1.PersistentVolumeClaimUnused {
			return cond.Status
		}
	}
	return ""
}

// createClaims creates WaitForFirstConsumer claims before their pods and waits until the binder
// has seen each (its WaitForFirstConsumer event) and a little longer, so that the scheduler's
// informer has them too when the pods come: a pod scheduled before its claim reaches the
// scheduler fails once with "persistentvolumeclaim not found" (a FailedScheduling event and a
// retry after a back-off), which would make event reasons and latencies depend on timing.
func createClaims(t *testing.T, claims ...*corev1.PersistentVolumeClaim) {
	t.Helper()
	for _, c := range claims {
		create(t, c)
	}
	for _, c := range claims {
		harness.WaitFor(t, time.Minute, "the binder's event on claim "+c.Name, func(ctx context.Context) (bool, error) {
			var list corev1.EventList
			if err := cl.Client.List(ctx, &list, client.InNamespace(c.Namespace)); err != nil {
				return false, err
			}
			for _, e := range list.Items {
				if e.InvolvedObject.Kind == "PersistentVolumeClaim" && e.InvolvedObject.Name == c.Name {
					return true, nil
				}
			}
			return false, nil
		})
	}
	time.Sleep(500 * time.Millisecond)
}
