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
// It lives for one Admit or AuditObject call (Audit resets one between objects). Failed reads are not remembered (the evaluation
// stops at the first one anyway). It keeps a few entries of each kind, which covers every rule;
// past that it reads through.
type memoView struct {
	View
	pvs  [memoSize]memoEntry[corev1.PersistentVolume]
	pvcs [memoSize]memoEntry[corev1.PersistentVolumeClaim]
	npv  int
	npvc int
	// binding is the pair newBinding resolved for the review bindingOf.
	bindingOf *Review
	binding   *bindPair
}

// memoSize is how many objects of each kind one evaluation remembers: a review reads at most the
// volume or claim its write links, the other half's previous partner, and the claim of an
// old claimRef.
const memoSize = 4

type memoEntry[T any] struct {
	namespace, name string
	obj             *T
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
			return e.obj, nil
		}
	}
	pv, err := m.View.PersistentVolume(name)
	if err == nil && m.npv < memoSize {
		m.pvs[m.npv] = memoEntry[corev1.PersistentVolume]{name: name, obj: pv}
		m.npv++
	}
	return pv, err
}

func (m *memoView) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	for i := range m.npvc {
		if e := &m.pvcs[i]; e.name == name && e.namespace == namespace {
			return e.obj, nil
		}
	}
	pvc, err := m.View.PersistentVolumeClaim(namespace, name)
	if err == nil && m.npvc < memoSize {
		m.pvcs[m.npvc] = memoEntry[corev1.PersistentVolumeClaim]{namespace: namespace, name: name, obj: pvc}
		m.npvc++
	}
	return pvc, err
}
