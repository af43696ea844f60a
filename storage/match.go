package storage

import (
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Pair predicates: the at-bind checks of PVG001, PVG005 to PVG009 and PVG018 (package policy), so
// that the binder chooses volumes by exactly the rules the webhook enforces. The rules call them
// too; only the messages are the rules' own.

// ModesMatch reports whether volume and claim have the same volumeMode (PVG001).
func ModesMatch(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) bool {
	return VolumeMode(pv.Spec.VolumeMode) == VolumeMode(pvc.Spec.VolumeMode)
}

// CapacityFits reports whether the volume offers at least what the claim requests (PVG005).
func CapacityFits(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) bool {
	offer, request := VolumeCapacity(pv), ClaimRequest(pvc)
	return offer.Cmp(request) >= 0
}

// AccessModesFit reports whether the volume offers every access mode the claim asks for (PVG006).
func AccessModesFit(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) bool {
	return len(MissingAccessModes(pv, pvc)) == 0
}

// MissingAccessModes lists the access modes the claim asks for that the volume does not offer
// (what AccessModesFit finds wanting).
func MissingAccessModes(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) []corev1.PersistentVolumeAccessMode {
	var out []corev1.PersistentVolumeAccessMode
	for _, m := range pvc.Spec.AccessModes {
		if !slices.Contains(pv.Spec.AccessModes, m) && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// ClassesMatch reports whether volume and claim are of the same storage class (PVG007).
func ClassesMatch(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) bool {
	return ClaimClass(pvc) == VolumeClass(pv)
}

// AttributesClassesMatch reports whether volume and claim name the same VolumeAttributesClass
// (PVG018). Unset and "" both mean "none", as upstream's binder compares them; with the class
// GA upstream, a claim that names one never takes a volume of another or of none, and a claim
// that names none never takes a volume that has one.
func AttributesClassesMatch(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) bool {
	return ClaimAttributesClass(pvc) == VolumeAttributesClass(pv)
}

// ClaimAttributesClass is the VolumeAttributesClass a claim asks for, "" for none.
func ClaimAttributesClass(pvc *corev1.PersistentVolumeClaim) string {
	if pvc.Spec.VolumeAttributesClassName == nil {
		return ""
	}
	return *pvc.Spec.VolumeAttributesClassName
}

// VolumeAttributesClass is the VolumeAttributesClass a volume has, "" for none.
func VolumeAttributesClass(pv *corev1.PersistentVolume) string {
	if pv.Spec.VolumeAttributesClassName == nil {
		return ""
	}
	return *pv.Spec.VolumeAttributesClassName
}

// SelectorAdmits reports whether the claim's label selector, if any, matches the volume (PVG008);
// an invalid selector is an error.
func SelectorAdmits(pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) (bool, error) {
	if match, ok := SelectorMatches(pvc.Spec.Selector, pv.Labels); ok {
		return match, nil
	}
	sel, err := ParseClaimSelector(pvc)
	if err != nil {
		return false, err
	}
	return sel.Admits(pv), nil
}

// ClaimSelector is a claim's label selector parsed once, to be matched against many volumes (the
// binder's planner asks about every pair of a class, and parsing cost more than matching). The
// zero value, a claim without a selector, admits every volume.
type ClaimSelector struct{ sel labels.Selector }

// ParseClaimSelector parses the claim's spec.selector (PVG008); an invalid one is an error.
func ParseClaimSelector(pvc *corev1.PersistentVolumeClaim) (ClaimSelector, error) {
	if pvc.Spec.Selector == nil {
		return ClaimSelector{}, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(pvc.Spec.Selector)
	if err != nil {
		return ClaimSelector{}, err
	}
	return ClaimSelector{sel: sel}, nil
}

// Admits reports whether the selector matches the volume's labels.
func (s ClaimSelector) Admits(pv *corev1.PersistentVolume) bool {
	return s.sel == nil || s.sel.Matches(labels.Set(pv.Labels))
}

// String is the selector as kubectl writes one ("" for none).
func (s ClaimSelector) String() string {
	if s.sel == nil {
		return ""
	}
	return s.sel.String()
}

// VolumeAffinity is a volume's required node affinity parsed once, to be matched against many
// nodes or claims. The zero value, a volume without one, admits every node.
type VolumeAffinity struct {
	sel   *nodeaffinity.NodeSelector
	terms []corev1.NodeSelectorTerm
}

// ParseVolumeAffinity parses the volume's spec.nodeAffinity.required (PVG009); an invalid one is
// an error naming the field.
func ParseVolumeAffinity(pv *corev1.PersistentVolume) (VolumeAffinity, error) {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return VolumeAffinity{}, nil
	}
	sel, err := nodeaffinity.NewNodeSelector(pv.Spec.NodeAffinity.Required,
		field.WithPath(field.NewPath("spec", "nodeAffinity", "required")))
	if err != nil {
		return VolumeAffinity{}, err
	}
	return VolumeAffinity{sel: sel, terms: pv.Spec.NodeAffinity.Required.NodeSelectorTerms}, nil
}

// Admits reports whether the affinity admits the node; a nil node is admitted only by a volume
// without affinity.
func (a VolumeAffinity) Admits(node *corev1.Node) bool {
	return a.sel == nil || node != nil && a.sel.Match(node)
}

// AssumedNode is what can be known of a node from its name alone, for judging node affinity
// when the Node object is not at hand (a dump of volumes and claims holds no nodes; live, a node
// may not be in the cache yet): its metadata.name, and the label kubernetes.io/hostname, which
// every kubelet sets on the Node it registers to its hostname, and which is the node's name
// unless an in-tree cloud provider names the node or --node-labels overrides the label. Every
// kubelet sets kubernetes.io/os and kubernetes.io/arch too, but their values cannot be known, and
// nor can zones or any other label.
func AssumedNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
}

// RefusesAssumedNode reports whether the affinity certainly does not admit the node of that name
// when nothing but AssumedNode(name) is known of it: every term asks of kubernetes.io/hostname or
// metadata.name something the name does not satisfy (or asks nothing at all, which upstream
// matches with no node). A term's requirements on other labels are not judged, since the node may
// well carry them: so a volume pinned to another host is refused, and a volume pinned to a zone
// is not.
func (a VolumeAffinity) RefusesAssumedNode(name string) bool {
	if a.sel == nil {
		return false
	}
	node := AssumedNode(name)
	for _, term := range a.terms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue // matches no node
		}
		known := corev1.NodeSelectorTerm{MatchFields: term.MatchFields}
		for _, req := range term.MatchExpressions {
			if req.Key == corev1.LabelHostname {
				known.MatchExpressions = append(known.MatchExpressions, req)
			}
		}
		if len(known.MatchExpressions) == 0 && len(known.MatchFields) == 0 {
			return false // nothing known to judge this term by: the node may satisfy it
		}
		// The term parsed as part of the whole selector, so its known part parses too.
		sel, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{known}})
		if err != nil || sel.Match(node) {
			return false
		}
	}
	return true
}

// Hosts lists the hosts the affinity pins the volume to, when every term that can match a node
// names the nodes it admits: by kubernetes.io/hostname or metadata.name with operator In (several
// such requirements in one term admit the names they share), as the local static provisioner's
// node-cleanup controller reads a local volume's node (GetLocalPersistentVolumeNodeNames). ok is
// false when some term may admit a node by other labels alone (a zone: a node added later may
// carry them), or the volume has no affinity: then which nodes it admits is not a list of names.
func (a VolumeAffinity) Hosts() (hosts []string, ok bool) {
	if a.sel == nil {
		return nil, false
	}
	for _, term := range a.terms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue // matches no node
		}
		// A host is named by its label or by its Node's name; a term that names it both ways
		// counts both names, so that a node that exists by either is never taken for gone.
		var names []string
		named := false
		for _, key := range []string{corev1.LabelHostname, metav1.ObjectNameField} {
			reqs := term.MatchExpressions
			if key == metav1.ObjectNameField {
				reqs = term.MatchFields
			}
			var values []string
			in := false
			for _, req := range reqs {
				if req.Key != key || req.Operator != corev1.NodeSelectorOpIn {
					continue
				}
				if !in {
					values, in = slices.Clone(req.Values), true
					continue
				}
				values = slices.DeleteFunc(values, func(n string) bool { return !slices.Contains(req.Values, n) })
			}
			names, named = append(names, values...), named || in
		}
		if !named {
			return nil, false
		}
		for _, n := range names {
			if !slices.Contains(hosts, n) {
				hosts = append(hosts, n)
			}
		}
	}
	slices.Sort(hosts)
	return hosts, true
}

// Satisfies explains why a volume cannot serve a claim by the checks upstream's binder also makes
// (capacity, class, VolumeAttributesClass, volume mode, access modes), in that order and in the
// words upstream's events use, so that a user reading pvguard's VolumeMismatch event sees the
// reason upstream would give; nil when it can.
func Satisfies(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) error {
	switch {
	case !CapacityFits(pv, pvc):
		return errors.New("requested PV is too small")
	case !ClassesMatch(pv, pvc):
		return errors.New("storageClassName does not match")
	case !AttributesClassesMatch(pv, pvc):
		return errors.New("volumeAttributesClassName does not match")
	case !ModesMatch(pv, pvc):
		return errors.New("incompatible volumeMode")
	case !AccessModesFit(pv, pvc):
		return errors.New("incompatible accessMode")
	}
	return nil
}

// VolumeClass is a volume's class, honouring the deprecated beta annotation as upstream does.
func VolumeClass(pv *corev1.PersistentVolume) string {
	if c, ok := pv.Annotations[AnnBetaStorageClass]; ok {
		return c
	}
	return pv.Spec.StorageClassName
}

// ClaimClass is a claim's class, honouring the deprecated beta annotation; nil and "" both mean
// "no class" for matching, as upstream does.
func ClaimClass(pvc *corev1.PersistentVolumeClaim) string {
	if c, ok := pvc.Annotations[AnnBetaStorageClass]; ok {
		return c
	}
	if pvc.Spec.StorageClassName != nil {
		return *pvc.Spec.StorageClassName
	}
	return ""
}

// IsDefaultClass reports whether a StorageClass is marked as the cluster default.
func IsDefaultClass(sc *storagev1.StorageClass) bool {
	return sc.Annotations[AnnDefaultClass] == "true" || sc.Annotations[AnnBetaDefaultClass] == "true"
}

// SelectorMatches matches a label selector against labels as the labels.Selector that
// metav1.LabelSelectorAsSelector builds would, without building it (building it was most of a
// selecting claim's allocations in admission). ok is false for a selector it does
// not judge, one with an invalid key, value or operator: LabelSelectorAsSelector refuses those,
// and the caller builds it for the error.
func SelectorMatches(sel *metav1.LabelSelector, set map[string]string) (match, ok bool) {
	if sel == nil {
		return false, false // LabelSelectorAsSelector(nil) selects nothing; left to it
	}
	match = true
	for k, v := range sel.MatchLabels {
		if len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
			return false, false
		}
		if got, has := set[k]; !has || got != v {
			match = false
		}
	}
	for _, e := range sel.MatchExpressions {
		if len(validation.IsQualifiedName(e.Key)) > 0 {
			return false, false
		}
		got, has := set[e.Key]
		switch e.Operator {
		case metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn:
			if len(e.Values) == 0 {
				return false, false
			}
			in := false
			for _, v := range e.Values {
				if len(validation.IsValidLabelValue(v)) > 0 {
					return false, false
				}
				in = in || has && got == v
			}
			if in != (e.Operator == metav1.LabelSelectorOpIn) {
				match = false
			}
		case metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist:
			if len(e.Values) != 0 {
				return false, false
			}
			if has != (e.Operator == metav1.LabelSelectorOpExists) {
				match = false
			}
		default:
			return false, false
		}
	}
	return match, true
}

// VolumeMode returns the effective mode; unset means Filesystem.
func VolumeMode(m *corev1.PersistentVolumeMode) corev1.PersistentVolumeMode {
	if m == nil || *m == "" {
		return corev1.PersistentVolumeFilesystem
	}
	return *m
}

// ClaimRequest is the storage a claim asks for.
func ClaimRequest(pvc *corev1.PersistentVolumeClaim) resource.Quantity {
	return pvc.Spec.Resources.Requests[corev1.ResourceStorage]
}

// VolumeCapacity is the storage a volume offers.
func VolumeCapacity(pv *corev1.PersistentVolume) resource.Quantity {
	return pv.Spec.Capacity[corev1.ResourceStorage]
}

// ClaimCapacity is what a bound claim has been given: status.capacity once the binder or the
// resizer has recorded it, else the request.
func ClaimCapacity(pvc *corev1.PersistentVolumeClaim) resource.Quantity {
	if q, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok {
		return q
	}
	return ClaimRequest(pvc)
}
