package policytest

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/webhook"
)

// world is one state of a suite's fixtures with the handlers that judge writes in it. A suite's
// cases all run in its initial world; a sequential suite's cases run one after the other, each
// admitted write making the next world.
type world struct {
	fx      *Fixtures
	st      *state
	engines webhook.EngineSource
	hooks   *hooks
	audits  *auditOnce
}

func newWorld(fx *Fixtures, engines webhook.EngineSource) *world {
	st := stateOf(fx)
	return &world{fx: fx, st: st, engines: engines, hooks: newHooks(engines, st.view), audits: &auditOnce{}}
}

// prepare is what the apiserver does to a written object after the mutating webhooks and before
// the validating ones (the registry's strategy): a new object gets its uid (here one made from its
// name when it has none) and a volume or claim its initial status (phase Pending); an update of
// the main resource keeps the object's identity and status, one of the status subresource its
// identity and spec (the write's metadata is kept, as the status strategies keep it).
func prepare(w *Write, obj []byte) ([]byte, error) {
	cur, err := decodeWriteObject(obj, "object")
	if err != nil {
		return nil, err
	}
	var old metav1.Object
	if w.OldObject != nil {
		if old, err = decodeWriteObject(w.OldObject, "oldObject"); err != nil {
			return nil, err
		}
	}
	switch w.Operation {
	case admissionv1.Create:
		if cur.GetUID() == "" {
			cur.SetUID(types.UID(fmt.Sprintf("policytest-%s-%s", cur.GetNamespace(), cur.GetName())))
		}
		cur.SetDeletionTimestamp(nil)
		switch o := cur.(type) {
		case *corev1.PersistentVolume:
			o.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending}
		case *corev1.PersistentVolumeClaim:
			o.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
		}
	case admissionv1.Update:
		cur.SetUID(old.GetUID())
		cur.SetGeneration(old.GetGeneration())
		cur.SetDeletionTimestamp(old.GetDeletionTimestamp())
		cur.SetCreationTimestamp(old.GetCreationTimestamp())
		// The status strategies reset the spec and keep the write's metadata (finalizers and
		// annotations a status write removes are removed); the main resource's keep the status.
		status := w.SubResource == "status"
		switch o := cur.(type) {
		case *corev1.PersistentVolume:
			if status {
				o.Spec = old.(*corev1.PersistentVolume).Spec
			} else {
				o.Status = old.(*corev1.PersistentVolume).Status
			}
		case *corev1.PersistentVolumeClaim:
			if status {
				o.Spec = old.(*corev1.PersistentVolumeClaim).Spec
			} else {
				o.Status = old.(*corev1.PersistentVolumeClaim).Status
			}
		}
	}
	return json.Marshal(cur)
}

// store is the world after an admitted write, as the apiserver stores it: the object created or
// updated (removed once an object being deleted has no finalizer left), or deleted (marked
// deleted while it has finalizers). The world it is called on is not changed.
func (wd *world) store(w *Write, stored []byte, now time.Time) (*world, error) {
	fx := wd.fx.clone()
	var obj metav1.Object
	if w.Operation == admissionv1.Delete {
		old, err := decodeWriteObject(w.OldObject, "oldObject")
		if err != nil {
			return nil, err
		}
		if len(old.GetFinalizers()) > 0 {
			if old.GetDeletionTimestamp() == nil {
				at := metav1.NewTime(now.UTC().Truncate(time.Second))
				old.SetDeletionTimestamp(&at)
			}
			obj = old
		}
	} else {
		var err error
		if obj, err = decodeWriteObject(stored, "object"); err != nil {
			return nil, err
		}
		if obj.GetDeletionTimestamp() != nil && len(obj.GetFinalizers()) == 0 {
			obj = nil // finalized: gone
		}
	}
	fx.put(objectRef{kind: string(w.Kind), namespace: w.Namespace, name: w.Name}, obj)
	return newWorld(fx, wd.engines), nil
}

// clone copies the lists, not the objects, which are never changed in place.
func (f *Fixtures) clone() *Fixtures {
	return &Fixtures{
		Volumes: slices.Clone(f.Volumes), Claims: slices.Clone(f.Claims), Classes: slices.Clone(f.Classes),
		Nodes: slices.Clone(f.Nodes), AttributesClasses: slices.Clone(f.AttributesClasses),
		Leases: slices.Clone(f.Leases), Pods: slices.Clone(f.Pods),
	}
}

// put replaces the object ref names with obj, adds it, or (obj nil) removes it.
func (f *Fixtures) put(ref objectRef, obj metav1.Object) {
	switch policy.Kind(ref.kind) {
	case policy.KindPersistentVolume:
		f.Volumes = putObject(f.Volumes, ref, obj)
	case policy.KindPersistentVolumeClaim:
		f.Claims = putObject(f.Claims, ref, obj)
	case policy.KindStorageClass:
		f.Classes = putObject(f.Classes, ref, obj)
	}
}

func putObject[T interface {
	*corev1.PersistentVolume | *corev1.PersistentVolumeClaim | *storagev1.StorageClass
	metav1.Object
}](list []T, ref objectRef, obj metav1.Object) []T {
	i := slices.IndexFunc(list, func(o T) bool { return o.GetNamespace() == ref.namespace && o.GetName() == ref.name })
	switch {
	case obj == nil && i >= 0:
		return slices.Delete(list, i, i+1)
	case obj == nil:
		return list
	case i >= 0:
		list[i] = obj.(T)
		return list
	}
	return append(list, obj.(T))
}
