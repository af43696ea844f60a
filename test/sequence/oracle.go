package sequence

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/pvguard/pvguard/policy"
)

// The oracle: the deny invariants (I1 to I12, each stated where Check tests it; docs/rules.md
// states each rule's invariant) written as predicates over the world before and after one
// admitted write. It is written from the invariants' text, not from the rules: it must not share
// the rules' mistakes.

// Violation is one invariant an admitted write broke.
type Violation struct {
	Invariant string
	Message   string
}

func (v Violation) String() string { return v.Invariant + ": " + v.Message }

const (
	annBindCompleted = "pv.kubernetes.io/bind-completed"
	annBoundBy       = "pv.kubernetes.io/bound-by-controller"
	annProvisionedBy = "pv.kubernetes.io/provisioned-by"
	annSelectedNode  = "volume.kubernetes.io/selected-node"
	annProvisioner   = "volume.kubernetes.io/storage-provisioner"
	annBetaProv      = "volume.beta.kubernetes.io/storage-provisioner"
	annConfirm       = "pvguard.io/confirm-reclaim-policy"
)

// protectionFinalizers are the finalizers of I9.
var protectionFinalizers = []string{FinPV, FinPVC, FinPVCtrl, FinProvisioner}

func has(m metav1.ObjectMeta, key string) bool {
	_, ok := m.Annotations[key]
	return ok
}

// live returns the claim a reference names if it exists now, with the reference's uid when it
// has one.
func live(w *World, namespace, name, uid string) *corev1.PersistentVolumeClaim {
	c := w.PVC(namespace, name)
	if c == nil || (uid != "" && string(c.UID) != uid) {
		return nil
	}
	return c
}

func liveRef(w *World, ref *corev1.ObjectReference) *corev1.PersistentVolumeClaim {
	if ref == nil {
		return nil
	}
	return live(w, ref.Namespace, ref.Name, string(ref.UID))
}

func sameRef(a, b *corev1.ObjectReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Namespace == b.Namespace && a.Name == b.Name && a.UID == b.UID
}

// uidDropped reports whether a reference changed only by losing its uid: upstream's rollback of
// a volume a user pre-bound, which keeps the volume reserved by name and links nothing new.
func uidDropped(old, cur *corev1.ObjectReference) bool {
	return old != nil && cur != nil && old.Namespace == cur.Namespace && old.Name == cur.Name &&
		old.UID != "" && cur.UID == ""
}

func refString(ref *corev1.ObjectReference) string {
	if ref == nil {
		return "nil"
	}
	if ref.UID == "" {
		return fmt.Sprintf("%s/%s (no uid)", ref.Namespace, ref.Name)
	}
	return fmt.Sprintf("%s/%s (uid %s)", ref.Namespace, ref.Name, ref.UID)
}

// boundTo reports whether volume and claim form a bound pair: the claim is live, bind-completed
// and names the volume, and the volume's claimRef names the claim with its uid.
func boundTo(pv *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) bool {
	ref := pv.Spec.ClaimRef
	return c != nil && has(c.ObjectMeta, annBindCompleted) && c.Spec.VolumeName == pv.Name &&
		ref != nil && ref.UID != "" && ref.Namespace == c.Namespace && ref.Name == c.Name && ref.UID == c.UID
}

func volumeInUse(pv *corev1.PersistentVolume) bool {
	return pv.Status.Phase == corev1.VolumeBound || pv.Status.Phase == corev1.VolumeReleased ||
		(pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID != "")
}

func claimInUse(c *corev1.PersistentVolumeClaim) bool {
	return c.Spec.VolumeName != "" || c.Status.Phase == corev1.ClaimBound
}

// Check judges one write that changed the world (an admitted create or update; a delete is not
// judged by the engine, so not here either) and returns the invariants it broke.
func Check(before, after *World, s Step) []Violation {
	var out []Violation
	add := func(inv, format string, args ...any) {
		out = append(out, Violation{Invariant: inv, Message: fmt.Sprintf(format, args...)})
	}
	switch s.Kind {
	case policy.KindPersistentVolume:
		checkVolume(before, after, s, add)
	case policy.KindPersistentVolumeClaim:
		checkClaim(before, after, s, add)
	}
	return out
}

func checkVolume(before, after *World, s Step, add func(inv, format string, args ...any)) {
	old, cur := before.PVs[s.Name], after.PVs[s.Name]
	created := s.Verb == Create
	provisioned := created && cur != nil && has(cur.ObjectMeta, annProvisionedBy)
	var oldRef, curRef *corev1.ObjectReference
	if old != nil {
		oldRef = old.Spec.ClaimRef
	}
	if cur != nil {
		curRef = cur.Spec.ClaimRef
	}
	refChanged := cur != nil && curRef != nil && !sameRef(oldRef, curRef)
	// newLink: the write links the volume to a claim it was not linked to (a dropped uid keeps
	// the old reservation and links nothing).
	newLink := refChanged && !uidDropped(oldRef, curRef)

	// handed: the write is a populator's hand-off (docs/rules.md), which I1 to I3 allow.
	handed := oldRef != nil && populatorHandOff(before, s.Name, live(before, oldRef.Namespace, oldRef.Name, string(oldRef.UID)), curRef)

	// I1: a bound pair stays bound until its claim is deleted. A volume removed by this write
	// (its last finalizer dropped) is I9's business.
	if old != nil && cur != nil && oldRef != nil && !handed {
		if c := live(before, oldRef.Namespace, oldRef.Name, string(oldRef.UID)); c != nil && boundTo(old, c) && !sameRef(oldRef, curRef) {
			add("I1", "PersistentVolume %s was in a bound pair with PersistentVolumeClaim %s/%s and its claimRef became %s",
				s.Name, c.Namespace, c.Name, refString(curRef))
		}
	}

	// I2: a volume a live bind-completed claim names may only be linked to that claim, with its
	// uid.
	if refChanged && !handed {
		var owners []*corev1.PersistentVolumeClaim
		for _, c := range before.SortedPVCs() {
			if has(c.ObjectMeta, annBindCompleted) && c.Spec.VolumeName == s.Name {
				owners = append(owners, c)
			}
		}
		if len(owners) > 0 && !slices.ContainsFunc(owners, func(c *corev1.PersistentVolumeClaim) bool {
			return curRef.Namespace == c.Namespace && curRef.Name == c.Name && curRef.UID == c.UID
		}) {
			add("I2", "PersistentVolume %s is named by bind-completed PersistentVolumeClaim %s/%s (uid %s) and was linked to %s",
				s.Name, owners[0].Namespace, owners[0].Name, owners[0].UID, refString(curRef))
		}
	}

	// I3: a link with uid to a live claim is kept, unless that claim names another volume
	// (upstream's rollback). Links to claims that are gone may change freely.
	if old != nil && cur != nil && oldRef != nil && oldRef.UID != "" && !sameRef(oldRef, curRef) && !handed {
		if c := live(before, oldRef.Namespace, oldRef.Name, string(oldRef.UID)); c != nil &&
			(c.Spec.VolumeName == "" || c.Spec.VolumeName == s.Name) {
			add("I3", "PersistentVolume %s was linked with uid to live PersistentVolumeClaim %s/%s (which names %q) and its claimRef became %s",
				s.Name, c.Namespace, c.Name, c.Spec.VolumeName, refString(curRef))
		}
	}

	// I4: a uid a write sets or changes is the uid of the live claim it names, but for a
	// provisioner saving the volume it provisioned.
	if refChanged && curRef.UID != "" && !provisioned {
		if c := after.PVC(curRef.Namespace, curRef.Name); c == nil || c.UID != curRef.UID {
			now := "no such claim"
			if c != nil {
				now = "its uid is " + string(c.UID)
			}
			if oldRef != nil && oldRef.UID == curRef.UID {
				add("I4", "PersistentVolume %s's claimRef was re-pointed from %s to %s, keeping a uid that is not the live claim's (%s)",
					s.Name, refString(oldRef), refString(curRef), now)
			} else {
				add("I4", "PersistentVolume %s's claimRef was set to %s, but %s", s.Name, refString(curRef), now)
			}
		}
	}

	// I5 (volume side): a volume is never linked to a live claim that is in a bound pair with
	// another volume, but for a provisioner saving the volume it provisioned.
	if newLink && !provisioned {
		if c := liveRef(after, curRef); c != nil && c.Spec.VolumeName != "" && c.Spec.VolumeName != s.Name {
			if other := after.PVs[c.Spec.VolumeName]; other != nil && boundTo(other, c) {
				add("I5", "PersistentVolume %s was linked to PersistentVolumeClaim %s/%s, which is in a bound pair with PersistentVolume %s",
					s.Name, c.Namespace, c.Name, other.Name)
			}
		}
	}

	// I11: a volume is never newly linked to a live claim not bound yet that another volume is
	// already linked to with its uid (one claim, two volumes), but for a provisioner saving the
	// volume it provisioned, and for the volume the claim completed its binding to.
	if newLink && !provisioned {
		if c := live(after, curRef.Namespace, curRef.Name, ""); c != nil && c.Spec.VolumeName == "" && (curRef.UID == "" || curRef.UID == c.UID) &&
			!(has(c.ObjectMeta, annBindCompleted) && c.Spec.VolumeName == s.Name) {
			for _, other := range before.SortedPVs() {
				if other.Name != s.Name && other.DeletionTimestamp == nil && other.Spec.ClaimRef != nil &&
					sameRef(other.Spec.ClaimRef, &corev1.ObjectReference{Namespace: c.Namespace, Name: c.Name, UID: c.UID}) {
					add("I11", "PersistentVolume %s was linked to PersistentVolumeClaim %s/%s, which PersistentVolume %s is already linked to with its uid",
						s.Name, c.Namespace, c.Name, other.Name)
					break
				}
			}
		}
	}

	// I7: a pair newly linked by the write fits. The one exception is PVG018's: a provisioner's
	// save may carry the VolumeAttributesClass the
	// claim had when provisioning began (the claim's class is mutable while it is unbound), as
	// long as the claim does not name the volume (then nothing pairs them until the classes agree).
	if newLink {
		if c := liveRef(after, curRef); c != nil {
			relink := has(c.ObjectMeta, annBindCompleted) && c.Spec.VolumeName == s.Name
			why := misfit(after, c, cur, relink)
			if provisioned && c.Spec.VolumeName != s.Name && strings.HasPrefix(why, "volumeAttributesClassName") {
				why = ""
			}
			if why != "" {
				add("I7", "PersistentVolume %s was linked to PersistentVolumeClaim %s/%s, which it does not fit: %s", s.Name, c.Namespace, c.Name, why)
			}
		}
	}

	// I12: a write that changes the node affinity of a volume linked to a live claim (and keeps
	// the link) leaves admitted each node the old affinity admitted that the claim is scheduled to
	// (selected-node) or that a pod using the claim is on (scheduled, not finished).
	if old != nil && cur != nil && curRef != nil && sameRef(oldRef, curRef) &&
		!equality.Semantic.DeepEqual(old.Spec.NodeAffinity, cur.Spec.NodeAffinity) {
		if c := liveRef(after, curRef); c != nil {
			for _, at := range claimNodes(after, c) {
				if reaches(after, old, at.node) && !reaches(after, cur, at.node) {
					add("I12", "PersistentVolume %s's node affinity became %s, which does not admit node %s, where %s", s.Name, affinityString(cur), at.node, at.why)
				}
			}
		}
	}

	// I8: Retain -> Delete/Recycle of a volume in use is confirmed by the same write.
	if old != nil && cur != nil && old.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRetain &&
		(cur.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete ||
			cur.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRecycle) && volumeInUse(old) {
		to := string(cur.Spec.PersistentVolumeReclaimPolicy)
		was, is := old.Annotations[annConfirm], cur.Annotations[annConfirm]
		if is != to || was == is {
			add("I8", "PersistentVolume %s (in use, phase %q, claimRef %s) went from Retain to %s with %s %q before and %q after the write",
				s.Name, old.Status.Phase, refString(oldRef), to, annConfirm, was, is)
		}
	}

	// I9: protection finalizers stay on a volume in use unless a known controller removes them,
	// or the volume is being deleted and not linked with uid to a live claim. Two more exceptions
	// keep upstream flows admitted (PVG012 allows them too): a live claim that went to another
	// volume holds nothing on the one being
	// deleted (the provisioner's race, claim bound elsewhere), and the external provisioner's
	// finalizer guards nothing on a volume whose reclaim policy is not Delete (the provisioner
	// drops it itself then).
	if old != nil && !knownControllers[s.Who] && volumeInUse(old) {
		holder := liveRef(before, oldRef)
		if oldRef == nil || oldRef.UID == "" || (holder != nil && holder.Spec.VolumeName != "" && holder.Spec.VolumeName != s.Name) {
			holder = nil
		}
		if old.DeletionTimestamp == nil || holder != nil {
			policy := old.Spec.PersistentVolumeReclaimPolicy
			if cur != nil {
				policy = cur.Spec.PersistentVolumeReclaimPolicy
			}
			for _, f := range removedFinalizers(&old.ObjectMeta, cur) {
				if f == FinProvisioner && policy != corev1.PersistentVolumeReclaimDelete {
					continue
				}
				add("I9", "%s removed finalizer %s from PersistentVolume %s, which is in use (phase %q, claimRef %s)",
					s.Who, f, s.Name, old.Status.Phase, refString(oldRef))
			}
		}
	}

	// I10: a malformed claimRef is never admitted.
	if refChanged && (curRef.Name == "" || curRef.Namespace == "") {
		add("I10", "PersistentVolume %s's claimRef was set to %s, which has no name or no namespace", s.Name, refString(curRef))
	}
}

// populatorHandOff reports whether re-linking volume from the live claim from to the reference
// to is the hand-off of a populated volume, as docs/rules.md states it: the volume goes, with
// the uid, to a live claim that from was made for (from's name is some prefix, a dash and that
// claim's uid), which has a data source, no volume of its own and no other volume linked to it.
func populatorHandOff(w *World, volume string, from *corev1.PersistentVolumeClaim, to *corev1.ObjectReference) bool {
	if from == nil || to == nil || to.UID == "" || !strings.HasSuffix(from.Name, "-"+string(to.UID)) {
		return false
	}
	target := live(w, to.Namespace, to.Name, string(to.UID))
	if target == nil || target.UID == from.UID || target.Spec.VolumeName != "" ||
		(target.Spec.DataSource == nil && target.Spec.DataSourceRef == nil) {
		return false
	}
	for _, pv := range w.SortedPVs() {
		if pv.Name != volume && pv.Spec.ClaimRef != nil && sameRef(pv.Spec.ClaimRef, &corev1.ObjectReference{Namespace: target.Namespace, Name: target.Name, UID: target.UID}) {
			return false
		}
	}
	return true
}

func checkClaim(before, after *World, s Step, add func(inv, format string, args ...any)) {
	old, cur := before.PVC(s.Namespace, s.Name), after.PVC(s.Namespace, s.Name)
	oldVol := ""
	if old != nil {
		oldVol = old.Spec.VolumeName
	}

	if cur != nil && cur.Spec.VolumeName != "" && cur.Spec.VolumeName != oldVol {
		pv := after.PVs[cur.Spec.VolumeName]
		// I5 (claim side): no live claim names a volume linked to another live claim.
		if pv != nil {
			if other := liveRef(after, pv.Spec.ClaimRef); other != nil && (other.Namespace != cur.Namespace || other.Name != cur.Name) {
				add("I5", "PersistentVolumeClaim %s/%s now names PersistentVolume %s, which is linked to live PersistentVolumeClaim %s/%s",
					s.Namespace, s.Name, pv.Name, other.Namespace, other.Name)
			}
		}
		// I7: the pair the write links fits.
		if pv != nil {
			if why := misfit(after, cur, pv, false); why != "" {
				if has(cur.ObjectMeta, annBindCompleted) && (old == nil || !has(old.ObjectMeta, annBindCompleted)) {
					why += " (the same write makes the claim bind-completed)"
				}
				add("I7", "PersistentVolumeClaim %s/%s now names PersistentVolume %s, which does not fit it: %s", s.Namespace, s.Name, pv.Name, why)
			}
		}
	}

	// I6: once bind-completed, volumeName never changes and the annotation stays.
	if old != nil && cur != nil && has(old.ObjectMeta, annBindCompleted) && old.Spec.VolumeName != "" {
		if cur.Spec.VolumeName != old.Spec.VolumeName {
			add("I6", "bind-completed PersistentVolumeClaim %s/%s changed spec.volumeName from %q to %q", s.Namespace, s.Name, old.Spec.VolumeName, cur.Spec.VolumeName)
		}
		if !has(cur.ObjectMeta, annBindCompleted) {
			add("I6", "PersistentVolumeClaim %s/%s bound to %s lost its %s annotation", s.Namespace, s.Name, old.Spec.VolumeName, annBindCompleted)
		}
	}

	// I9: protection finalizers stay on a claim in use unless a known controller removes them.
	if old != nil && !knownControllers[s.Who] && claimInUse(old) {
		var m *metav1.ObjectMeta
		if cur != nil {
			m = &cur.ObjectMeta
		}
		for _, f := range removedFinalizersMeta(&old.ObjectMeta, m) {
			add("I9", "%s removed finalizer %s from PersistentVolumeClaim %s/%s, which is in use (volumeName %q, phase %q)",
				s.Who, f, s.Namespace, s.Name, old.Spec.VolumeName, old.Status.Phase)
		}
	}
}

// removedFinalizers lists the protection finalizers a write dropped from a volume; a volume the
// write removed (it was being deleted and lost its last finalizer) dropped them all.
func removedFinalizers(old *metav1.ObjectMeta, cur *corev1.PersistentVolume) []string {
	if cur == nil {
		return removedFinalizersMeta(old, nil)
	}
	return removedFinalizersMeta(old, &cur.ObjectMeta)
}

func removedFinalizersMeta(old, cur *metav1.ObjectMeta) []string {
	var out []string
	for _, f := range protectionFinalizers {
		if slices.Contains(old.Finalizers, f) && (cur == nil || !slices.Contains(cur.Finalizers, f)) {
			out = append(out, f)
		}
	}
	return out
}

// misfit says why a volume does not fit a claim at bind (I7), or "" when it fits. relink is a
// volume re-linked to the bind-completed claim that names it: its capacity is compared with what
// the claim was given, since a claim mid-expansion asks for more than its volume has yet.
func misfit(w *World, c *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, relink bool) string {
	if mode(c.Spec.VolumeMode) != mode(pv.Spec.VolumeMode) {
		return fmt.Sprintf("volumeMode %s vs %s", mode(c.Spec.VolumeMode), mode(pv.Spec.VolumeMode))
	}
	for _, m := range c.Spec.AccessModes {
		if !slices.Contains(pv.Spec.AccessModes, m) {
			return fmt.Sprintf("access mode %s not offered (volume has %v)", m, pv.Spec.AccessModes)
		}
	}
	want, what := c.Spec.Resources.Requests[corev1.ResourceStorage], "request"
	if given, ok := c.Status.Capacity[corev1.ResourceStorage]; relink && ok {
		want, what = given, "status.capacity"
	}
	if have := pv.Spec.Capacity[corev1.ResourceStorage]; have.Cmp(want) < 0 {
		return fmt.Sprintf("capacity %s below the claim's %s %s", have.String(), what, want.String())
	}
	if node := c.Annotations[annSelectedNode]; node != "" && pv.Spec.NodeAffinity != nil && pv.Spec.NodeAffinity.Required != nil {
		if n := w.Nodes[node]; n != nil {
			if ok, err := corev1helpers.MatchNodeSelectorTerms(n, pv.Spec.NodeAffinity.Required); err != nil || !ok {
				return fmt.Sprintf("node affinity does not admit selected node %s", node)
			}
		} else if !mayAdmit(pv.Spec.NodeAffinity.Required, node) {
			return fmt.Sprintf("node affinity admits no node named %s (a node the world does not hold)", node)
		}
	}
	// The class, like the capacity, of a re-link is compared with what the claim was given: while
	// the external-resizer modifies a bound volume to the class the claim's spec now names, the
	// volume keeps the class the claim's status records until the change is done.
	given := []string{vac(c.Spec.VolumeAttributesClassName)}
	if relink {
		given = append(given, vac(c.Status.CurrentVolumeAttributesClassName))
		if m := c.Status.ModifyVolumeStatus; m != nil {
			given = append(given, m.TargetVolumeAttributesClassName)
		}
	}
	if !slices.Contains(given, vac(pv.Spec.VolumeAttributesClassName)) {
		return fmt.Sprintf("volumeAttributesClassName %q vs %q", vac(c.Spec.VolumeAttributesClassName), vac(pv.Spec.VolumeAttributesClassName))
	}
	return ""
}

func vac(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// mayAdmit reports whether a node selector may admit a node known only by its name: every
// kubelet labels its node kubernetes.io/hostname=<name>, and nothing can be assumed of its other
// labels, so a term fails only on a hostname requirement (or a metadata.name field) that the name
// does not meet.
func mayAdmit(sel *corev1.NodeSelector, node string) bool {
	for _, term := range sel.NodeSelectorTerms {
		ok := true
		for _, r := range term.MatchExpressions {
			if r.Key == "kubernetes.io/hostname" && !requirementHolds(r, node) {
				ok = false
			}
		}
		for _, r := range term.MatchFields {
			if r.Key == "metadata.name" && !requirementHolds(r, node) {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// claimAt is a node a claim is used on, and why.
type claimAt struct{ node, why string }

// claimNodes are the nodes a claim is used on: its selected node, and the nodes of the pods of
// its namespace whose volumes name it, scheduled and not finished.
func claimNodes(w *World, c *corev1.PersistentVolumeClaim) []claimAt {
	var out []claimAt
	if n := c.Annotations[annSelectedNode]; n != "" {
		out = append(out, claimAt{n, fmt.Sprintf("PersistentVolumeClaim %s/%s is scheduled", c.Namespace, c.Name)})
	}
	for _, k := range slices.Sorted(maps.Keys(w.Pods)) {
		p := w.Pods[k]
		if p.Namespace != c.Namespace || p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == c.Name {
				out = append(out, claimAt{p.Spec.NodeName, fmt.Sprintf("pod %s/%s using PersistentVolumeClaim %s is", p.Namespace, p.Name, c.Name)})
			}
		}
	}
	return out
}

// reaches reports whether a volume's node affinity admits the node of that name: by its labels
// when the world holds it, else by its name (mayAdmit).
func reaches(w *World, pv *corev1.PersistentVolume, node string) bool {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return true
	}
	if n := w.Nodes[node]; n != nil {
		ok, err := corev1helpers.MatchNodeSelectorTerms(n, pv.Spec.NodeAffinity.Required)
		return err == nil && ok
	}
	return mayAdmit(pv.Spec.NodeAffinity.Required, node)
}

func affinityString(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return "none"
	}
	return describeSelector(pv.Spec.NodeAffinity.Required)
}

func requirementHolds(r corev1.NodeSelectorRequirement, value string) bool {
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return slices.Contains(r.Values, value)
	case corev1.NodeSelectorOpNotIn:
		return !slices.Contains(r.Values, value)
	case corev1.NodeSelectorOpDoesNotExist:
		return false
	}
	return true
}
