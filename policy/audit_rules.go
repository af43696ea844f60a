package policy

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// DefaultReleasedMaxAge is how long a Released volume with reclaim policy Retain may wait before
// PVG023 reports it.
const DefaultReleasedMaxAge = 7 * 24 * time.Hour

// AuditRules returns the rules that judge existing state rather than writes (PVG020-PVG024).
// Like the admission rules they have an action and exemptions in the config.
func AuditRules() []Rule {
	return []Rule{
		{ID: "PVG020", Name: "dangling-claimref", Default: ActionAudit, Kinds: []Kind{KindPersistentVolume}, Summary: "a Bound volume's claimRef names a claim that no longer exists (or was re-created)", audit: auditDanglingClaimRef},
		{ID: "PVG021", Name: "claim-lost", Default: ActionAudit, Kinds: []Kind{KindPersistentVolumeClaim}, Summary: "a claim is Lost, or bound to a volume that does not exist", audit: auditClaimLost},
		{ID: "PVG022", Name: "misbound-pair", Default: ActionAudit, Kinds: []Kind{KindPersistentVolumeClaim}, Summary: "a claim names a volume whose claimRef is not that claim", audit: auditMisbound},
		{ID: "PVG023", Name: "released-aging", Default: ActionAudit, Kinds: []Kind{KindPersistentVolume}, Summary: "a Released volume with reclaim policy Retain has waited longer than the configured age", audit: auditReleasedAging},
		{ID: "PVG024", Name: "failed-volume", Default: ActionAudit, Kinds: []Kind{KindPersistentVolume}, Summary: "a volume is in phase Failed", audit: auditFailed},
	}
}

func auditDanglingClaimRef(r *Review, v View, _ *Config, _ time.Time) ([]Finding, error) {
	pv := r.PV
	ref := pv.Spec.ClaimRef
	if pv.Status.Phase != corev1.VolumeBound || ref == nil || ref.UID == "" {
		return nil, nil
	}
	pvc, err := namedClaim(ref, v)
	if err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("%s is Bound to %s, which no longer exists", pvRef(pv), claimRefString(ref))
	switch {
	case !NamesAClaim(ref):
		msg = fmt.Sprintf("%s is Bound, but its spec.claimRef names no claim (it has no name or no namespace)", pvRef(pv))
	case pvc == nil:
	case pvc.UID != ref.UID:
		msg = fmt.Sprintf("%s is Bound to %s, which was re-created (uid %s, not %s)", pvRef(pv), claimRefString(ref), pvc.UID, ref.UID)
	default:
		return nil, nil
	}
	return []Finding{{
		Object: pvRef(pv), Field: "spec.claimRef",
		Message: msg,
		Hint:    "let the binder release the volume (check that it runs), or clear spec.claimRef once the data is safe",
	}}, nil
}

func auditClaimLost(r *Review, v View, _ *Config, _ time.Time) ([]Finding, error) {
	pvc := r.PVC
	_, completed := pvc.Annotations[AnnBindCompleted]
	switch {
	case pvc.Status.Phase == corev1.ClaimLost:
		return []Finding{{Object: pvcRef(pvc), Field: "status.phase",
			Message: fmt.Sprintf("%s is Lost: the volume it was bound to is gone or bound elsewhere", pvcRef(pvc)),
			Hint:    "restore the volume with spec.claimRef pointing at this claim, or delete the claim"}}, nil
	case completed && pvc.Spec.VolumeName != "":
		pv, err := v.PersistentVolume(pvc.Spec.VolumeName)
		if err != nil || pv != nil {
			return nil, err
		}
		return []Finding{{Object: pvcRef(pvc), Field: "spec.volumeName",
			Message: fmt.Sprintf("%s is bound to PersistentVolume %s, which does not exist", pvcRef(pvc), pvc.Spec.VolumeName),
			Hint:    "restore the volume with spec.claimRef pointing at this claim, or delete the claim"}}, nil
	}
	return nil, nil
}

func auditMisbound(r *Review, v View, _ *Config, _ time.Time) ([]Finding, error) {
	pvc := r.PVC
	if pvc.Spec.VolumeName == "" {
		return nil, nil
	}
	pv, err := v.PersistentVolume(pvc.Spec.VolumeName)
	if pv == nil {
		return nil, err
	}
	// A claim that completed its binding needs the volume to carry its uid: upstream marks it Lost
	// when the uid is missing. Before that, a claimRef by name is a pre-binding in progress.
	ref := pv.Spec.ClaimRef
	if linksTo(ref, pvc) || !completedTo(pvc, pv.Name) && claimRefNames(pv, pvc) {
		return nil, nil
	}
	other := "no claim"
	if ref != nil {
		other = linkString(ref)
	}
	return []Finding{{Object: pvcRef(pvc), Field: "spec.volumeName",
		Message: fmt.Sprintf("%s names %s, but the volume's claimRef points at %s", pvcRef(pvc), pvRef(pv), other),
		Hint:    "bind the claim to a volume that points back at it; do not hand-edit claimRef of a volume in use"}}, nil
}

func auditReleasedAging(r *Review, _ View, c *Config, now time.Time) ([]Finding, error) {
	pv := r.PV
	maxAge := c.ReleasedMaxAge.Duration
	if maxAge <= 0 {
		maxAge = DefaultReleasedMaxAge
	}
	if pv.Status.Phase != corev1.VolumeReleased || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		return nil, nil
	}
	since := pv.CreationTimestamp.Time
	if t := pv.Status.LastPhaseTransitionTime; t != nil {
		since = t.Time
	}
	if since.IsZero() || now.Sub(since) <= maxAge {
		return nil, nil
	}
	return []Finding{{Object: pvRef(pv), Field: "status.phase",
		Message: fmt.Sprintf("%s has been Released (reclaim policy Retain) for %s, longer than %s", pvRef(pv), now.Sub(since).Round(time.Hour), maxAge),
		Hint:    "recover or delete its data, then delete the volume, or mark it " + AnnReuseWhenReleased + "=true to make it Available again"}}, nil
}

func auditFailed(r *Review, _ View, _ *Config, _ time.Time) ([]Finding, error) {
	pv := r.PV
	if pv.Status.Phase != corev1.VolumeFailed {
		return nil, nil
	}
	msg := fmt.Sprintf("%s is Failed", pvRef(pv))
	if pv.Status.Message != "" {
		msg += ": " + pv.Status.Message
	}
	return []Finding{{Object: pvRef(pv), Field: "status.phase", Message: msg,
		Hint: "clean up the storage by hand, then delete the volume (its reclaim policy could not be carried out)"}}, nil
}
