package policy

import (
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
)

// memoView remembers the volumes and claims that one evaluation has read, including the ones
// that do not exist. Most at-bind rules (PVG001 and PVG004 to PVG010) resolve the same pair, so
// without it a review of a pre-bound claim reads the volume it names eight times: eight informer
// cache reads, each a deep copy, and for a volume the cache does not have yet eight live reads.
// With it the first read is reused, and every rule judges the same object; newBinding also keeps
// the pair it resolves here.
//
// It lives for one Admit or AuditObject call (Audit resets one between objects). Failed reads are
// remembered too: the evaluation goes on to the other rules after one fails, and a read that just
// failed (the apiserver unreachable, a timeout) would only fail again, one wait per rule. It keeps
// a few entries of each kind, which covers every rule; past that it reads through.
type memoView struct {
	View
	pvs  [memoSize]memoEntry[corev1.PersistentVolume]
	pvcs [memoSize]memoEntry[corev1.PersistentVolumeClaim]
	npv  int
	npvc int
	// binding is the pair newBinding resolved for the review bindingOf.
	bindingOf  *Review
	binding    *bindPair // &pair, or nil when the review links no pair
	pair       bindPair
	bindingErr error
	// affinities are the volumes' node affinities parsed so far (volumeAffinity), by their
	// selector: unlike the rest they outlive reset. One audit goroutine judges many volumes, and
	// the informer cache shares equal node affinities between volumes (storage.Interner), so most
	// volumes of a node parse once. Keyed by pointer, they hold only while the objects judged are
	// not changed, which the evaluation's objects never are.
	affinities map[*corev1.NodeSelector]parsedAffinity
}

type parsedAffinity struct {
	aff storage.VolumeAffinity
	err error
}

// maxAffinities bounds memoView.affinities: past it they are forgotten and parsed again.
const maxAffinities = 1024

// memoSize is how many objects of each kind one evaluation remembers: a review reads at most the
// volume or claim its write links, the other half's previous partner, and the claim of an
// old claimRef.
const memoSize = 4

type memoEntry[T any] struct {
	namespace, name string
	obj             *T
	err             error
}

// memos keeps the memos of finished evaluations for the next: a caller judging many pairs (the
// binder's plans, an explanation's candidate table: two evaluations a pair, thousands of pairs a
// question) would otherwise allocate one each, most of its allocations. Nothing an evaluation
// returns points into its memo: findings copy what they name.
var memos = sync.Pool{New: func() any { return new(memoView) }}

// takeMemo is a memo over v from the pool; giveMemo hands it back, holding nothing.
func takeMemo(v View) *memoView {
	m := memos.Get().(*memoView)
	m.View = v
	return m
}

func giveMemo(m *memoView) {
	*m = memoView{}
	memos.Put(m)
}

func newMemoView(v View) *memoView {
	if m, ok := v.(*memoView); ok {
		return m
	}
	return &memoView{View: v}
}

// reset forgets everything but the parsed node affinities, for the next evaluation.
func (m *memoView) reset() { *m = memoView{View: m.View, affinities: m.affinities} }

// volumeAffinity is storage.ParseVolumeAffinity(pv), parsed once per selector in an evaluation
// with a memo (an audit goroutine's, across its objects).
func volumeAffinity(v View, pv *corev1.PersistentVolume) (storage.VolumeAffinity, error) {
	m, ok := v.(*memoView)
	if !ok || pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return storage.ParseVolumeAffinity(pv)
	}
	sel := pv.Spec.NodeAffinity.Required
	if p, ok := m.affinities[sel]; ok {
		return p.aff, p.err
	}
	aff, err := storage.ParseVolumeAffinity(pv)
	if m.affinities == nil || len(m.affinities) >= maxAffinities {
		m.affinities = make(map[*corev1.NodeSelector]parsedAffinity)
	}
	m.affinities[sel] = parsedAffinity{aff: aff, err: err}
	return aff, err
}

func (m *memoView) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	for i := range m.npv {
		if e := &m.pvs[i]; e.name == name {
			return e.obj, e.err
		}
	}
	pv, err := m.View.PersistentVolume(name)
	if m.npv < memoSize {
		m.pvs[m.npv] = memoEntry[corev1.PersistentVolume]{name: name, obj: pv, err: err}
		m.npv++
	}
	return pv, err
}

func (m *memoView) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	for i := range m.npvc {
		if e := &m.pvcs[i]; e.name == name && e.namespace == namespace {
			return e.obj, e.err
		}
	}
	pvc, err := m.View.PersistentVolumeClaim(namespace, name)
	if m.npvc < memoSize {
		m.pvcs[m.npvc] = memoEntry[corev1.PersistentVolumeClaim]{namespace: namespace, name: name, obj: pvc, err: err}
		m.npvc++
	}
	return pvc, err
}
