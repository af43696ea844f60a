package explain

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pvguard/pvguard/internal/access"
	"github.com/pvguard/pvguard/policy"
)

// This file cuts an explanation down to what its caller may read (access.Reader), as
// internal/web cuts the report and the dashboard: the API and the pages serve nothing else. Every
// reference an explanation makes to another object is a policy.Text, rendered for the caller by
// policy.Redact; the rows of the volumes the caller may not read are counted instead of listed.

// HiddenVolumes counts the candidate volumes of one class that the caller may not read, by what
// keeps each from the claim.
type HiddenVolumes struct {
	Class string `json:"class"`
	Count int    `json:"count"`
	// Failing counts the volumes by the first check each fails (claimRef before the others: a
	// volume bound elsewhere; "fits" for none).
	Failing map[string]int `json:"failing"`
	// Text says it in one sentence: "3 volumes of class fast you cannot read: 2 too small, 1 bound".
	Text string `json:"text"`
}

// whyNot says, for the first check a hidden volume fails, what kind of volume it is.
var whyNot = map[Check]string{CheckClass: "of another class", CheckAttributesClass: "of another VolumeAttributesClass",
	CheckAccessModes: "without the access modes", CheckVolumeMode: "of another volume mode", CheckCapacity: "too small",
	CheckSelector: "not matching the selector", CheckNodeAffinity: "not reaching the node", CheckPhase: "not Available",
	CheckClaimRef: "bound", CheckReserved: "being bound to another claim", CheckPolicy: "refused by policy"}

// claimForReader is the explanation e, made from in, as a caller reading as rd may see it: the
// caller may read the claim itself (the handler checked).
func claimForReader(rd *access.Reader, in Input, e *Explanation) {
	if e == nil || rd.Full() {
		return
	}
	forAudience(rd.Audience(in.state(), nil), e)
}

// forAudience renders e for aud: the rows of volumes aud may not read become counts (Hidden),
// and every reference left is rendered for aud.
func forAudience(aud policy.Audience, e *Explanation) {
	groups := map[string]*HiddenVolumes{}
	kept := e.Candidates[:0:0]
	for _, c := range e.Candidates {
		if aud.Reads(policy.ObjectRef{Kind: policy.KindPersistentVolume, Name: c.Volume}) {
			kept = append(kept, c)
			continue
		}
		g := groups[c.Class]
		if g == nil {
			g = &HiddenVolumes{Class: c.Class, Failing: map[string]int{}}
			groups[c.Class] = g
		}
		g.Count++
		why := "fits"
		if failed := c.Failed(); len(failed) > 0 {
			why = string(failed[0].Check)
			if !c.passes(CheckClaimRef) {
				why = string(CheckClaimRef) // a bound volume is also not Available: bound says why
			}
		}
		g.Failing[why]++
	}
	e.Candidates = kept
	e.Hidden = nil
	for _, g := range groups {
		g.Text = hiddenText(g)
		e.Hidden = append(e.Hidden, *g)
	}
	sort.Slice(e.Hidden, func(i, j int) bool { return e.Hidden[i].Class < e.Hidden[j].Class })
	policy.Redact(e, aud)
}

func hiddenText(g *HiddenVolumes) string {
	noun := "volumes"
	if g.Count == 1 {
		noun = "volume"
	}
	var parts []string
	for _, c := range append(append([]Check{}, Checks...), "fits") {
		n := g.Failing[string(c)]
		if n == 0 {
			continue
		}
		what := whyNot[c]
		if c == "fits" {
			what = "fitting"
		}
		parts = append(parts, fmt.Sprintf("%d %s", n, what))
	}
	return fmt.Sprintf("%d %s of class %s you cannot read: %s", g.Count, noun, orNone(g.Class), strings.Join(parts, ", "))
}

// volumeForReader is a volume's explanation made from in as the caller may read it (the handler
// checked they may read the volume): its findings only if they may list volumes, and every
// reference rendered for them, as a claim's explanation is (forAudience).
func volumeForReader(rd *access.Reader, in Input, e *VolumeExplanation) {
	if e == nil || rd.Full() {
		return
	}
	if !rd.Volumes {
		e.Findings = nil
	}
	policy.Redact(e, rd.Audience(in.state(), nil))
	// Sorted as its reader reads them, so the order tells nothing of what they may not read.
	sort.Slice(e.Findings, func(i, j int) bool { return e.Findings[i].String() < e.Findings[j].String() })
}
