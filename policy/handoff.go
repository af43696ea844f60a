package policy

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
)

// handOff reports whether a volume write that moves the volume's link from the live claim from to
// the claimRef cur is a populator's hand-off (storage/handoff.go tells it apart from a steal): cur
// names, with its uid, a live claim from was made for (storage.MadeFor), which waits for its data
// (storage.WaitsForData) and to which no other volume is linked.
func handOff(r *Review, v View, from *corev1.PersistentVolumeClaim, cur *corev1.ObjectReference) (bool, error) {
	if cur == nil || cur.UID == "" || from.UID == cur.UID || storage.MadeFor(from.Name) != cur.UID {
		return false, nil
	}
	to, err := liveClaim(cur, v)
	if err != nil || to == nil || !storage.WaitsForData(to) {
		return false, err
	}
	others, err := v.VolumesClaiming(to.Namespace, to.Name)
	if err != nil {
		return false, err
	}
	for _, pv := range others {
		if pv.Name != r.PV.Name && storage.LinksTo(pv.Spec.ClaimRef, to) {
			return false, nil
		}
	}
	return true, nil
}
