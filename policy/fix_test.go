package policy_test

import (
	"maps"
	"regexp"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/sequence"
)

// namesWrite tells a hint that names a write: a field path, or a verb of writing. Such a hint
// carries the write as a policy.Fix, which checkFixes makes.
var namesWrite = regexp.MustCompile(`\b(spec|metadata)\.[a-zA-Z]|\b([Dd]elete|drop|clear|remove|set|point|pre-bind|keep|unlink|mark|fix|give)\b`)

// hintsWithoutFix are the hints that name a write no program can make from the finding's state
// alone, each with why; every other hint that names a write must carry a Fix.
var hintsWithoutFix = map[string]string{
	"the pvc-protection controller removes it once no pod uses the claim; delete the pods that use the claim instead":                 "pods are no object pvguard judges, so deleting them is admitted",
	"the external provisioner removes it once it has deleted the backing storage; wait for it, or fix the provisioner if it is stuck": "it names a wait, and a repair outside the cluster's objects",
}

// checkFixes holds one finding's hint to its routes out (policy.Fix): a hint that names a write
// carries at least one, and each route, made write by write on the state the finding came from
// (the write under review r and the view at admission; the state alone in the audit, r nil), is
// admitted by the engine at every write, and its last write leaves no finding of the rule on the
// finding's object and field.
func checkFixes(t *testing.T, cfg *policy.Config, r *policy.Review, st *clusterstate.State, f policy.Finding) {
	t.Helper()
	checkFixesMasked(t, cfg, r, st, f, nil)
}

// checkFixesMasked is checkFixes, except that a route may also meet the rules masks lists for the
// finding's rule: the rules one write can break without their finding showing until another
// rule's is undone.
func checkFixesMasked(t *testing.T, cfg *policy.Config, r *policy.Review, st *clusterstate.State, f policy.Finding, masks map[policy.RuleID][]policy.RuleID) {
	t.Helper()
	hint := f.Hint.String()
	if len(f.Fixes()) == 0 {
		if namesWrite.MatchString(hint) {
			if _, ok := hintsWithoutFix[hint]; !ok {
				t.Errorf("%s hint names a write but carries no Fix: %q", f.Rule, hint)
			}
		}
		return
	}
	// The other refusals of the write under review are its other findings', each with its own
	// hint: a route out of this one may still meet the rules that refused the write (a write that
	// breaks two rules is undone one hint at a time, and a pair's mismatch is seen from either
	// half), but no other rule, and its last write must not meet this finding again.
	already := map[string]bool{}
	if r != nil {
		d, err := policy.NewEngine(cfg).Admit(r, st)
		if err != nil {
			t.Fatalf("Admit: %v", err)
		}
		for _, g := range d.Deny {
			already[string(g.Rule)] = true
		}
	}
	for i, fix := range f.Fixes() {
		w := newFixWorld(st)
		if r != nil {
			w.stored(r)
		}
		var last *policy.Decision
		for j, wr := range fix.Writes {
			review, err := w.review(r, wr)
			if err != nil {
				t.Fatalf("%s fix %d write %d (%+v): %v", f.Rule, i, j, wr, err)
			}
			d, err := policy.NewEngine(cfg).Admit(review, w.state())
			if err != nil {
				t.Fatalf("%s fix %d write %d (%+v): Admit: %v", f.Rule, i, j, wr, err)
			}
			for _, g := range d.Deny {
				if findingKey(g) == findingKey(f) && j == len(fix.Writes)-1 || !already[string(g.Rule)] && !slices.Contains(masks[f.Rule], g.Rule) {
					t.Errorf("%s hint %q: its route %d, write %d (%s %+v), is refused: %v", f.Rule, hint, i, j, review.Operation, wr, g)
				}
			}
			w.made(review)
			last = &d
		}
		if last == nil {
			continue
		}
		for _, g := range append(append(append([]policy.Finding{}, last.Deny...), last.Warn...), last.Audit...) {
			if g.Rule == f.Rule && g.Object == f.Object && g.Field == f.Field {
				t.Errorf("%s hint %q: its route %d leaves the finding: %v", f.Rule, hint, i, g)
			}
		}
	}
}

// findingKey names a finding by rule, object and field.
func findingKey(f policy.Finding) string {
	return string(f.Rule) + " " + f.Object.String() + " " + f.Field
}

// fixWorld is the state a route is made on, one write at a time.
type fixWorld struct {
	objs  map[policy.ObjectRef]runtime.Object
	gone  map[policy.ObjectRef]runtime.Object // deleted by the route, to create again
	nodes []*corev1.Node
	// written are the objects the route has written.
	written map[policy.ObjectRef]bool
}

func newFixWorld(st *clusterstate.State) *fixWorld {
	w := &fixWorld{objs: map[policy.ObjectRef]runtime.Object{}, gone: map[policy.ObjectRef]runtime.Object{}, nodes: st.Nodes(),
		written: map[policy.ObjectRef]bool{}}
	for _, pv := range st.Volumes() {
		w.objs[policy.ObjectRef{Kind: policy.KindPersistentVolume, Name: pv.Name}] = pv
	}
	for _, pvc := range st.Claims() {
		w.objs[policy.ObjectRef{Kind: policy.KindPersistentVolumeClaim, Namespace: pvc.Namespace, Name: pvc.Name}] = pvc
	}
	for _, sc := range st.Classes() {
		w.objs[policy.ObjectRef{Kind: policy.KindStorageClass, Name: sc.Name}] = sc
	}
	return w
}

// stored puts the object a write under review updates into the world as it stood before the
// write, when the state does not hold it.
func (w *fixWorld) stored(r *policy.Review) {
	if _, ok := w.objs[r.Object()]; ok || r.Operation != policy.OperationUpdate {
		return
	}
	switch {
	case r.OldPV != nil:
		w.objs[r.Object()] = r.OldPV
	case r.OldPVC != nil:
		w.objs[r.Object()] = r.OldPVC
	case r.OldSC != nil:
		w.objs[r.Object()] = r.OldSC
	}
}

func (w *fixWorld) state() *clusterstate.State {
	var (
		pvs  []*corev1.PersistentVolume
		pvcs []*corev1.PersistentVolumeClaim
		scs  []*storagev1.StorageClass
	)
	keys := make([]policy.ObjectRef, 0, len(w.objs))
	for k := range w.objs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b policy.ObjectRef) int {
		if a.String() < b.String() {
			return -1
		}
		return 1
	})
	for _, k := range keys {
		switch o := w.objs[k].(type) {
		case *corev1.PersistentVolume:
			pvs = append(pvs, o)
		case *corev1.PersistentVolumeClaim:
			pvcs = append(pvcs, o)
		case *storagev1.StorageClass:
			scs = append(scs, o)
		}
	}
	return clusterstate.New(pvcs, pvs, scs, w.nodes)
}

// review is the review of one write of a route: at admission, a Write on the object under
// review is that write changed as the Write says, by its requester; any other is an admin's.
func (w *fixWorld) review(r *policy.Review, wr policy.Write) (*policy.Review, error) {
	if r != nil && wr.Object == r.Object() && !wr.Delete && !wr.Create {
		out := *r
		var err error
		switch r.Kind {
		case policy.KindPersistentVolume:
			var o runtime.Object
			if o, err = wr.Apply(r.PV); err == nil {
				out.PV = o.(*corev1.PersistentVolume)
			}
		case policy.KindPersistentVolumeClaim:
			var o runtime.Object
			if o, err = wr.Apply(r.PVC); err == nil {
				out.PVC = o.(*corev1.PersistentVolumeClaim)
			}
		case policy.KindStorageClass:
			var o runtime.Object
			if o, err = wr.Apply(r.SC); err == nil {
				out.SC = o.(*storagev1.StorageClass)
			}
		}
		// The write is made on the object as the route has left it so far.
		if cur, ok := w.objs[wr.Object]; ok && w.written[wr.Object] && r.Operation == policy.OperationUpdate {
			setOld(&out, cur)
		}
		return &out, err
	}
	out := &policy.Review{Kind: wr.Object.Kind, User: admin}
	cur, exists := w.objs[wr.Object]
	switch {
	case wr.Delete:
		out.Operation = policy.OperationDelete
		setOld(out, cur)
		return out, nil
	case wr.Create:
		base, ok := w.gone[wr.Object]
		if !ok {
			base = cur
		}
		if base == nil {
			return nil, errNoObject(wr.Object)
		}
		o, err := wr.Apply(base)
		if err != nil {
			return nil, err
		}
		setUID(o, "recreated-"+wr.Object.Name)
		out.Operation = policy.OperationCreate
		setNew(out, o)
		return out, nil
	}
	if !exists {
		return nil, errNoObject(wr.Object)
	}
	o, err := wr.Apply(cur)
	if err != nil {
		return nil, err
	}
	out.Operation = policy.OperationUpdate
	setOld(out, cur)
	setNew(out, o)
	return out, nil
}

// made records a write of a route in the world.
func (w *fixWorld) made(r *policy.Review) {
	ref := r.Object()
	w.written[ref] = true
	if r.Operation == policy.OperationDelete {
		w.gone[ref] = w.objs[ref]
		delete(w.objs, ref)
		return
	}
	switch r.Kind {
	case policy.KindPersistentVolume:
		w.objs[ref] = r.PV
	case policy.KindPersistentVolumeClaim:
		w.objs[ref] = r.PVC
	case policy.KindStorageClass:
		w.objs[ref] = r.SC
	}
}

type errNoObject policy.ObjectRef

func (e errNoObject) Error() string { return policy.ObjectRef(e).String() + " is not in the state" }

func setOld(r *policy.Review, o runtime.Object) {
	switch o := o.(type) {
	case *corev1.PersistentVolume:
		r.OldPV = o
	case *corev1.PersistentVolumeClaim:
		r.OldPVC = o
	case *storagev1.StorageClass:
		r.OldSC = o
	}
}

func setNew(r *policy.Review, o runtime.Object) {
	switch o := o.(type) {
	case *corev1.PersistentVolume:
		r.PV = o
	case *corev1.PersistentVolumeClaim:
		r.PVC = o
	case *storagev1.StorageClass:
		r.SC = o
	}
}

func setUID(o runtime.Object, uid string) {
	switch o := o.(type) {
	case *corev1.PersistentVolume:
		o.UID = types.UID(uid)
	case *corev1.PersistentVolumeClaim:
		o.UID = types.UID(uid)
	case *storagev1.StorageClass:
		o.UID = types.UID(uid)
	}
}

// explorerMasks are the rules whose findings the explorer's writes (random, several changes at
// once) hide behind another rule's, and which a route out of that rule's finding then meets:
//   - a claimRef whose uid is not the claim's forms no pair (PVG002's finding), so the pair rules
//     judge the pair only once the route drops the uid;
//   - a write that links a pair is judged at bind, not for what else it takes from a bound volume
//     (capacity, access modes), so a route that leaves the link as it was meets PVG005's or
//     PVG006's judgement of the rest; and PVG004's of another volume linked to the same claim.
var explorerMasks = func() map[policy.RuleID][]policy.RuleID {
	pair := []policy.RuleID{"PVG001", "PVG004", "PVG005", "PVG006", "PVG007", "PVG008", "PVG009", "PVG018"}
	m := map[policy.RuleID][]policy.RuleID{"PVG002": pair}
	for _, id := range pair {
		m[id] = []policy.RuleID{"PVG004", "PVG005", "PVG006"}
	}
	return m
}()

// TestHintsOfExploredStates makes the routes out of every finding the sequence explorer meets
// (random writes by every kind of identity from the starting worlds of the upstream flows, the
// populators and forged hand-offs) on the world the write was judged in: a corpus of states far
// beyond the rules' table cases.
func TestHintsOfExploredStates(t *testing.T) {
	cfg := policy.DefaultConfig()
	e := policy.NewEngine(cfg)
	runs := 300
	if testing.Short() {
		runs = 50
	}
	seen := map[string]bool{}
	for i := range runs {
		tr := sequence.Explore(e, uint64(i)+1)
		for _, o := range tr.Outcomes {
			if o.Review == nil || o.Before == nil {
				continue
			}
			for _, f := range append(append(append([]policy.Finding{}, o.Decision.Deny...), o.Decision.Warn...), o.Decision.Audit...) {
				key := string(f.Rule) + "\x00" + f.Field + "\x00" + f.Hint.String()
				if seen[key] && len(f.Fixes()) == 0 {
					continue
				}
				seen[key] = true
				checkFixesMasked(t, cfg, o.Review, worldState(o.Before), f, explorerMasks)
			}
		}
	}
	if len(seen) == 0 {
		t.Fatal("the explorer met no finding: the test checks nothing")
	}
}

// worldState is a sequence world as a state.
func worldState(w *sequence.World) *clusterstate.State {
	var (
		pvs   []*corev1.PersistentVolume
		pvcs  []*corev1.PersistentVolumeClaim
		scs   []*storagev1.StorageClass
		nodes []*corev1.Node
	)
	for _, k := range slices.Sorted(maps.Keys(w.PVs)) {
		pvs = append(pvs, w.PVs[k])
	}
	for _, k := range slices.Sorted(maps.Keys(w.PVCs)) {
		pvcs = append(pvcs, w.PVCs[k])
	}
	for _, k := range slices.Sorted(maps.Keys(w.Classes)) {
		scs = append(scs, w.Classes[k])
	}
	for _, k := range slices.Sorted(maps.Keys(w.Nodes)) {
		nodes = append(nodes, w.Nodes[k])
	}
	return clusterstate.New(pvcs, pvs, scs, nodes)
}

// TestWriteApply: a Write sets and clears fields by path, annotations by key (dots and slashes
// in it), and a Create drops what the apiserver sets, without touching the object it is given.
func TestWriteApply(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{}
	pvc.Name, pvc.Namespace, pvc.UID, pvc.ResourceVersion = "data", "team-a", "uid-1", "7"
	pvc.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes", "keep": "me"}
	pvc.Spec.VolumeName = "pv-1"
	pvc.Status.Phase = corev1.ClaimBound
	ref := policy.ObjectRef{Kind: policy.KindPersistentVolumeClaim, Namespace: "team-a", Name: "data"}

	out, err := policy.Write{Object: ref, Set: map[string]any{"spec.volumeName": "pv-2", "metadata.annotations[a.b/c]": "d"},
		Clear: []string{"metadata.annotations[pv.kubernetes.io/bind-completed]"}}.Apply(pvc)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.PersistentVolumeClaim)
	if got.Spec.VolumeName != "pv-2" || got.Annotations["a.b/c"] != "d" || got.Annotations["keep"] != "me" || got.UID != "uid-1" {
		t.Errorf("update: %+v", got)
	}
	if _, ok := got.Annotations["pv.kubernetes.io/bind-completed"]; ok {
		t.Errorf("update kept the cleared annotation: %v", got.Annotations)
	}
	if pvc.Spec.VolumeName != "pv-1" || pvc.Annotations["pv.kubernetes.io/bind-completed"] != "yes" {
		t.Errorf("Apply changed the object it was given: %+v", pvc)
	}

	out, err = policy.Write{Object: ref, Create: true, Clear: []string{"spec.volumeName"}}.Apply(pvc)
	if err != nil {
		t.Fatal(err)
	}
	got = out.(*corev1.PersistentVolumeClaim)
	if got.UID != "" || got.ResourceVersion != "" || got.Status.Phase != "" || got.Spec.VolumeName != "" || got.Name != "data" {
		t.Errorf("create: %+v", got)
	}
	if out, err := (policy.Write{Object: ref, Delete: true}).Apply(pvc); out != nil || err != nil {
		t.Errorf("delete: %v, %v", out, err)
	}
}
