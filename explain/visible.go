package explain

import (
	"github.com/pvguard/pvguard/internal/access"
)

// This file cuts an explanation down to what its caller may read (access.Reader), as
// internal/web cuts the report and the dashboard: the API and the pages serve nothing else.

// claimForReader hides, in a claim's explanation made from in, every other claim the caller
// cannot read: whom a candidate volume is bound, pre-bound, reserved or planned for, in every
// value and sentence. The caller may read the claim itself (the handler checked).
func claimForReader(rd *access.Reader, in Input, e *Explanation) {
	if e == nil || rd.AllClaims {
		return
	}
	s := rd.Scrubber(in.state().Claims(), in.state().Volumes())
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

// volumeForReader is a volume's explanation made from in as the caller may read it (the handler
// checked they may read the volume): its findings only if they may list volumes, texts scrubbed.
func volumeForReader(rd *access.Reader, in Input, e *VolumeExplanation) {
	if e == nil || rd.Full() {
		return
	}
	if !rd.Volumes {
		e.Findings = nil
	}
	s := rd.Scrubber(in.state().Claims(), in.state().Volumes())
	if s.HidesClaim(e.Claim) {
		e.Claim = access.Hidden
	}
	e.Claim, e.ClaimState, e.Next = s.String(e.Claim), s.String(e.ClaimState), s.String(e.Next)
	e.Findings = s.Strings(e.Findings)
	for i := range e.Finalizers {
		e.Finalizers[i].WaitsFor = s.String(e.Finalizers[i].WaitsFor)
	}
}
