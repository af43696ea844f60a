package web

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/access"
	"github.com/pvguard/pvguard/policy"
)

// This file is where every answer of the report and the dashboard is cut down to what its caller
// may read (access.Reader); package explain cuts its explanations the same way (explain/visible.go).

// visibility is a caller's reader, the audience its answers are rendered for, and the cluster's
// objects as that caller may see them (for the report's count).
type visibility struct {
	rd *access.Reader
	// aud is the caller as the audience of the findings' texts.
	aud policy.Audience
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
		return &visibility{rd: rd, aud: policy.Everyone, objects: -1}, nil
	}
	st, err := clusterstate.Read(ctx, c)
	if err != nil {
		return nil, err
	}
	return visibilityOfState(rd, st), nil
}

// visibilityOfState is the caller's visibility over the cluster state st.
func visibilityOfState(rd *access.Reader, st *clusterstate.State) *visibility {
	v := &visibility{rd: rd, aud: rd.Audience(st, nil)}
	for _, c := range st.Claims() {
		if rd.Claims(c.Namespace) {
			v.objects++
		}
	}
	for _, pv := range st.Volumes() {
		if rd.Volume(pv) {
			v.objects++
		}
	}
	if rd.Classes {
		v.objects += len(st.Classes())
	}
	return v
}

// finding reports whether the caller may see a finding: a claim's in a namespace whose claims
// they may read, a volume's or a class's if they may list those.
func (v *visibility) finding(f audit.Finding) bool {
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

// report is rep as the caller may see it: their findings only, their texts rendered for them, the totals
// counted again, and the audit's errors (which may name anything) only for a full reader.
func (v *visibility) report(rep audit.Report) audit.Report {
	if v.rd.Full() {
		return rep
	}
	out := audit.Report{Time: rep.Time, Summary: audit.Summary{Objects: v.objects, Actions: map[string]int{}}, Findings: []audit.Finding{},
		Filtered: v.rd.Filtered()}
	for _, f := range rep.Findings {
		if !v.finding(f) {
			continue
		}
		policy.Redact(&f, v.aud)
		out.Findings = append(out.Findings, f)
		out.Summary.Actions[f.Action]++
	}
	return out
}

// bindings are the rows of the volumes the caller may read, their claims rendered for them.
func (v *visibility) bindings(rows []audit.Binding) []audit.Binding {
	if v.rd.Full() {
		return rows
	}
	var out []audit.Binding
	for _, b := range rows {
		if v.rd.Volumes || (b.ClaimRef != nil && v.rd.Claims(b.ClaimRef.Namespace)) {
			if b.ClaimRef != nil {
				ref := *b.ClaimRef
				b.ClaimRef = &ref // the runner's row is shared by every caller
			}
			policy.Redact(&b, v.aud)
			out = append(out, b)
		}
	}
	return out
}

// pending are the pending claims the caller may read.
func (v *visibility) pending(rows []audit.PendingClaim) []audit.PendingClaim {
	if v.rd.AllClaims {
		return rows
	}
	var out []audit.PendingClaim
	for _, p := range rows {
		if v.rd.Claims(p.Namespace) {
			out = append(out, p)
		}
	}
	return out
}
