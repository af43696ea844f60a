package policytest

import (
	"encoding/json"
	"fmt"
	"slices"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/storage"
)

// Resolve is the write in the state fx holds (a sequential suite's write is resolved when it
// runs, in the state the writes before it made); a write already resolved is returned as it is.
func (w *Write) Resolve(fx *Fixtures) (*Write, error) {
	if w.resolved {
		return w, nil
	}
	return w.resolve(fx)
}

// resolve is the write in a state of the fixtures: its old object found (an inline one, or the
// fixture it names), its object made (inline, or the patch applied to the old object), then what
// the apiserver does before its mutating webhooks are called (admissionPlugins). The write
// itself is not changed.
func (w *Write) resolve(fx *Fixtures) (*Write, error) {
	out := *w
	out.resolved = true
	src := w.src
	old := src.old
	if old == nil && src.oldRef.kind != "" {
		var err error
		if old, err = lookup(fx, src.oldRef); err != nil {
			if w.Operation == admissionv1.Update && src.object != nil {
				return nil, fmt.Errorf("no old object given (oldObject or oldFixture), and %w", err)
			}
			return nil, err
		}
		out.OldFixture = src.oldRef.String()
	}
	var (
		obj   metav1.Object
		oldJS []byte
		err   error
	)
	if old != nil {
		if oldJS, err = json.Marshal(old); err != nil {
			return nil, err
		}
	}
	switch {
	case src.object != nil:
		obj = deepCopy(src.object)
	case src.patch != nil:
		patched, err := jsonpatch.MergePatch(oldJS, src.patch)
		if err != nil {
			return nil, fmt.Errorf("patch: %w", err)
		}
		if obj, err = decodeWriteObject(patched, "patch"); err != nil {
			return nil, err
		}
		if refOf(obj) != refOf(old) {
			return nil, fmt.Errorf("patch: it makes %s of %s: a write changes one object", refOf(obj), refOf(old))
		}
	}
	if w.Operation == admissionv1.Create {
		admissionPlugins(obj, fx)
	}
	if obj != nil {
		if out.Object, err = json.Marshal(obj); err != nil {
			return nil, err
		}
	}
	out.OldObject = oldJS
	return &out, nil
}

// admissionPlugins does to a new object what the apiserver's default admission plugins do before
// its mutating webhooks are called: a claim that names no class is given the default class
// (DefaultStorageClass), and a volume or claim gets its protection finalizer
// (StorageObjectInUseProtection).
func admissionPlugins(obj metav1.Object, fx *Fixtures) {
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		addFinalizer(o, finPV)
	case *corev1.PersistentVolumeClaim:
		if o.Spec.StorageClassName == nil {
			if def := defaultClass(fx.Classes); def != "" {
				o.Spec.StorageClassName = &def
			}
		}
		addFinalizer(o, finPVC)
	}
}

// The finalizers the StorageObjectInUseProtection admission plugin adds.
const (
	finPV  = "kubernetes.io/pv-protection"
	finPVC = "kubernetes.io/pvc-protection"
)

func addFinalizer(obj metav1.Object, f string) {
	if !slices.Contains(obj.GetFinalizers(), f) {
		obj.SetFinalizers(append(obj.GetFinalizers(), f))
	}
}

// defaultClass is the class DefaultStorageClass gives a claim without one: the newest of those
// marked default (by creation time, then name, as the plugin orders them), "" for none.
func defaultClass(classes []*storagev1.StorageClass) string {
	var best *storagev1.StorageClass
	for _, sc := range classes {
		if !storage.IsDefaultClass(sc) {
			continue
		}
		if best == nil || sc.CreationTimestamp.After(best.CreationTimestamp.Time) ||
			(sc.CreationTimestamp.Equal(&best.CreationTimestamp) && sc.Name > best.Name) {
			best = sc
		}
	}
	if best == nil {
		return ""
	}
	return best.Name
}

// withType fills in the apiVersion and kind of an object that lacks them (one read through a
// typed client), as the apiserver sends every object to webhooks.
func withType(obj metav1.Object) metav1.Object {
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		o.APIVersion, o.Kind = "v1", "PersistentVolume"
	case *corev1.PersistentVolumeClaim:
		o.APIVersion, o.Kind = "v1", "PersistentVolumeClaim"
	case *storagev1.StorageClass:
		o.APIVersion, o.Kind = "storage.k8s.io/v1", "StorageClass"
	}
	return obj
}

func deepCopy(obj metav1.Object) metav1.Object {
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		return o.DeepCopy()
	case *corev1.PersistentVolumeClaim:
		return o.DeepCopy()
	case *storagev1.StorageClass:
		return o.DeepCopy()
	}
	panic(fmt.Sprintf("policytest: %T is not written", obj))
}

// lookup finds the fixture a reference names, as a copy.
func lookup(fx *Fixtures, r objectRef) (metav1.Object, error) {
	if obj, ok := fx.index()[r]; ok {
		return withType(deepCopy(obj)), nil
	}
	return nil, fmt.Errorf("there is no fixture %s", r)
}
