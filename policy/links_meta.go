package policy

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Metadata vocabulary shared by the rules that guard annotations, finalizers and the "in use"
// state of an object (PVG011 to PVG013).

// reviewMeta returns the metadata of the old and the new object under review, whatever its kind;
// either is nil when absent (old on CREATE).
func reviewMeta(r *Review) (old, cur *metav1.ObjectMeta) {
	switch r.Kind {
	case KindPersistentVolume:
		if r.OldPV != nil {
			old = &r.OldPV.ObjectMeta
		}
		if r.PV != nil {
			cur = &r.PV.ObjectMeta
		}
	case KindPersistentVolumeClaim:
		if r.OldPVC != nil {
			old = &r.OldPVC.ObjectMeta
		}
		if r.PVC != nil {
			cur = &r.PVC.ObjectMeta
		}
	case KindStorageClass:
		if r.OldSC != nil {
			old = &r.OldSC.ObjectMeta
		}
		if r.SC != nil {
			cur = &r.SC.ObjectMeta
		}
	}
	return old, cur
}

// annotationChange is one watched annotation that a write adds, changes or removes.
type annotationChange struct {
	Key string
	// Verb is "added", "changed" or "removed", for messages.
	Verb string
}

// annotationChanges compares the watched keys between two versions of an object's metadata, in
// the order of keys so that findings come out stable. A nil old means CREATE: every present key
// counts as added.
func annotationChanges(old, cur *metav1.ObjectMeta, keys []string) []annotationChange {
	var oldAnn, curAnn map[string]string
	if old != nil {
		oldAnn = old.Annotations
	}
	if cur != nil {
		curAnn = cur.Annotations
	}
	var out []annotationChange
	for _, k := range keys {
		ov, inOld := oldAnn[k]
		nv, inCur := curAnn[k]
		switch {
		case !inOld && inCur:
			out = append(out, annotationChange{Key: k, Verb: "added"})
		case inOld && !inCur:
			out = append(out, annotationChange{Key: k, Verb: "removed"})
		case inOld && inCur && ov != nv:
			out = append(out, annotationChange{Key: k, Verb: "changed"})
		}
	}
	return out
}

// finalizerRemoved reports whether a write drops the finalizer: the old metadata has it and the
// new one does not.
func finalizerRemoved(old, cur *metav1.ObjectMeta, finalizer string) bool {
	if old == nil || cur == nil {
		return false
	}
	return slices.Contains(old.Finalizers, finalizer) && !slices.Contains(cur.Finalizers, finalizer)
}

// volumeInUse reports whether a volume holds a claim's data: it is Bound or Released, or its
// claimRef carries a uid (the binder's first write, before the phase follows). The description
// completes "PersistentVolume pv-7 is ...".
func volumeInUse(pv *corev1.PersistentVolume) (Text, bool) {
	if pv == nil {
		return Text{}, false
	}
	ref := pv.Spec.ClaimRef
	var claim Arg = Word("a claim")
	if ref != nil && ref.Name != "" {
		claim = claimRefOf(ref)
	}
	switch {
	case pv.Status.Phase == corev1.VolumeBound:
		return Textf("Bound to %s", claim), true
	case pv.Status.Phase == corev1.VolumeReleased:
		return Textf("Released by %s", claim), true
	case ref != nil && ref.UID != "":
		return Textf("claimed by %s", claim), true
	}
	return Text{}, false
}

// claimInUse reports whether a claim is bound or being bound: it names a volume, or is Bound.
// The description completes "PersistentVolumeClaim team-a/data is ...".
func claimInUse(pvc *corev1.PersistentVolumeClaim) (Text, bool) {
	if pvc == nil {
		return Text{}, false
	}
	if pvc.Spec.VolumeName != "" {
		return Textf("bound to %s", volumeRef(pvc.Spec.VolumeName)), true
	}
	if pvc.Status.Phase == corev1.ClaimBound {
		return Plain(Word(corev1.ClaimBound)), true
	}
	return Text{}, false
}

// volumeRef is the volume of that name.
func volumeRef(name string) ObjectRef { return ObjectRef{Kind: KindPersistentVolume, Name: name} }

// requester names the identity of a review for messages.
func requester(u UserInfo) string {
	if u.Username == "" {
		return "an anonymous requester"
	}
	return u.Username
}
