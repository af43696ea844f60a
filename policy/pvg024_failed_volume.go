package policy

import (
	corev1 "k8s.io/api/core/v1"
)

func pvg024FailedVolume() Rule {
	return Rule{
		ID:          "PVG024",
		Name:        "failed-volume",
		Default:     ActionAudit,
		Judges:      JudgesStoredState,
		Kinds:       []Kind{KindPersistentVolume},
		Summary:     "a volume is in phase Failed",
		Check:       auditFailed,
		StatusReads: map[Kind][]string{KindPersistentVolume: {"phase", "message"}},
	}
}

func auditFailed(r *Review, _ View, _ *Config) ([]Finding, error) {
	pv := r.PV
	if pv.Status.Phase != corev1.VolumeFailed {
		return nil, nil
	}
	msg := Textf("%s is Failed", pvRef(pv))
	if pv.Status.Message != "" {
		msg = Textf("%s: %s", msg, Word(pv.Status.Message))
	}
	return []Finding{{Object: pvRef(pv), Field: "status.phase", Message: msg,
		Hint:  Plain("clean up the storage by hand, then delete the volume (its reclaim policy could not be carried out)"),
		fixes: []Fix{{Writes: []Write{{Object: pvRef(pv), Delete: true}}}}}}, nil
}
