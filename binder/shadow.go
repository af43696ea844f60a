package binder

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
)

// ReasonBinderDisagreement is recorded in shadow mode on a claim the cluster's binder bound to
// another volume than pvguard would have.
const ReasonBinderDisagreement = "BinderDisagreement"

// shadowClaim remembers what pvguard would do for a claim and, once the cluster's binder has
// bound it, reports a different choice. Nothing is written. The event is read by whoever may read
// the claim's namespace's events: the volume pvguard would have chosen is named only when it is
// the namespace's (volumeFor), the one bound is the claim's own.
func (b *Binder) shadowClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim, a ClaimAction) {
	if a.NeedPlan {
		b.requestPlan()
		return
	}
	_, bound := claim.Annotations[storage.AnnBindCompleted]
	switch {
	case !bound && a.Bind != nil && a.Bind.Spec.ClaimRef == nil:
		// Only a free choice is pvguard's. A volume whose claimRef already names the claim was
		// pre-bound, possibly by the cluster's binder halfway through its own four writes, and
		// recording it would erase the choice to compare against.
		b.ledger.shadowChose(claim.UID, a.Bind.Name)
	case bound && claim.Spec.VolumeName != "":
		if want, decided := b.ledger.shadowTake(claim.UID); decided && want != claim.Spec.VolumeName {
			b.metrics.disagreements.Inc()
			readers := policy.NamespaceReaders(claim.Namespace, b.o.Views(ctx), b.o.Engine().Config())
			b.o.Recorder.Event(claim, corev1.EventTypeWarning, ReasonBinderDisagreement,
				fmt.Sprintf("the cluster's binder bound volume %q; pvguard would have bound %s", claim.Spec.VolumeName, volumeFor(readers, want)))
		}
	}
}
