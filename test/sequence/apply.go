package sequence

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pvguard/pvguard/policy"
)

// Verb is how a step writes: create, update of the main resource, update of the status
// subresource, or delete.
type Verb string

const (
	Create       Verb = "create"
	Update       Verb = "update"
	UpdateStatus Verb = "update/status"
	Delete       Verb = "delete"
)

// Step is one write. For an update, Patch is the JSON merge patch from the object as it was when
// the step was made to the object the writer sent; for a create it is the whole object.
type Step struct {
	Who       Identity        `json:"who"`
	Verb      Verb            `json:"verb"`
	Kind      policy.Kind     `json:"kind"`
	Namespace string          `json:"namespace,omitempty"`
	Name      string          `json:"name"`
	What      string          `json:"what,omitempty"`
	Patch     json.RawMessage `json:"patch,omitempty"`
}

// String renders a step on one line: who, verb, object, what it means, and the field changes.
func (s Step) String() string {
	obj := s.Name
	if s.Namespace != "" {
		obj = s.Namespace + "/" + s.Name
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s %s", s.Who, s.Verb, s.Kind, obj)
	if s.What != "" {
		fmt.Fprintf(&b, " (%s)", s.What)
	}
	switch {
	case s.Verb == Create:
		if o := s.object(); o != nil {
			fmt.Fprintf(&b, ": %s", DescribeObject(o))
		}
	case len(s.Patch) > 0:
		fmt.Fprintf(&b, ": %s", s.Patch)
	}
	return b.String()
}

// object decodes the object a create step carries, or returns nil.
func (s Step) object() runtime.Object {
	var o runtime.Object
	switch s.Kind {
	case policy.KindPersistentVolume:
		o = &corev1.PersistentVolume{}
	case policy.KindPersistentVolumeClaim:
		o = &corev1.PersistentVolumeClaim{}
	default:
		return nil
	}
	if err := json.Unmarshal(s.Patch, o); err != nil {
		return nil
	}
	return o
}

// Result is what became of a step.
type Result string

const (
	// Admitted: the engine found nothing to deny and the write changed the world.
	Admitted Result = "admitted"
	// Refused: the engine denied the write.
	Refused Result = "refused"
	// APIServer: the kube-apiserver's own validation refuses the write before any webhook sees it.
	APIServer Result = "refused by apiserver"
	// Skipped: the step's object does not exist (or already does, for a create), which happens
	// when a shrunk sequence dropped the step that made it.
	Skipped Result = "skipped"
	// Errored: the engine returned an error, which is a bug whatever the write (I10).
	Errored Result = "engine error"
)

// Outcome is a step and what became of it.
type Outcome struct {
	Step     Step
	Result   Result
	Reason   string
	Decision policy.Decision
	// Review is what the engine judged (nil when the write never reached it), and Before the
	// world it judged it in.
	Review *policy.Review
	Before *World
}

func (o Outcome) String() string {
	s := fmt.Sprintf("[%s", o.Result)
	if o.Reason != "" {
		s += " " + o.Reason
	}
	if w := o.Warned(); w != "" {
		s += ", warns " + w
	}
	return s + "] " + o.Step.String()
}

// Warned lists the rules that warned about the step.
func (o Outcome) Warned() string {
	var ids []string
	for _, f := range o.Decision.Warn {
		ids = append(ids, string(f.Rule))
	}
	return strings.Join(slices.Compact(ids), ",")
}

// deletionTime is the deletionTimestamp a delete with finalizers sets; the model has no clock.
var deletionTime = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

// Finalizers the kube-apiserver's admission plugins add on create, and the other protection
// finalizers of I9.
const (
	FinPV          = "kubernetes.io/pv-protection"
	FinPVC         = "kubernetes.io/pvc-protection"
	FinPVCtrl      = "kubernetes.io/pv-controller"
	FinProvisioner = "external-provisioner.volume.kubernetes.io/finalizer"
)

// Apply runs one step against a world: the apiserver's handling of the verb, then the engine for
// creates and updates. It returns the world after the step (the same world when the step did not
// change it) and the outcome.
func Apply(e *policy.Engine, w *World, s Step) (*World, Outcome) {
	out := Outcome{Step: s}
	var (
		rev  *policy.Review
		next func(*World)
	)
	var err error
	switch s.Kind {
	case policy.KindPersistentVolume:
		rev, next, out.Reason, err = preparePV(w, s)
	case policy.KindPersistentVolumeClaim:
		rev, next, out.Reason, err = preparePVC(w, s)
	default:
		err = fmt.Errorf("kind %q is not modelled", s.Kind)
	}
	switch {
	case err != nil:
		out.Result, out.Reason = Skipped, err.Error()
		return w, out
	case rev == nil:
		// The apiserver refused it, or the object is missing.
		if strings.HasPrefix(out.Reason, "no ") {
			out.Result = Skipped
		} else {
			out.Result = APIServer
		}
		return w, out
	}
	rev.User = Users[s.Who]
	d, err := e.Admit(rev, w.View())
	out.Decision, out.Review, out.Before = d, rev, w
	if err != nil {
		out.Result, out.Reason = Errored, err.Error()
		return w, out
	}
	if !d.Allowed() {
		ids := make([]string, 0, len(d.Deny))
		for _, f := range d.Deny {
			ids = append(ids, string(f.Rule))
		}
		out.Result, out.Reason = Refused, strings.Join(slices.Compact(ids), ",")
		return w, out
	}
	nw := w.Clone()
	next(nw)
	out.Result = Admitted
	return nw, out
}

// preparePV turns a volume step into the review the webhook would see and the change to make
// if it is admitted; a nil review with a reason means the apiserver refused it or the object is
// missing.
func preparePV(w *World, s Step) (*policy.Review, func(*World), string, error) {
	old := w.PVs[s.Name]
	rev := &policy.Review{Kind: policy.KindPersistentVolume, OldPV: old}
	switch s.Verb {
	case Create:
		if old != nil {
			return nil, nil, "AlreadyExists", nil
		}
		pv := &corev1.PersistentVolume{}
		if err := json.Unmarshal(s.Patch, pv); err != nil {
			return nil, nil, "", fmt.Errorf("decoding the volume of step %q: %w", s.String(), err)
		}
		pv.Name = s.Name
		// The PersistentVolume strategy drops a created volume's status (phase Pending), and
		// the PersistentVolumeClaimResize/StorageObjectInUseProtection admission adds
		// pv-protection before any validating webhook runs.
		pv.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending}
		pv.DeletionTimestamp = nil
		addFinalizer(&pv.ObjectMeta, FinPV)
		if reason := pvInvalid(pv); reason != "" {
			return nil, nil, reason, nil
		}
		rev.Operation, rev.PV, rev.OldPV = policy.OperationCreate, pv, nil
		return rev, func(nw *World) { nw.PVs[pv.Name] = pv }, "", nil
	case Update, UpdateStatus:
		if old == nil {
			return nil, nil, "no such PersistentVolume", nil
		}
		pv := &corev1.PersistentVolume{}
		if err := applyPatch(old, s.Patch, pv); err != nil {
			return nil, nil, "", fmt.Errorf("step %q: %w", s.String(), err)
		}
		if s.Verb == UpdateStatus {
			// The status strategy resets only the spec: the write's metadata is kept, finalizers
			// and annotations included.
			pv.Spec = old.Spec
			rev.SubResource = "status"
		} else {
			pv.Status = old.Status
		}
		keepIdentity(&pv.ObjectMeta, &old.ObjectMeta)
		if reason := pvUpdateRefused(w.Gates, old, pv); reason != "" {
			return nil, nil, reason, nil
		}
		rev.Operation, rev.PV = policy.OperationUpdate, pv
		return rev, func(nw *World) {
			if finalized(&pv.ObjectMeta) {
				delete(nw.PVs, pv.Name)
			} else {
				nw.PVs[pv.Name] = pv
			}
		}, "", nil
	case Delete:
		if old == nil {
			return nil, nil, "no such PersistentVolume", nil
		}
		rev.Operation = policy.OperationDelete
		return rev, func(nw *World) {
			if len(old.Finalizers) == 0 {
				delete(nw.PVs, old.Name)
				return
			}
			pv := old.DeepCopy()
			if pv.DeletionTimestamp == nil {
				pv.DeletionTimestamp = &deletionTime
			}
			nw.PVs[pv.Name] = pv
		}, "", nil
	}
	return nil, nil, "", fmt.Errorf("verb %q is not modelled", s.Verb)
}

func preparePVC(w *World, s Step) (*policy.Review, func(*World), string, error) {
	old := w.PVC(s.Namespace, s.Name)
	rev := &policy.Review{Kind: policy.KindPersistentVolumeClaim, OldPVC: old}
	switch s.Verb {
	case Create:
		if old != nil {
			return nil, nil, "AlreadyExists", nil
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := json.Unmarshal(s.Patch, pvc); err != nil {
			return nil, nil, "", fmt.Errorf("decoding the claim of step %q: %w", s.String(), err)
		}
		pvc.Namespace, pvc.Name = s.Namespace, s.Name
		pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
		pvc.DeletionTimestamp = nil
		addFinalizer(&pvc.ObjectMeta, FinPVC)
		if reason := pvcInvalid(pvc); reason != "" {
			return nil, nil, reason, nil
		}
		rev.Operation, rev.PVC, rev.OldPVC = policy.OperationCreate, pvc, nil
		return rev, func(nw *World) { nw.PVCs[claimKey(pvc.Namespace, pvc.Name)] = pvc }, "", nil
	case Update, UpdateStatus:
		if old == nil {
			return nil, nil, "no such PersistentVolumeClaim", nil
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := applyPatch(old, s.Patch, pvc); err != nil {
			return nil, nil, "", fmt.Errorf("step %q: %w", s.String(), err)
		}
		if s.Verb == UpdateStatus {
			// As for volumes: the claim's status strategy resets the spec, not the metadata.
			pvc.Spec = old.Spec
			rev.SubResource = "status"
		} else {
			pvc.Status = old.Status
		}
		keepIdentity(&pvc.ObjectMeta, &old.ObjectMeta)
		if reason := pvcUpdateRefused(old, pvc); reason != "" {
			return nil, nil, reason, nil
		}
		rev.Operation, rev.PVC = policy.OperationUpdate, pvc
		return rev, func(nw *World) {
			if finalized(&pvc.ObjectMeta) {
				delete(nw.PVCs, claimKey(pvc.Namespace, pvc.Name))
			} else {
				nw.PVCs[claimKey(pvc.Namespace, pvc.Name)] = pvc
			}
		}, "", nil
	case Delete:
		if old == nil {
			return nil, nil, "no such PersistentVolumeClaim", nil
		}
		rev.Operation = policy.OperationDelete
		return rev, func(nw *World) {
			key := claimKey(old.Namespace, old.Name)
			if len(old.Finalizers) == 0 {
				delete(nw.PVCs, key)
				return
			}
			pvc := old.DeepCopy()
			if pvc.DeletionTimestamp == nil {
				pvc.DeletionTimestamp = &deletionTime
			}
			nw.PVCs[key] = pvc
		}, "", nil
	}
	return nil, nil, "", fmt.Errorf("verb %q is not modelled", s.Verb)
}

// keepIdentity restores what no update changes, of the main resource or of status (the generic
// registry's BeforeUpdate): name, namespace, uid, generation, the creation timestamp and the
// deletion timestamp (set only by a delete).
func keepIdentity(cur, old *metav1.ObjectMeta) {
	cur.Name, cur.Namespace, cur.UID = old.Name, old.Namespace, old.UID
	cur.Generation = old.Generation
	cur.DeletionTimestamp = old.DeletionTimestamp
	cur.CreationTimestamp = old.CreationTimestamp
}

func addFinalizer(m *metav1.ObjectMeta, f string) {
	if !slices.Contains(m.Finalizers, f) {
		m.Finalizers = append(m.Finalizers, f)
	}
}

// finalized reports whether an object being deleted has lost its last finalizer, so the
// apiserver removes it.
func finalized(m *metav1.ObjectMeta) bool {
	return m.DeletionTimestamp != nil && len(m.Finalizers) == 0
}

// finalizersAdded reports whether an update adds a finalizer to an object being deleted, which
// the apiserver refuses.
func finalizersAdded(old, cur *metav1.ObjectMeta) bool {
	if old.DeletionTimestamp == nil {
		return false
	}
	for _, f := range cur.Finalizers {
		if !slices.Contains(old.Finalizers, f) {
			return true
		}
	}
	return false
}

func mode(m *corev1.PersistentVolumeMode) corev1.PersistentVolumeMode {
	if m == nil || *m == "" {
		return corev1.PersistentVolumeFilesystem
	}
	return *m
}

// pvInvalid is the part of the apiserver's PersistentVolume validation the model needs.
func pvInvalid(pv *corev1.PersistentVolume) string {
	if _, ok := pv.Spec.Capacity[corev1.ResourceStorage]; !ok {
		return "spec.capacity: Required value"
	}
	if len(pv.Spec.AccessModes) == 0 {
		return "spec.accessModes: Required value"
	}
	return ""
}

func pvcInvalid(pvc *corev1.PersistentVolumeClaim) string {
	if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; !ok || q.Sign() <= 0 {
		return "spec.resources.requests.storage: Required value"
	}
	if len(pvc.Spec.AccessModes) == 0 {
		return "spec.accessModes: Required value"
	}
	return ""
}

// pvUpdateRefused is the apiserver's update validation of a volume, as far as the model needs
// it: the source and the volume mode are immutable, node affinity may only be set where there was
// none (any change, with the MutablePVNodeAffinity gate), and a volume being deleted takes no new
// finalizer.
func pvUpdateRefused(gates Gates, old, cur *corev1.PersistentVolume) string {
	if r := pvInvalid(cur); r != "" {
		return r
	}
	switch {
	case !equality.Semantic.DeepEqual(old.Spec.PersistentVolumeSource, cur.Spec.PersistentVolumeSource):
		return "spec.persistentvolumesource is immutable after creation"
	case mode(old.Spec.VolumeMode) != mode(cur.Spec.VolumeMode):
		return "spec.volumeMode: field is immutable"
	case !gates.MutablePVNodeAffinity && old.Spec.NodeAffinity != nil && !equality.Semantic.DeepEqual(old.Spec.NodeAffinity, cur.Spec.NodeAffinity):
		return "spec.nodeAffinity: field is immutable"
	case finalizersAdded(&old.ObjectMeta, &cur.ObjectMeta):
		return "metadata.finalizers: no new finalizers can be added if the object is being deleted"
	}
	return ""
}

// pvcUpdateRefused is the apiserver's update validation of a claim: the spec is immutable but
// for spec.volumeName set once from empty, the storage request of a Bound claim (expansion, or
// recovery from a failed one down to what the claim already has), and the attributes class.
func pvcUpdateRefused(old, cur *corev1.PersistentVolumeClaim) string {
	if r := pvcInvalid(cur); r != "" {
		return r
	}
	if finalizersAdded(&old.ObjectMeta, &cur.ObjectMeta) {
		return "metadata.finalizers: no new finalizers can be added if the object is being deleted"
	}
	o, c := old.Spec.DeepCopy(), cur.Spec.DeepCopy()
	if o.VolumeName == "" {
		o.VolumeName = c.VolumeName
	}
	o.VolumeAttributesClassName = c.VolumeAttributesClassName
	oldReq, newReq := o.Resources.Requests[corev1.ResourceStorage], c.Resources.Requests[corev1.ResourceStorage]
	if oldReq.Cmp(newReq) != 0 {
		if old.Status.Phase != corev1.ClaimBound {
			return "spec.resources.requests.storage: Forbidden: only a bound claim can be resized"
		}
		if given, ok := old.Status.Capacity[corev1.ResourceStorage]; ok && newReq.Cmp(given) < 0 {
			return "spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"
		}
		o.Resources.Requests = c.Resources.Requests
	}
	if !equality.Semantic.DeepEqual(o, c) {
		return "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"
	}
	return ""
}
