package explain_test

import (
	"encoding/json"
	"math/rand"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/storage"
)

// addDropped gives an object what the cache drops and a cluster's objects carry: managedFields,
// the last-applied annotation, and values in the status fields explanations do not declare.
func addDropped(rng *rand.Rand, m *metav1.ObjectMeta) {
	m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate}}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[storage.AnnLastApplied] = `{"kind":"applied"}`
}

// wholeAndCached is the generated input with every object carrying what the cache drops, and
// the same input as the cache holds it (stripped to explain.CacheShape).
func wholeAndCached(rng *rand.Rand, in explain.Input) (whole, cached explain.Input) {
	shape := explain.CacheShape()
	st := in.State
	var wc, cc []*corev1.PersistentVolumeClaim
	var wv, cv []*corev1.PersistentVolume
	var wk, ck []*storagev1.StorageClass
	for _, c := range st.Claims() {
		c = c.DeepCopy()
		addDropped(rng, &c.ObjectMeta)
		c.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue}}
		c.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("7Gi")}
		wc, cc = append(wc, c), append(cc, shape.StripClaim(c))
	}
	for _, v := range st.Volumes() {
		v = v.DeepCopy()
		addDropped(rng, &v.ObjectMeta)
		v.Status.Reason = "Fire"
		v.Status.LastPhaseTransitionTime = &metav1.Time{Time: time.Unix(int64(1e9+rng.Intn(1e9)), 0)}
		wv, cv = append(wv, v), append(cv, shape.StripVolume(v))
	}
	for _, k := range st.Classes() {
		k = k.DeepCopy()
		addDropped(rng, &k.ObjectMeta)
		s := k.DeepCopy()
		_, _ = shape.Strip(s)
		wk, ck = append(wk, k), append(ck, s)
	}
	whole, cached = in, in
	whole.State = clusterstate.New(wc, wv, wk, st.Nodes())
	cached.State = clusterstate.New(cc, cv, ck, st.Nodes())
	return whole, cached
}

// TestExplanationsOnCachedObjects holds explanations to explain.CacheShape: over generated pools
// whose objects carry what the cache drops, the explanation of every claim and every volume is
// the same on the objects as the cache holds them as on whole ones.
func TestExplanationsOnCachedObjects(t *testing.T) {
	rng := rand.New(rand.NewSource(34))
	now := time.Unix(2e9, 0)
	var compared int
	for round := 0; round < 200; round++ {
		whole, cached := wholeAndCached(rng, generate(rng))
		text := func(e any, err error) string {
			if err != nil {
				return "error: " + err.Error()
			}
			b, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		for _, c := range whole.State.Claims() {
			want, got := text(explain.Claim(whole, c.Namespace, c.Name)), text(explain.Claim(cached, c.Namespace, c.Name))
			if got != want {
				t.Fatalf("round %d, claim %s/%s: on the cache's objects\n%s\ninstead of\n%s", round, c.Namespace, c.Name, got, want)
			}
			compared++
		}
		for _, v := range whole.State.Volumes() {
			want, got := text(explain.Volume(whole, v.Name, now)), text(explain.Volume(cached, v.Name, now))
			if got != want {
				t.Fatalf("round %d, volume %s: on the cache's objects\n%s\ninstead of\n%s", round, v.Name, got, want)
			}
			compared++
		}
	}
	t.Logf("%d explanations compared", compared)
}
