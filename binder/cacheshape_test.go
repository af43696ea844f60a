package binder

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

// withDropped gives an object what the cache drops and a cluster's objects carry:
// managedFields, the last-applied annotation and the status fields the binder does not declare.
func withDropped(rng *rand.Rand, obj any) {
	m := obj.(metav1.Object)
	m.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate}})
	a := maps.Clone(m.GetAnnotations())
	if a == nil {
		a = map[string]string{}
	}
	a[storage.AnnLastApplied] = `{"kind":"applied"}`
	m.SetAnnotations(a)
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		o.Status.Reason = "Fire"
		o.Status.LastPhaseTransitionTime = &metav1.Time{Time: time.Unix(int64(rng.IntN(2e9)), 0)}
	case *corev1.PersistentVolumeClaim:
		o.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue}}
		o.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(fmt.Sprintf("%dGi", 1+rng.IntN(5)))}
		o.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{corev1.ResourceStorage: corev1.PersistentVolumeClaimNodeResizeInProgress}
		o.Status.HealthStatus = &corev1.VolumeHealthStatus{HealthConditions: []corev1.VolumeHealthCondition{{Status: "Abnormal"}}}
		// Status the binder reads, in its states: the phases and the access modes a bind sets.
		if rng.IntN(2) == 0 {
			o.Status.Phase = []corev1.PersistentVolumeClaimPhase{corev1.ClaimPending, corev1.ClaimBound, corev1.ClaimLost}[rng.IntN(3)]
			o.Status.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
		}
		if rng.IntN(2) == 0 {
			name := "gold"
			o.Status.CurrentVolumeAttributesClassName = &name
		}
	}
}

// cachedState is the state as the binder's cache holds it: every volume and claim stripped to
// the binder's shape.
func cachedState(whole *clusterstate.State) *clusterstate.State {
	var claims []*corev1.PersistentVolumeClaim
	var volumes []*corev1.PersistentVolume
	var classes []*storagev1.StorageClass
	for _, c := range whole.Claims() {
		claims = append(claims, CacheShape.StripClaim(c))
	}
	for _, v := range whole.Volumes() {
		volumes = append(volumes, CacheShape.StripVolume(v))
	}
	for _, c := range whole.Classes() {
		c = c.DeepCopy()
		_, _ = CacheShape.Strip(c)
		classes = append(classes, c)
	}
	return clusterstate.New(claims, volumes, classes, whole.Nodes())
}

// decisions is what the binder decides on a state: the plan, then each claim's and each
// volume's action, with the volumes named rather than pointed to.
func decisions(st *clusterstate.State, pendingFree bool) (map[string]string, []string) {
	plan := Plan(PlanInput{State: st, PendingFree: pendingFree})
	byUID := map[string]string{}
	for uid, v := range plan.Volumes {
		byUID[string(uid)] = v
	}
	var out []string
	for _, c := range st.Claims() {
		s, err := ClaimStateOf(c, stateFacts{st: st, plan: plan, pendingFree: pendingFree})
		if err != nil {
			panic(err) // a State's reads do not fail
		}
		a := DecideClaim(s)
		bind := ""
		if a.Bind != nil {
			bind = a.Bind.Name
		}
		ev := a.Event
		a.Bind, a.Event = nil, nil
		done := s.Volume != nil && bindDone(s.Volume, c)
		out = append(out, fmt.Sprintf("claim %s/%s: bind %q (done %v) %+v %+v", c.Namespace, c.Name, bind, done, a, ev))
	}
	for _, v := range st.Volumes() {
		s := VolumeState{Volume: v, ClaimConfirmed: true}
		if ref := v.Spec.ClaimRef; ref != nil {
			s.Claim, _ = st.PersistentVolumeClaim(ref.Namespace, ref.Name)
		}
		a := DecideVolume(s)
		ev, cev := a.Event, a.ClaimEvent
		a.Event, a.ClaimEvent = nil, nil
		out = append(out, fmt.Sprintf("volume %s: %+v %+v %+v", v.Name, a, ev, cev))
	}
	return byUID, out
}

// stateFacts are ClaimFacts read from a State and a plan of it: all there is, no denials.
type stateFacts struct {
	st          *clusterstate.State
	plan        PoolPlan
	pendingFree bool
}

func (f stateFacts) Volume(name string) (*corev1.PersistentVolume, bool, error) {
	v, err := f.st.PersistentVolume(name)
	return v, v != nil, err
}

func (f stateFacts) Classes() ([]*storagev1.StorageClass, error) { return f.st.Classes(), nil }

func (f stateFacts) VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error) {
	return f.st.VolumesClaiming(namespace, name)
}

func (f stateFacts) Plan(claim types.UID) (string, bool) {
	v, ok := f.plan.Volumes[claim]
	return v, ok
}

func (f stateFacts) Denied(types.UID) map[string]bool { return nil }
func (f stateFacts) PendingFree() bool                { return f.pendingFree }
func (f stateFacts) Confirmed() bool                  { return true }

// TestDecisionsOnCachedObjects holds the binder to its CacheShape: on random clusters whose
// objects carry what the cache drops, the plan and every claim's and volume's decision are the
// same on the objects stripped as the cache holds them as on the whole ones.
func TestDecisionsOnCachedObjects(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 34))
	var decided int
	for i := range 300 {
		var objs []runtime.Object
		for _, obj := range oracleCluster(rng) {
			obj = obj.DeepCopyObject().(client.Object)
			withDropped(rng, obj)
			objs = append(objs, obj)
		}
		// The state's indexes are built on first use: the binds below change its objects before.
		whole := testobj.NewView(objs...).State
		claims, volumes := whole.Claims(), whole.Volumes()
		// Bind some pairs completely, as the binder leaves them, so that what tells a bind done
		// (the phases, the claim's access modes) is compared too.
		for j, c := range claims {
			if j%3 != 0 || j >= len(volumes) {
				continue
			}
			v := volumes[j]
			c.Spec.VolumeName = v.Name
			v.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: c.Namespace, Name: c.Name, UID: c.UID}
			if c.Annotations == nil {
				c.Annotations = map[string]string{}
			}
			c.Annotations[storage.AnnBindCompleted] = "yes"
			v.Status.Phase, c.Status.Phase = corev1.VolumeBound, corev1.ClaimBound
			c.Status.AccessModes = v.Spec.AccessModes
		}
		pendingFree := i%2 == 1
		wantPlan, want := decisions(whole, pendingFree)
		gotPlan, got := decisions(cachedState(whole), pendingFree)
		if !maps.Equal(gotPlan, wantPlan) {
			t.Fatalf("cluster %d: plan on the cache's objects %v, on whole ones %v", i, gotPlan, wantPlan)
		}
		if !reflect.DeepEqual(got, want) {
			for j := range want {
				if got[j] != want[j] {
					t.Errorf("cluster %d: on the cache's objects\n%s\ninstead of\n%s", i, got[j], want[j])
				}
			}
			t.FailNow()
		}
		decided += len(want)
	}
	t.Logf("%d decisions compared", decided)
}
