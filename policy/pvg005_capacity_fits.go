package policy

import (
	"github.com/pvguard/pvguard/storage"
)

func pvg005CapacityFits() Rule {
	return Rule{
		ID:      "PVG005",
		Name:    "capacity-fits",
		Default: ActionDeny,
		Judges:  JudgesState,
		Kinds:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Reads:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Summary: "at bind the volume's capacity covers the claim's request, and a bound volume never shrinks below what its claim was given",
		Check: func(r *Review, v View, _ *Config) ([]Finding, error) {
			b, err := newBinding(r, v)
			if err != nil {
				return nil, err
			}
			if b != nil {
				return pvg005AtBind(r, b), nil
			}
			return pvg005Shrink(r, v)
		},
		StatusReads: map[Kind][]string{KindPersistentVolumeClaim: {"capacity"}},
	}
}

// pvg005AtBind judges a pair a write links. A volume re-linked to the claim that completed its
// binding to it (upstream's "volume is unbound, fixing") is held to what the claim has been given,
// not to its request: upstream re-links without comparing sizes, and a claim being expanded asks
// for more than its volume has yet.
func pvg005AtBind(r *Review, b *bindPair) []Finding {
	request, offer := storage.ClaimRequest(b.PVC), storage.VolumeCapacity(b.PV)
	asks := "requests"
	if relinks(r, b) {
		request, asks = storage.ClaimCapacity(b.PVC), "has been given"
	}
	if offer.Cmp(request) >= 0 {
		return nil
	}
	hint := unlinkHint(r, b, Textf("use a volume of at least %s", Word(request.String())))
	if b.Field == "spec.claimRef" && !relinks(r, b) {
		hint = Textf("point spec.claimRef at a claim of at most %s, give the volume at least %s, or leave spec.claimRef as it was", Word(offer.String()), Word(request.String()))
	}
	return []Finding{{
		Object: b.Subject,
		Field:  b.Field,
		Message: Textf("%s %s %s, but %s offers %s",
			pvcRef(b.PVC), Word(asks), Word(request.String()), pvRef(b.PV), Word(offer.String())),
		Hint:  hint,
		fixes: unlinkFix(r, b),
	}}
}

// pvg005Shrink judges an update of a bound volume. Growing is how expansion works and a claim's
// request may run ahead of the volume while it does, so only a shrink below what the claim has
// already been given (status.capacity, else its request) is refused.
func pvg005Shrink(r *Review, v View) ([]Finding, error) {
	pvc, err := stillBoundClaim(r, v)
	if err != nil || pvc == nil {
		return nil, err
	}
	was, now, given := storage.VolumeCapacity(r.OldPV), storage.VolumeCapacity(r.PV), storage.ClaimCapacity(pvc)
	if now.Cmp(was) >= 0 || now.Cmp(given) >= 0 {
		return nil, nil
	}
	vol := pvRef(r.PV)
	return []Finding{{
		Object: vol,
		Field:  "spec.capacity",
		Message: Textf("%s is bound to %s, which has %s, and the write shrinks it from %s to %s",
			vol, pvcRef(pvc), Word(given.String()), Word(was.String()), Word(now.String())),
		Hint:  Textf("keep spec.capacity at %s or more; volumes can grow, not shrink", Word(given.String())),
		fixes: []Fix{undo(vol, "spec.capacity.storage", given.String())},
	}}, nil
}
