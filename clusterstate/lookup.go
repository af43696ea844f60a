package clusterstate

import (
	"hash/maphash"
	"math/bits"
)

// lookup finds the objects of a slice by a key of theirs: a table of their positions in the
// slice, open-addressed and probed linearly, each slot the high half of its key's hash beside the
// position. A Go map from the keys to the objects took 25-75 bytes an object, all of it scanned
// by every collection (the keys' strings and the objects are pointers); the slots take 8-16 and
// hold no pointer. At 100,000 pairs a state's five lookups took about 30 MB as maps, 10 MB as
// tables. The keys are not kept: a slot's key is its object's, computed again when the hashes'
// halves match.
//
// One slot per key. A lookup of one object (unique) keeps the last object of a key; one of every
// object (each) keeps the first, and the keys of more than one object, with all of them in the
// slice's order, in a map of their own, which is empty but where objects conflict.
type lookup[T any, K comparable] struct {
	all  []T
	key  func(T) (K, bool)
	hash func(maphash.Seed, K) uint64
	seed maphash.Seed
	// slots: 0 empty, else the hash's high 32 bits, then the position + 1.
	slots []uint64
	mask  uint64
	more  map[K][]T
}

// newLookup returns the lookup of all's objects by key (those it keys: ok), hashed by hash; with
// every object of a key (each) or the last (unique).
func newLookup[T any, K comparable](all []T, key func(T) (K, bool), hash func(maphash.Seed, K) uint64, every bool) *lookup[T, K] {
	size := 8
	for size < 2*len(all) {
		size <<= 1
	}
	l := &lookup[T, K]{all: all, key: key, hash: hash, seed: maphash.MakeSeed(), slots: make([]uint64, size), mask: uint64(size - 1)}
	for i, o := range all {
		k, ok := key(o)
		if !ok {
			continue
		}
		h := hash(l.seed, k)
		j, found := l.slot(k, h)
		switch {
		case !found, !every: // a new key, or the last object of a key so far
			l.slots[j] = h&^0xffffffff | uint64(i+1)
		default:
			if l.more == nil {
				l.more = map[K][]T{}
			}
			if l.more[k] == nil {
				l.more[k] = []T{all[l.slots[j]&0xffffffff-1]}
			}
			l.more[k] = append(l.more[k], o)
		}
	}
	return l
}

// slot is the slot of key k (hash h) and true, or the empty slot a new key k goes in and false.
func (l *lookup[T, K]) slot(k K, h uint64) (uint64, bool) {
	for j := h & l.mask; ; j = (j + 1) & l.mask {
		s := l.slots[j]
		if s == 0 {
			return j, false
		}
		if s>>32 == h>>32 {
			if got, _ := l.key(l.all[s&0xffffffff-1]); got == k {
				return j, true
			}
		}
	}
}

// one returns the object of key k (the last, for a unique lookup) and true, or the zero T and
// false.
func (l *lookup[T, K]) one(k K) (T, bool) {
	j, found := l.slot(k, l.hash(l.seed, k))
	if !found {
		var zero T
		return zero, false
	}
	return l.all[l.slots[j]&0xffffffff-1], true
}

// each returns every object of key k in the slice's order, or nil. A key's one object is a view
// of the slice with no room to grow, so that an append to it copies.
func (l *lookup[T, K]) each(k K) []T {
	j, found := l.slot(k, l.hash(l.seed, k))
	if !found {
		return nil
	}
	if all, ok := l.more[k]; ok { // a nil map: no key conflicts
		return all
	}
	p := l.slots[j]&0xffffffff - 1
	return l.all[p : p+1 : p+1]
}

// hashString is a string key's hash.
func hashString(seed maphash.Seed, s string) uint64 { return maphash.String(seed, s) }

// hashNamed is a Key's hash by its namespace and name: a lookup's keys are of one kind.
func hashNamed(seed maphash.Seed, k Key) uint64 {
	return bits.RotateLeft64(maphash.String(seed, k.Namespace), 29) ^ maphash.String(seed, k.Name)
}
