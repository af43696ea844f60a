package storage

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The hand-off of a populated volume.
//
// A volume populator (lib-volume-populator's populator-machinery, KubeVirt CDI, KubeBlocks) fills
// a volume through a claim of its own, made for the user's claim and named from that claim's uid
// (prime-<uid>, tmp-pvc-<uid>), then moves the finished volume to the user's claim by pointing the
// volume's claimRef at it while its own claim is still live and bound; the PV controller binds the
// user's claim and marks the populator's claim Lost, and the populator deletes it.
//
// The state that tells this apart from a steal: the claim the volume leaves was made for the claim
// it goes to (its name ends with that claim's uid, which the apiserver chose at random when that
// claim was created, so no claim made before it can carry it), and the claim it goes to is waiting
// for its data (a data source, no volume of its own, no other volume linked to it). A tenant owns
// the claims it makes, so the most a forged hand-off can move is a volume of its own claim to
// another claim of its own making: it cannot name a claim it does not own after the uid of a
// claim that did not yet exist.

// uidLen is the length of the uids the apiserver gives objects (RFC 4122 text form).
const uidLen = 36

// MadeFor returns the uid a claim's name says it was made for (its name ends with "-<uid>"), or
// "" when it names none.
func MadeFor(name string) types.UID {
	if len(name) < uidLen+2 || name[len(name)-uidLen-1] != '-' {
		return ""
	}
	uid := name[len(name)-uidLen:]
	for i, c := range uid {
		dash := i == 8 || i == 13 || i == 18 || i == 23
		if dash != (c == '-') || !dash && !strings.ContainsRune("0123456789abcdef", c) {
			return ""
		}
	}
	return types.UID(uid)
}

// WaitsForData reports whether a claim waits for a populator or a clone to fill a volume for it:
// it has a data source and no volume yet.
func WaitsForData(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.Spec.VolumeName == "" && (pvc.Spec.DataSourceRef != nil || pvc.Spec.DataSource != nil)
}
