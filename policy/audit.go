package policy

import (
	"cmp"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Snapshot is a fixed set of objects: the whole world an audit judges. It is also a View, so
// the admission rules can read related objects from it.
type Snapshot struct {
	PVs     []*corev1.PersistentVolume
	PVCs    []*corev1.PersistentVolumeClaim
	Nodes   []*corev1.Node
	Classes []*storagev1.StorageClass
}

var _ View = &Snapshot{}

func (s *Snapshot) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	for _, pv := range s.PVs {
		if pv.Name == name {
			return pv, nil
		}
	}
	return nil, nil
}

func (s *Snapshot) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	for _, pvc := range s.PVCs {
		if pvc.Namespace == namespace && pvc.Name == name {
			return pvc, nil
		}
	}
	return nil, nil
}

func (s *Snapshot) ClaimsNamingVolume(volumeName string) ([]*corev1.PersistentVolumeClaim, error) {
	var out []*corev1.PersistentVolumeClaim
	for _, pvc := range s.PVCs {
		if pvc.Spec.VolumeName == volumeName {
			out = append(out, pvc)
		}
	}
	return out, nil
}

func (s *Snapshot) VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error) {
	var out []*corev1.PersistentVolume
	for _, pv := range s.PVs {
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == namespace && ref.Name == name {
			out = append(out, pv)
		}
	}
	return out, nil
}

func (s *Snapshot) Node(name string) (*corev1.Node, error) {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return nil, nil
}

func (s *Snapshot) StorageClasses() ([]*storagev1.StorageClass, error) { return s.Classes, nil }

// Objects lists the snapshot's classes, claims and volumes in AuditOrder.
func (s *Snapshot) Objects() []any {
	out := make([]any, 0, len(s.Classes)+len(s.PVCs)+len(s.PVs))
	for _, sc := range s.Classes {
		out = append(out, sc)
	}
	for _, pvc := range s.PVCs {
		out = append(out, pvc)
	}
	for _, pv := range s.PVs {
		out = append(out, pv)
	}
	return out
}

// transitionRules judge a change, not a state, so the audit does not evaluate them. PVG002 is
// among them: a claimRef naming a claim that is gone describes a released volume once it has been
// written, and PVG020 reports the states that are wrong (a Bound volume whose claim is gone).
var transitionRules = map[RuleID]bool{"PVG002": true, "PVG003": true, "PVG011": true, "PVG012": true, "PVG013": true}

// Audit judges every object of a snapshot with AuditObject and merges the results: the findings
// of every rule that could judge, and an error joining the *RuleError of each rule that could not
// judge an object (a Snapshot's own reads never fail). progress,
// when not nil, is told after each object how many of how many are done; its calls are
// serialised and count up by one. The objects are judged on up to GOMAXPROCS goroutines (the
// snapshot is only read, and each goroutine has its own review and memo), and the result does not
// depend on their scheduling: each object's findings keep its place before Merge.
func (e *Engine) Audit(s *Snapshot, now time.Time, progress func(done, total int)) ([]Finding, error) {
	view := indexSnapshot(s)
	objs := s.Objects()
	perObject := make([][]Finding, len(objs))
	errs := make([]error, len(objs))
	var (
		next atomic.Int64 // the first object of the next block to take
		mu   sync.Mutex   // serialises progress
		done int
		wg   sync.WaitGroup
	)
	workers := min(runtime.GOMAXPROCS(0), (len(objs)+auditBlock-1)/auditBlock)
	for range workers {
		wg.Go(func() {
			// One review and one memo serve each object in turn, so judging an object allocates
			// only what its findings need.
			r, memo := &Review{}, &memoView{View: view}
			for {
				start := int(next.Add(auditBlock)) - auditBlock
				if start >= len(objs) {
					return
				}
				for i := start; i < min(start+auditBlock, len(objs)); i++ {
					memo.reset()
					perObject[i], errs[i] = e.auditObject(objs[i], r, memo, now)
					if progress != nil {
						mu.Lock()
						done++
						progress(done, len(objs))
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	// The errors in the snapshot's order, whichever goroutine met them first. An object a rule
	// could not judge still has the other rules' findings, so they are reported beside it.
	return Merge(perObject), errors.Join(errs...)
}

// auditBlock is how many consecutive objects an Audit goroutine takes at a time: enough that
// taking them costs nothing, few enough that the goroutines finish together.
const auditBlock = 256

// AuditObject judges one existing object (a *PersistentVolume, *PersistentVolumeClaim or
// *StorageClass) as it stands: the admission rules that describe a state, each applied as if the
// object had just been created, then the audit-only rules PVG020-PVG024. Exemptions apply as at
// admission, matched by namespace only (an audit has no requester). now dates the
// released-aging rule. The findings are not yet deduplicated against the object's neighbours:
// Merge does that. As with Admit, a rule that cannot judge the object does not stop the others:
// the error joins a *RuleError for each that could not, beside the findings of those that could.
func (e *Engine) AuditObject(obj any, v View, now time.Time) ([]Finding, error) {
	return e.auditObject(obj, &Review{}, newMemoView(v), now)
}

// auditObject is AuditObject with the review to fill in and the memo to read through supplied
// by the caller.
func (e *Engine) auditObject(obj any, r *Review, v *memoView, now time.Time) ([]Finding, error) {
	*r = Review{Operation: OperationCreate, audit: true}
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		r.Kind, r.PV = KindPersistentVolume, o
	case *corev1.PersistentVolumeClaim:
		r.Kind, r.PVC = KindPersistentVolumeClaim, o
	case *storagev1.StorageClass:
		r.Kind, r.SC = KindStorageClass, o
	default:
		return nil, fmt.Errorf("auditing %T: not a PersistentVolume, PersistentVolumeClaim or StorageClass", obj)
	}
	ns := r.namespaces()
	var out []Finding
	var failed []error
	for i := range e.rules {
		rl := &e.rules[i]
		if transitionRules[rl.ID] || !rl.appliesTo(r.Kind) {
			continue
		}
		var err error
		if out, err = e.judge(out, rl, false, r, v, ns, now); err != nil {
			failed = append(failed, err)
		}
	}
	for i := range e.auditRules {
		rl := &e.auditRules[i]
		if !rl.appliesTo(r.Kind) {
			continue
		}
		var err error
		if out, err = e.judge(out, rl, true, r, v, ns, now); err != nil {
			failed = append(failed, err)
		}
	}
	return out, errors.Join(failed...)
}

// judge applies one rule to an existing object for AuditObject, an audit-only rule through its
// audit function and an admission rule through Check, and appends the findings to out; when the
// rule cannot judge, out comes back as it was, with a *RuleError.
func (e *Engine) judge(out []Finding, rl *Rule, auditOnly bool, r *Review, v View, ns []string, now time.Time) ([]Finding, error) {
	action := e.cfg.ActionFor(rl)
	if action == ActionOff || e.cfg.Exempt(rl, ns, UserInfo{}) {
		return out, nil
	}
	var found []Finding
	var err error
	if auditOnly {
		found, err = rl.audit(r, v, e.cfg, now)
	} else {
		found, err = rl.Check(r, v, e.cfg)
	}
	if err != nil {
		return out, &RuleError{Rule: rl.ID, Name: rl.Name, Object: r.Object(), Err: err}
	}
	for _, f := range found {
		f.Rule, f.Name, f.Action = rl.ID, rl.Name, action
		if f.Object.Kind == "" {
			f.Object = r.Object()
		}
		out = append(out, f)
	}
	return out, nil
}

// AuditOrder ranks kinds in the order Merge expects their findings: classes, then claims, then
// volumes. A violated pair is seen from both of its objects; judging the claim first puts the
// finding on the claim, in its namespace, where the tenant who owns it sees it.
func AuditOrder(k Kind) int {
	switch k {
	case KindStorageClass:
		return 0
	case KindPersistentVolumeClaim:
		return 1
	default:
		return 2
	}
}

// Merge joins per-object audit findings, given in AuditOrder, keeping the first of any two with
// the same rule and message, and sorts the result by rule, then object.
func Merge(perObject [][]Finding) []Finding {
	var out []Finding
	seen := map[string]bool{}
	for _, found := range perObject {
		for _, f := range found {
			k := string(f.Rule) + "\x00" + f.Message
			if !seen[k] {
				seen[k] = true
				out = append(out, f)
			}
		}
	}
	// Each object's name is rendered once rather than at every comparison.
	keyed := make([]keyedFinding, len(out))
	for i, f := range out {
		keyed[i] = keyedFinding{object: f.Object.String(), f: f}
	}
	slices.SortStableFunc(keyed, func(a, b keyedFinding) int {
		if c := cmp.Compare(a.f.Rule, b.f.Rule); c != 0 {
			return c
		}
		return cmp.Compare(a.object, b.object)
	})
	for i := range keyed {
		out[i] = keyed[i].f
	}
	return out
}

type keyedFinding struct {
	object string
	f      Finding
}

// indexedSnapshot answers a Snapshot's lookups from maps, so a whole audit costs linear time
// rather than a scan of the snapshot per lookup.
type indexedSnapshot struct {
	s        *Snapshot
	pvs      map[string]*corev1.PersistentVolume
	pvcs     map[objectKey]*corev1.PersistentVolumeClaim
	naming   map[string][]*corev1.PersistentVolumeClaim
	claiming map[objectKey][]*corev1.PersistentVolume
	nodes    map[string]*corev1.Node
}

// objectKey names a namespaced object in the index; a lookup by it builds no string.
type objectKey struct{ namespace, name string }

// Indexed returns a View over the snapshot that answers each lookup from a map. The snapshot must
// not change while the view is in use.
func (s *Snapshot) Indexed() View { return indexSnapshot(s) }

func indexSnapshot(s *Snapshot) *indexedSnapshot {
	// The volumes' maps and the claims' are built side by side: no object can be judged before
	// the index is whole, and for 100k objects building it took 0.11 s of one core. Each reverse
	// map is sized for the worst case (every volume claims, every claim names) so it never grows.
	x := &indexedSnapshot{s: s,
		pvs: make(map[string]*corev1.PersistentVolume, len(s.PVs)), pvcs: make(map[objectKey]*corev1.PersistentVolumeClaim, len(s.PVCs)),
		naming: make(map[string][]*corev1.PersistentVolumeClaim, len(s.PVCs)), claiming: make(map[objectKey][]*corev1.PersistentVolume, len(s.PVs)),
		nodes: make(map[string]*corev1.Node, len(s.Nodes))}
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, pv := range s.PVs {
			x.pvs[pv.Name] = pv
			if ref := pv.Spec.ClaimRef; ref != nil {
				k := objectKey{ref.Namespace, ref.Name}
				x.claiming[k] = append(x.claiming[k], pv)
			}
		}
	})
	for _, pvc := range s.PVCs {
		x.pvcs[objectKey{pvc.Namespace, pvc.Name}] = pvc
		if pvc.Spec.VolumeName != "" {
			x.naming[pvc.Spec.VolumeName] = append(x.naming[pvc.Spec.VolumeName], pvc)
		}
	}
	for _, n := range s.Nodes {
		x.nodes[n.Name] = n
	}
	wg.Wait()
	return x
}

func (x *indexedSnapshot) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	return x.pvs[name], nil
}

func (x *indexedSnapshot) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return x.pvcs[objectKey{namespace, name}], nil
}

func (x *indexedSnapshot) ClaimsNamingVolume(volumeName string) ([]*corev1.PersistentVolumeClaim, error) {
	return x.naming[volumeName], nil
}

func (x *indexedSnapshot) VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error) {
	return x.claiming[objectKey{namespace, name}], nil
}

func (x *indexedSnapshot) Node(name string) (*corev1.Node, error) { return x.nodes[name], nil }

func (x *indexedSnapshot) StorageClasses() ([]*storagev1.StorageClass, error) {
	return x.s.Classes, nil
}
