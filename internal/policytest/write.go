package policytest

import (
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/pvguard/pvguard/policy"
)

// writeKinds are the kinds pvguard's webhooks judge.
var writeKinds = map[header]func() metav1.Object{
	{"v1", "PersistentVolume"}:            func() metav1.Object { return &corev1.PersistentVolume{} },
	{"v1", "PersistentVolumeClaim"}:       func() metav1.Object { return &corev1.PersistentVolumeClaim{} },
	{"storage.k8s.io/v1", "StorageClass"}: func() metav1.Object { return &storagev1.StorageClass{} },
}

const writeKindList = "v1 PersistentVolume or PersistentVolumeClaim, or storage.k8s.io/v1 StorageClass"

// compileWrite checks what a case says; resolve finds what it names in a state of the fixtures.
func compileWrite(w writeDoc, e expectDoc, at string) (*Write, error) {
	wat := at + ".write"
	out := &Write{Operation: admissionv1.Operation(w.Operation), SubResource: w.SubResource, DryRun: w.DryRun}
	if err := checkWriteOperation(out.Operation, w, wat); err != nil {
		return nil, err
	}
	var err error
	if out.User, err = requester(w, wat); err != nil {
		return nil, err
	}
	src, ref, err := compileWriteSource(w, wat)
	if err != nil {
		return nil, err
	}
	if err := checkWriteShape(out.Operation, &src, ref, w.OldFixture != "", wat); err != nil {
		return nil, err
	}
	out.src = src
	out.Kind, out.Namespace, out.Name = policy.Kind(ref.kind), ref.namespace, ref.name
	if out.Expect, err = compileExpect(e, at+".expect"); err != nil {
		return nil, err
	}
	return out, nil
}

// checkWriteOperation checks the operation and the subresource a write case names.
func checkWriteOperation(op admissionv1.Operation, w writeDoc, wat string) error {
	switch op {
	case admissionv1.Create, admissionv1.Update, admissionv1.Delete:
	default:
		return fmt.Errorf("%s.operation: %q: want CREATE, UPDATE or DELETE", wat, w.Operation)
	}
	switch {
	case w.SubResource == "":
	case w.SubResource != "status":
		return fmt.Errorf("%s.subResource: %q: want status, or none", wat, w.SubResource)
	case op != admissionv1.Update:
		return fmt.Errorf("%s.subResource: a status write is an UPDATE", wat)
	}
	return nil
}

// compileWriteSource decodes the old object and the object (or patch) a write case gives, and
// names the object written.
func compileWriteSource(w writeDoc, wat string) (writeSource, objectRef, error) {
	var (
		src writeSource
		err error
	)
	switch {
	case !absent(w.OldObject) && w.OldFixture != "":
		return src, objectRef{}, fmt.Errorf("%s: oldObject and oldFixture: give the old object one way, not both", wat)
	case !absent(w.OldObject):
		if src.old, err = decodeWriteObject(w.OldObject, wat+".oldObject"); err != nil {
			return src, objectRef{}, err
		}
	}
	switch {
	case !absent(w.Object) && !absent(w.Patch):
		return src, objectRef{}, fmt.Errorf("%s: object and patch: give the object written one way, not both", wat)
	case !absent(w.Object):
		if src.object, err = decodeWriteObject(w.Object, wat+".object"); err != nil {
			return src, objectRef{}, err
		}
	case !absent(w.Patch):
		src.patch = w.Patch
	}
	// What is written: the kind, namespace and name, from the object or the old object.
	var ref objectRef
	switch {
	case src.object != nil:
		ref = refOf(src.object)
	case src.old != nil:
		ref = refOf(src.old)
	}
	if w.OldFixture != "" {
		fref, err := parseRef(w.OldFixture, ref.kind)
		if err != nil {
			return src, objectRef{}, fmt.Errorf("%s.oldFixture: %w", wat, err)
		}
		if ref.kind != "" && fref != ref {
			return src, objectRef{}, fmt.Errorf("%s: the old object is %s, the object %s: a write changes one object", wat, fref, ref)
		}
		ref, src.oldRef = fref, fref
	}
	return src, ref, nil
}

// checkWriteShape checks that a write gives what its operation needs (the object written, the
// old object) and nothing it does not, and that both name the same object; an UPDATE that gives
// no old object gets the fixture its object names.
func checkWriteShape(op admissionv1.Operation, src *writeSource, ref objectRef, oldFixture bool, wat string) error {
	switch op {
	case admissionv1.Create:
		if src.old != nil || oldFixture || src.patch != nil {
			return fmt.Errorf("%s: a CREATE has no old object (and no patch)", wat)
		}
		if src.object == nil {
			return fmt.Errorf("%s.object: a CREATE writes an object", wat)
		}
	case admissionv1.Update:
		if src.object == nil && src.patch == nil {
			return fmt.Errorf("%s: an UPDATE writes an object (object or patch)", wat)
		}
		if src.patch != nil && src.old == nil && src.oldRef.kind == "" {
			return fmt.Errorf("%s.patch: a patch needs the old object it applies to (oldObject, or oldFixture with its kind)", wat)
		}
		if src.old == nil && src.oldRef.kind == "" {
			src.oldRef = ref // the fixture the object names
		}
	case admissionv1.Delete:
		if src.object != nil || src.patch != nil {
			return fmt.Errorf("%s: a DELETE writes no object; name what it deletes with oldFixture or oldObject", wat)
		}
		if src.old == nil && src.oldRef.kind == "" {
			return fmt.Errorf("%s: a DELETE needs the object it deletes (oldFixture or oldObject)", wat)
		}
	}
	if src.old != nil && src.object != nil && refOf(src.old) != ref {
		return fmt.Errorf("%s: the old object is %s, the object %s: a write changes one object", wat, refOf(src.old), ref)
	}
	return nil
}

// writeSource is what a write case gives, before it is resolved in a state of the fixtures.
type writeSource struct {
	object metav1.Object // the object written, inline
	patch  []byte        // or a merge patch of the old object
	old    metav1.Object // the old object, inline
	oldRef objectRef     // or the fixture that is the old object
}

// objectRef names an object of a kind pvguard's webhooks judge.
type objectRef struct{ kind, namespace, name string }

func (r objectRef) String() string { return objectKey(r.kind, r.namespace, r.name) }

func refOf(obj metav1.Object) objectRef {
	return objectRef{kind: string(kindOf(obj)), namespace: obj.GetNamespace(), name: obj.GetName()}
}

// requester is the identity a write is made as: a user with groups, or a ServiceAccount with the
// groups the apiserver gives it. Every authenticated requester is in system:authenticated.
func requester(w writeDoc, at string) (authenticationv1.UserInfo, error) {
	switch {
	case w.User != "" && w.ServiceAccount != "":
		return authenticationv1.UserInfo{}, fmt.Errorf("%s: user and serviceAccount: the requester is one of them", at)
	case w.ServiceAccount != "":
		if len(w.Groups) > 0 {
			return authenticationv1.UserInfo{}, fmt.Errorf("%s.groups: a ServiceAccount's groups are the ones the apiserver gives it", at)
		}
		ns, name, ok := strings.Cut(w.ServiceAccount, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return authenticationv1.UserInfo{}, fmt.Errorf("%s.serviceAccount: %q: want namespace/name", at, w.ServiceAccount)
		}
		return authenticationv1.UserInfo{Username: serviceaccount.MakeUsername(ns, name),
			Groups: append(serviceaccount.MakeGroupNames(ns), user.AllAuthenticated)}, nil
	case w.User != "":
		groups := slices.Clone(w.Groups)
		if !slices.Contains(groups, user.AllAuthenticated) {
			groups = append(groups, user.AllAuthenticated)
		}
		return authenticationv1.UserInfo{Username: w.User, Groups: groups}, nil
	}
	return authenticationv1.UserInfo{}, fmt.Errorf("%s: who writes: user (with groups) or serviceAccount namespace/name", at)
}

// decodeWriteObject decodes an object a write carries, strictly.
func decodeWriteObject(js []byte, at string) (metav1.Object, error) {
	h, err := readHeader(js)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", at, fieldError(err, ""))
	}
	// The path is named once, before the object; field paths are the object's own, as in a
	// fixture's errors.
	obj, err := decodeObject(js, h, writeKinds, writeKindList, "")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	return obj, nil
}

// kindOf is the policy kind of a decoded write object.
func kindOf(obj metav1.Object) policy.Kind {
	switch obj.(type) {
	case *corev1.PersistentVolume:
		return policy.KindPersistentVolume
	case *corev1.PersistentVolumeClaim:
		return policy.KindPersistentVolumeClaim
	}
	return policy.KindStorageClass
}

// parseRef reads a reference to a volume, claim or class: Kind/[namespace/]name, or
// [namespace/]name of defaultKind.
func parseRef(ref, defaultKind string) (objectRef, error) {
	kind, rest := defaultKind, ref
	if k, r, ok := strings.Cut(ref, "/"); ok {
		switch k {
		case string(policy.KindPersistentVolume), string(policy.KindPersistentVolumeClaim), string(policy.KindStorageClass):
			kind, rest = k, r
		}
	}
	parts := strings.Split(rest, "/")
	bad := fmt.Errorf("%q: want PersistentVolume/NAME, PersistentVolumeClaim/NAMESPACE/NAME or StorageClass/NAME", ref)
	if slices.Contains(parts, "") {
		return objectRef{}, bad
	}
	switch {
	case kind == "":
		return objectRef{}, fmt.Errorf("%q: name its kind: PersistentVolume/NAME, PersistentVolumeClaim/NAMESPACE/NAME or StorageClass/NAME", ref)
	case kind == string(policy.KindPersistentVolumeClaim) && len(parts) == 2:
		return objectRef{kind: kind, namespace: parts[0], name: parts[1]}, nil
	case kind != string(policy.KindPersistentVolumeClaim) && len(parts) == 1:
		return objectRef{kind: kind, name: parts[0]}, nil
	}
	return objectRef{}, bad
}
