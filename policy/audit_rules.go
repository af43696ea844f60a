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
		{ID: "PVG020", Name: "dangling-claimref", Default: ActionAudit, Summary: "a Bound volume's claimRef names a claim that no longer exists (or was re-created)", audit: auditDanglingClaimRef},
		{ID: "PVG021", Name: "claim-lost", Default: ActionAudit, Summary: "a claim is Lost, or bound to a volume that does not exist", audit: auditClaimLost},
		{ID: "PVG022", Name: "misbound-pair", Default: ActionAudit, Summary: "a claim names a volume whose claimRef is not that claim", audit: auditMisbound},
		{ID: "PVG023", Name: "released-aging", Default: ActionAudit, Summary: "a Released volume with reclaim policy Retain has waited longer than the configured age", audit: auditReleasedAging},
		{ID: "PVG024", Name: "failed-volume", Default: ActionAudit, Summary: "a volume is in phase Failed", audit: auditFailed},
	}
}

func auditDanglingClaimRef(s *Snapshot, _ *Config, _ time.Time) []Finding {
	var out []Finding
	for _, pv := range s.PVs {
		ref := pv.Spec.ClaimRef
		if pv.Status.Phase != corev1.VolumeBound || ref == nil || ref.UID == "" {
			continue
		}
		pvc, _ := s.PersistentVolumeClaim(ref.Namespace, ref.Name)
		what := "no longer exists"
		switch {
		case pvc == nil:
		case pvc.UID != ref.UID:
			what = fmt.Sprintf("was re-created (uid %s, not %s)", pvc.UID, ref.UID)
		default:
			continue
		}
		out = append(out, Finding{
			Object: pvRef(pv), Field: "spec.claimRef",
			Message: fmt.Sprintf("%s is Bound to %s, which %s", pvRef(pv), claimRefString(ref), what),
			Hint:    "let the binder release the volume (check that it runs), or clear spec.claimRef once the data is safe",
		})
	}
	return out
}

func auditClaimLost(s *Snapshot, _ *Config, _ time.Time) []Finding {
	var out []Finding
	for _, pvc := range s.PVCs {
		_, completed := pvc.Annotations[AnnBindCompleted]
		switch {
		case pvc.Status.Phase == corev1.ClaimLost:
			out = append(out, Finding{Object: pvcRef(pvc), Field: "status.phase",
				Message: fmt.Sprintf("%s is Lost: the volume it was bound to is gone or bound elsewhere", pvcRef(pvc)),
				Hint:    "restore the volume with spec.claimRef pointing at this claim, or delete the claim"})
		case completed && pvc.Spec.VolumeName != "":
			if pv, _ := s.PersistentVolume(pvc.Spec.VolumeName); pv == nil {
				out = append(out, Finding{Object: pvcRef(pvc), Field: "spec.volumeName",
					Message: fmt.Sprintf("%s is bound to PersistentVolume %s, which does not exist", pvcRef(pvc), pvc.Spec.VolumeName),
					Hint:    "restore the volume with spec.claimRef pointing at this claim, or delete the claim"})
			}
		}
	}
	return out
}

func auditMisbound(s *Snapshot, _ *Config, _ time.Time) []Finding {
	var out []Finding
	for _, pvc := range s.PVCs {
		if pvc.Spec.VolumeName == "" {
			continue
		}
		pv, _ := s.PersistentVolume(pvc.Spec.VolumeName)
		if pv == nil {
			continue
		}
		ref := pv.Spec.ClaimRef
		if ref != nil && ref.Namespace == pvc.Namespace && ref.Name == pvc.Name && (ref.UID == "" || ref.UID == pvc.UID) {
			continue
		}
		other := "no claim"
		if ref != nil {
			other = claimRefString(ref)
			if ref.UID != "" {
				other += " (uid " + string(ref.UID) + ")"
			}
		}
		out = append(out, Finding{Object: pvcRef(pvc), Field: "spec.volumeName",
			Message: fmt.Sprintf("%s names %s, but the volume's claimRef points at %s", pvcRef(pvc), pvRef(pv), other),
			Hint:    "bind the claim to a volume that points back at it; do not hand-edit claimRef of a volume in use"})
	}
	return out
}

func auditReleasedAging(s *Snapshot, c *Config, now time.Time) []Finding {
	maxAge := c.ReleasedMaxAge.Duration
	if maxAge <= 0 {
		maxAge = DefaultReleasedMaxAge
	}
	var out []Finding
	for _, pv := range s.PVs {
		if pv.Status.Phase != corev1.VolumeReleased || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
			continue
		}
		since := pv.CreationTimestamp.Time
		if t := pv.Status.LastPhaseTransitionTime; t != nil {
			since = t.Time
		}
		if since.IsZero() || now.Sub(since) <= maxAge {
			continue
		}
		out = append(out, Finding{Object: pvRef(pv), Field: "status.phase",
			Message: fmt.Sprintf("%s has been Released (reclaim policy Retain) for %s, longer than %s", pvRef(pv), now.Sub(since).Round(time.Hour), maxAge),
			Hint:    "recover or delete its data, then delete the volume, or mark it " + "pvguard.io/reuse-when-released=true to make it Available again"})
	}
	return out
}

func auditFailed(s *Snapshot, _ *Config, _ time.Time) []Finding {
	var out []Finding
	for _, pv := range s.PVs {
		if pv.Status.Phase != corev1.VolumeFailed {
			continue
		}
		msg := fmt.Sprintf("%s is Failed", pvRef(pv))
		if pv.Status.Message != "" {
			msg += ": " + pv.Status.Message
		}
		out = append(out, Finding{Object: pvRef(pv), Field: "status.phase", Message: msg,
			Hint: "clean up the storage by hand, then delete the volume (its reclaim policy could not be carried out)"})
	}
	return out
}
