package policy

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
)

// DefaultReleasedMaxAge is how long a Released volume with reclaim policy Retain may wait before
// PVG023 reports it.
const DefaultReleasedMaxAge = 7 * 24 * time.Hour

func pvg023ReleasedAging() Rule {
	return Rule{
		ID:          "PVG023",
		Name:        "released-aging",
		Default:     ActionAudit,
		Judges:      JudgesStoredState,
		Kinds:       []Kind{KindPersistentVolume},
		Summary:     "a Released volume with reclaim policy Retain has waited longer than the configured age",
		Check:       auditReleasedAging,
		StatusReads: map[Kind][]string{KindPersistentVolume: {"phase", "lastPhaseTransitionTime"}},
	}
}

func auditReleasedAging(r *Review, _ View, c *Config) ([]Finding, error) {
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
	if since.IsZero() || r.now.Sub(since) <= maxAge {
		return nil, nil
	}
	return []Finding{{Object: pvRef(pv), Field: "status.phase",
		Message: Textf("%s has been Released (reclaim policy Retain) for %s, longer than %s", pvRef(pv), Word(r.now.Sub(since).Round(time.Hour).String()), Word(maxAge.String())),
		Hint:    Plain("recover or delete its data, then delete the volume, or mark it " + storage.AnnReuseWhenReleased + "=true to make it Available again"),
		fixes: []Fix{{Writes: []Write{{Object: pvRef(pv), Delete: true}}},
			{Writes: []Write{{Object: pvRef(pv), Set: map[string]any{annPath(storage.AnnReuseWhenReleased): "true"}}}}}}}, nil
}
