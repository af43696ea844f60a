package policy

import (
	corev1 "k8s.io/api/core/v1"
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
	binding    *bindPair
	bindingErr error
}

// memoSize is how many objects of each kind one evaluation remembers: a review reads at most the
// volume or claim its write links, the other half's previous partner, and the claim of an
// old claimRef.
const memoSize = 4

type memoEntry[T any] struct {
	namespace, name string
	obj             *T
	err             error
}

func newMemoView(v View) *memoView {
	if m, ok := v.(*memoView); ok {
		return m
	}
	return &memoView{View: v}
}

// reset forgets everything, for the next evaluation.
func (m *memoView) reset() { *m = memoView{View: m.View} }

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
