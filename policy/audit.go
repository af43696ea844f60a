package policy

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Snapshot is a fixed set of objects: the whole world an audit judges. It is also a View, so
// the admission rules can read related objects from it.
type Snapshot struct {
	PVs     []*corev1.PersistentVolume
	PVCs    []*corev1.PersistentVolumeClaim
	Nodes   []*corev1.Node
	Classes []*storagev1.StorageClass
}

var _ View = &Snapshot{}

func (s *Snapshot) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	for _, pv := range s.PVs {
		if pv.Name == name {
			return pv, nil
		}
	}
	return nil, nil
}

func (s *Snapshot) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	for _, pvc := range s.PVCs {
		if pvc.Namespace == namespace && pvc.Name == name {
			return pvc, nil
		}
	}
	return nil, nil
}

func (s *Snapshot) ClaimsNamingVolume(volumeName string) ([]*corev1.PersistentVolumeClaim, error) {
	var out []*corev1.PersistentVolumeClaim
	for _, pvc := range s.PVCs {
		if pvc.Spec.VolumeName == volumeName {
			out = append(out, pvc)
		}
	}
	return out, nil
}

func (s *Snapshot) VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error) {
	var out []*corev1.PersistentVolume
	for _, pv := range s.PVs {
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == namespace && ref.Name == name {
			out = append(out, pv)
		}
	}
	return out, nil
}

func (s *Snapshot) Node(name string) (*corev1.Node, error) {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return nil, nil
}

func (s *Snapshot) StorageClasses() ([]*storagev1.StorageClass, error) { return s.Classes, nil }

// transitionRules judge a change, not a state, so the audit does not evaluate them. PVG002 is
// among them: a claimRef naming a claim that is gone describes a released volume once it has been
// written, and PVG020 reports the states that are wrong (a Bound volume whose claim is gone).
var transitionRules = map[RuleID]bool{"PVG002": true, "PVG003": true, "PVG011": true, "PVG012": true, "PVG013": true}

// Audit judges every object of a snapshot: the admission rules that describe a state (each
// object as if it had just been written), then the audit-only rules PVG020-PVG024. A violation
// seen from both halves of a pair is reported once, on the claim. Exemptions apply as at admission, matched
// by namespace only (an audit has no requester). now dates the released-aging rule.
func (e *Engine) Audit(s *Snapshot, now time.Time) ([]Finding, error) {
	var reviews []*Review
	for _, sc := range s.Classes {
		reviews = append(reviews, &Review{Kind: KindStorageClass, Operation: OperationCreate, SC: sc})
	}
	// Claims before volumes: a violated pair is then reported on the claim, in its namespace,
	// where the tenant who owns it sees it.
	for _, pvc := range s.PVCs {
		reviews = append(reviews, &Review{Kind: KindPersistentVolumeClaim, Operation: OperationCreate, PVC: pvc})
	}
	for _, pv := range s.PVs {
		reviews = append(reviews, &Review{Kind: KindPersistentVolume, Operation: OperationCreate, PV: pv})
	}
	var out []Finding
	seen := map[string]bool{}
	add := func(f Finding) {
		k := string(f.Rule) + "\x00" + f.Message
		if !seen[k] {
			seen[k] = true
			out = append(out, f)
		}
	}
	for _, r := range reviews {
		ns := r.namespaces()
		for i := range e.rules {
			rl := &e.rules[i]
			if transitionRules[rl.ID] || !rl.appliesTo(r.Kind) {
				continue
			}
			action := e.cfg.ActionFor(rl)
			if action == ActionOff || e.cfg.Exempt(rl, ns, UserInfo{}) {
				continue
			}
			found, err := rl.Check(r, s, e.cfg)
			if err != nil {
				return nil, fmt.Errorf("auditing %s with %s: %w", r.Object(), rl.ID, err)
			}
			for _, f := range found {
				f.Rule, f.Name, f.Action = rl.ID, rl.Name, action
				if f.Object.Kind == "" {
					f.Object = r.Object()
				}
				add(f)
			}
		}
	}
	for _, rl := range AuditRules() {
		action := e.cfg.ActionFor(&rl)
		if action == ActionOff {
			continue
		}
		for _, f := range rl.audit(s, e.cfg, now) {
			var ns []string
			if f.Object.Namespace != "" {
				ns = []string{f.Object.Namespace}
			}
			if e.cfg.Exempt(&rl, ns, UserInfo{}) {
				continue
			}
			f.Rule, f.Name, f.Action = rl.ID, rl.Name, action
			add(f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Rule != out[j].Rule {
			return out[i].Rule < out[j].Rule
		}
		return out[i].Object.String() < out[j].Object.String()
	})
	return out, nil
}
