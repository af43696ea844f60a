package policy_test

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
)

// catalogueShape is what the cache keeps for the rules.
var catalogueShape = policy.CacheShape(policy.Catalogue())

// addDropped gives an object what a cache drops and a cluster's objects carry: managedFields and
// the last-applied annotation.
func addDropped(m *metav1.ObjectMeta) {
	m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1"}}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[storage.AnnLastApplied] = `{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"applied"}}`
}

func fullPV(pv *corev1.PersistentVolume) *corev1.PersistentVolume {
	if pv == nil {
		return nil
	}
	pv = pv.DeepCopy()
	addDropped(&pv.ObjectMeta)
	return pv
}

func fullPVC(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	if pvc == nil {
		return nil
	}
	pvc = pvc.DeepCopy()
	addDropped(&pvc.ObjectMeta)
	return pvc
}

// shapedView is a View whose volumes, claims and pods are as the cache holds them: stripped to
// the catalogue's shape (or, with whole set, carrying what the cache drops).
type shapedView struct {
	policy.View
	whole bool
}

func (v shapedView) pv(pv *corev1.PersistentVolume) *corev1.PersistentVolume {
	if v.whole {
		return fullPV(pv)
	}
	return catalogueShape.StripVolume(pv)
}

func (v shapedView) pvc(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	if v.whole {
		return fullPVC(pvc)
	}
	return catalogueShape.StripClaim(pvc)
}

func (v shapedView) object(obj any) any {
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		return v.pv(o)
	case *corev1.PersistentVolumeClaim:
		return v.pvc(o)
	}
	return obj
}

func (v shapedView) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	pv, err := v.View.PersistentVolume(name)
	return v.pv(pv), err
}

func (v shapedView) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	pvc, err := v.View.PersistentVolumeClaim(namespace, name)
	return v.pvc(pvc), err
}

func (v shapedView) claims(list []*corev1.PersistentVolumeClaim, err error) ([]*corev1.PersistentVolumeClaim, error) {
	out := make([]*corev1.PersistentVolumeClaim, 0, len(list))
	for _, pvc := range list {
		out = append(out, v.pvc(pvc))
	}
	return out, err
}

func (v shapedView) ClaimsNamingVolume(volumeName string) ([]*corev1.PersistentVolumeClaim, error) {
	return v.claims(v.View.ClaimsNamingVolume(volumeName))
}

func (v shapedView) VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error) {
	list, err := v.View.VolumesClaiming(namespace, name)
	out := make([]*corev1.PersistentVolume, 0, len(list))
	for _, pv := range list {
		out = append(out, v.pv(pv))
	}
	return out, err
}

func (v shapedView) ClaimWaitingForData(uid types.UID) (*corev1.PersistentVolumeClaim, error) {
	pvc, err := v.View.ClaimWaitingForData(uid)
	return v.pvc(pvc), err
}

func (v shapedView) PodsUsingClaim(namespace, claim string) ([]*corev1.Pod, error) {
	pods, err := v.View.PodsUsingClaim(namespace, claim)
	if v.whole {
		return pods, err
	}
	out := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		out = append(out, storage.StripPod(p))
	}
	return out, err
}

// checkCacheShape holds a rule to what the cache keeps: run alone on an admission review (whose
// objects come from the request, whole) or an audited object (which comes from the cache), it
// finds the same when every volume, claim and pod it reads from the cache is stripped to the
// catalogue's shape (storage.CacheShape.Strip, clusterview.StripPod) as when they are whole and carry
// what the cache drops.
func checkCacheShape(t *testing.T, rule policy.Rule, cfg *policy.Config, v policy.View, admit *policy.Review, audit any, now time.Time) {
	t.Helper()
	e := policy.NewEngineWith(cfg, []policy.Rule{rule})
	run := func(view shapedView) string {
		if admit != nil {
			d, err := e.Admit(admit, view)
			return findingsText(slices.Concat(d.Deny, d.Warn, d.Audit), err)
		}
		return findingsText(e.AuditObject(view.object(audit), view, now))
	}
	whole, stripped := run(shapedView{View: v, whole: true}), run(shapedView{View: v})
	if whole != stripped {
		t.Errorf("%s %s reads what the cache drops (shape %+v): on the cache's objects it finds\n%s\ninstead of\n%s",
			rule.ID, rule.Name, catalogueShape, stripped, whole)
	}
}
