package policy

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pvguard/pvguard/storage"
)

// A Fix is a way out of a finding that its hint names, in machine form: the writes to make, in
// order, on the state the finding came from. Every hint that names a write carries one Fix per
// route it names that a program can make (the rule tests make each on the state of each of their
// findings and hold the engine to admitting it), so no hint suggests a route another rule
// refuses. A Fix is for programs that hold that state, never for a reader: it is not rendered or
// serialised, and may name what its finding's reader may not read; the hint is the reader's form.
type Fix struct {
	Writes []Write
}

// Write is one write a hint names.
//
// At admission, a Write on the object under review stands for the write under review, with its
// Set and Clear applied (the same write, done the way the hint says); a route that has none does
// not make the write under review. A Write on another object, and every Write in the audit
// (which has no write under review), writes the object as it stands.
type Write struct {
	// Object is the object written.
	Object ObjectRef
	// Delete deletes the object.
	Delete bool
	// Create creates the object anew from what it was (after a Delete: a claim deleted and
	// created again under its name), without its uid, resourceVersion, creation time and status,
	// with Set and Clear applied. The apiserver gives it a new uid.
	Create bool
	// Set sets fields, by path ("spec.claimRef.uid", "metadata.annotations[key]"), to JSON values
	// (string, bool, int64, float64, []any, map[string]any).
	Set map[string]any
	// Clear removes fields, by path.
	Clear []string
}

// Fixes are the ways out of the finding its hint names as writes (Fix).
func (f Finding) Fixes() []Fix { return f.fixes }

// Apply returns obj (a *PersistentVolume, *PersistentVolumeClaim or *StorageClass, not changed)
// as w leaves it: a copy with w's fields set and cleared, and for a Create, without what the
// apiserver sets. A Delete leaves nothing (nil).
func (w Write) Apply(obj runtime.Object) (runtime.Object, error) {
	if w.Delete {
		return nil, nil
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %s: %w", w.Object, err)
	}
	if w.Create {
		for _, p := range []string{"metadata.uid", "metadata.resourceVersion", "metadata.creationTimestamp", "metadata.deletionTimestamp", "status"} {
			unstructured.RemoveNestedField(u, fieldPath(p)...)
		}
	}
	for p, val := range w.Set {
		if err := unstructured.SetNestedField(u, runtime.DeepCopyJSONValue(val), fieldPath(p)...); err != nil {
			return nil, fmt.Errorf("setting %s of %s: %w", p, w.Object, err)
		}
	}
	for _, p := range w.Clear {
		unstructured.RemoveNestedField(u, fieldPath(p)...)
	}
	var out runtime.Object
	switch obj.(type) {
	case *corev1.PersistentVolume:
		out = &corev1.PersistentVolume{}
	case *corev1.PersistentVolumeClaim:
		out = &corev1.PersistentVolumeClaim{}
	case *storagev1.StorageClass:
		out = &storagev1.StorageClass{}
	default:
		return nil, fmt.Errorf("cannot write a %T", obj)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, out); err != nil {
		return nil, fmt.Errorf("converting %s back: %w", w.Object, err)
	}
	return out, nil
}

// fieldPath splits a field path into its keys: "metadata.annotations[a.b/c]" is metadata,
// annotations, a.b/c.
func fieldPath(p string) []string {
	var out []string
	for p != "" {
		i := strings.IndexAny(p, ".[")
		switch {
		case i < 0:
			return append(out, p)
		case p[i] == '.':
			out, p = append(out, p[:i]), p[i+1:]
		default:
			if i > 0 {
				out = append(out, p[:i])
			}
			end := strings.IndexByte(p, ']')
			if end < i {
				return append(out, p[i+1:])
			}
			out, p = append(out, p[i+1:end]), strings.TrimPrefix(p[end+1:], ".")
		}
	}
	return out
}

// The writes hints name most.

// recreate is a claim deleted and created again under its name without the given fields (its
// completed binding annotations go with spec.volumeName: a new claim has none): the way out of a
// completed binding, which never moves (PVG003).
func recreate(pvc ObjectRef, clear ...string) Fix {
	// A new claim carries none of the annotations the binding controllers wrote on the old one.
	if slices.Contains(clear, "spec.volumeName") {
		for _, k := range binderAnnotations {
			clear = append(clear, annPath(k))
		}
		clear = append(clear, annPath(storage.AnnStorageProvisioner), annPath(storage.AnnBetaStorageProvisioner))
	}
	return Fix{Writes: []Write{{Object: pvc, Delete: true}, {Object: pvc, Create: true, Clear: clear}}}
}

// undo is the write under review on o without the change it made to a field: the field set
// back to what it was, or cleared when it had no value.
func undo(o ObjectRef, field string, was any) Fix {
	if was == nil {
		return Fix{Writes: []Write{{Object: o, Clear: []string{field}}}}
	}
	return Fix{Writes: []Write{{Object: o, Set: map[string]any{field: was}}}}
}

// clearing is one write clearing fields of o.
func clearing(o ObjectRef, fields ...string) Fix {
	return Fix{Writes: []Write{{Object: o, Clear: fields}}}
}

// annPath is the path of an annotation.
func annPath(key string) string { return "metadata.annotations[" + key + "]" }
