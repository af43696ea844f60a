package audit

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/internal/access"
	"github.com/pvguard/pvguard/policy"
)

// This file is where every answer of the read endpoints is cut down to what its caller may read
// (access.Reader): the report, the dashboard's tables, and the explanations.

// visibility is a caller's reader with the scrubber over the cluster's claims and volumes, and
// the cluster's objects as that caller may see them (for the report's count).
type visibility struct {
	rd *access.Reader
	sc *access.Scrubber
	// objects is how many claims, volumes and classes the caller may read.
	objects int
}

// visibilityOf reads, for a caller who may not read everything, the cluster's claims and volumes
// from the cache, to know which names to hide; a caller who may read everything needs none.
func visibilityOf(ctx context.Context, rd *access.Reader, c client.Reader) (*visibility, error) {
	if rd.Full() || c == nil {
		if !rd.Full() {
			return nil, fmt.Errorf("no cache to filter the answer with")
		}
		return &visibility{rd: rd, sc: rd.Scrubber(nil, nil), objects: -1}, nil
	}
	snap, err := ReadSnapshot(ctx, c)
	if err != nil {
		return nil, err
	}
	return visibilityOfSnapshot(rd, snap), nil
}

func visibilityOfSnapshot(rd *access.Reader, snap *clusterstate.State) *visibility {
	v := &visibility{rd: rd, sc: rd.Scrubber(snap.Claims(), snap.Volumes())}
	for _, c := range snap.Claims() {
		if rd.Claims(c.Namespace) {
			v.objects++
		}
	}
	for _, pv := range snap.Volumes() {
		if rd.Volume(pv) {
			v.objects++
		}
	}
	if rd.Classes {
		v.objects += len(snap.Classes())
	}
	return v
}

// finding reports whether the caller may see a finding: a claim's in a namespace whose claims
// they may read, a volume's or a class's if they may list those.
func (v *visibility) finding(f Finding) bool {
	switch f.Kind {
	case string(policy.KindPersistentVolumeClaim):
		return v.rd.Claims(f.Namespace)
	case string(policy.KindPersistentVolume):
		return v.rd.Volumes
	case string(policy.KindStorageClass):
		return v.rd.Classes
	}
	return v.rd.Full()
}

// report is rep as the caller may see it: their findings only, their texts scrubbed, the totals
// counted again, and the audit's errors (which may name anything) only for a full reader.
func (v *visibility) report(rep Report) Report {
	if v.rd.Full() {
		return rep
	}
	out := Report{Time: rep.Time, Summary: Summary{Objects: v.objects, Actions: map[string]int{}}, Findings: []Finding{},
		Filtered: v.rd.Filtered()}
	for _, f := range rep.Findings {
		if !v.finding(f) {
			continue
		}
		f.Message, f.Hint = v.sc.String(f.Message), v.sc.String(f.Hint)
		out.Findings = append(out.Findings, f)
		out.Summary.Actions[f.Action]++
	}
	return out
}

// bindings are the rows of the volumes the caller may read.
func (v *visibility) bindings(rows []Binding) []Binding {
	if v.rd.Full() {
		return rows
	}
	var out []Binding
	for _, b := range rows {
		if v.rd.Volumes || (b.Claim != "" && v.rd.Claims(namespaceOf(b.Claim))) {
			if v.sc.HidesClaim(b.Claim) {
				b.Claim, b.ClaimPhase = access.Hidden, ""
			}
			out = append(out, b)
		}
	}
	return out
}

func namespaceOf(key string) string {
	for i := range len(key) {
		if key[i] == '/' {
			return key[:i]
		}
	}
	return ""
}

// pending are the pending claims the caller may read.
func (v *visibility) pending(rows []PendingClaim) []PendingClaim {
	if v.rd.AllClaims {
		return rows
	}
	var out []PendingClaim
	for _, p := range rows {
		if v.rd.Claims(p.Namespace) {
			out = append(out, p)
		}
	}
	return out
}

// claimExplanation is a claim's explanation with every other claim the caller cannot read
// hidden: whom a candidate volume is bound, pre-bound, reserved or planned for, in every value
// and sentence. The caller may read the claim itself (the handler checked).
func (v *visibility) claimExplanation(e *explain.Explanation) {
	if e == nil || v.rd.AllClaims {
		return
	}
	s := v.sc
	e.State = s.String(e.State)
	e.Pods = s.Strings(e.Pods)
	for i := range e.Candidates {
		c := &e.Candidates[i]
		c.Volume = s.String(c.Volume)
		if s.HidesClaim(c.TakenBy) {
			c.TakenBy = access.Hidden
		}
		c.TakenBy = s.String(c.TakenBy)
		for j := range c.Checks {
			c.Checks[j].Value = s.String(c.Checks[j].Value)
		}
	}
	e.Verdict.Volume, e.Verdict.Closest = s.String(e.Verdict.Volume), s.String(e.Verdict.Closest)
	e.Verdict.Changes = s.Strings(e.Verdict.Changes)
	e.Verdict.Text = s.String(e.Verdict.Text)
}

// volumeExplanation is a volume's explanation as the caller may read it (the handler checked
// they may read the volume): its findings only if they may list volumes, texts scrubbed.
func (v *visibility) volumeExplanation(e *explain.VolumeExplanation) {
	if e == nil || v.rd.Full() {
		return
	}
	if !v.rd.Volumes {
		e.Findings = nil
	}
	s := v.sc
	if s.HidesClaim(e.Claim) {
		e.Claim = access.Hidden
	}
	e.Claim, e.ClaimState, e.Next = s.String(e.Claim), s.String(e.ClaimState), s.String(e.Next)
	e.Findings = s.Strings(e.Findings)
	for i := range e.Finalizers {
		e.Finalizers[i].WaitsFor = s.String(e.Finalizers[i].WaitsFor)
	}
}
