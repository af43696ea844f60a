package explain

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// notInLeaseName is what the CSI sidecars' leader election replaces with "-" in a lock's name.
var notInLeaseName = regexp.MustCompile("[^a-zA-Z0-9-]")

// ProvisionerLeaseName is the name of the Lease that the CSI external-provisioner for provisioner
// holds while it runs with leader election (--leader-election, on in upstream's Deployment): the
// provisioner's name with every character other than a letter, a digit or "-" made "-", and an
// "X" added after a trailing "-", as csi-lib-utils' leaderelection names it (the provisioner
// passes its name with "/" made "-"; csi.example.com holds csi-example-com). It lives in the
// provisioner's namespace, or the one --leader-election-namespace names. "" for no provisioner.
func ProvisionerLeaseName(provisioner string) string {
	if provisioner == "" {
		return ""
	}
	name := notInLeaseName.ReplaceAllString(provisioner, "-")
	if strings.HasSuffix(name, "-") {
		name += "X"
	}
	return name
}

// What Explanation.ProvisionerRunning says.
const (
	ProvisionerRunningYes     = "yes"
	ProvisionerRunningNo      = "no"
	ProvisionerRunningUnknown = "unknown"
)

// provisionerLease says, for a claim waiting for its provisioner, whether the provisioner appears
// to run: a provisioner with leader election renews its Lease every few seconds while it runs, and
// one whose Lease was not renewed within the Lease's own duration has stopped (or lost the API
// server): another replica would have taken it over. Without leader election there is no Lease,
// and nothing the API holds tells whether it runs.
func (e *Explanation) provisionerLease(in Input) {
	if e.WaitingFor != WaitingForProvisioner || !in.LeasesRead {
		return
	}
	name := ProvisionerLeaseName(e.Provisioner)
	var lease *coordinationv1.Lease
	for _, l := range in.Leases {
		if l.Name == name && (lease == nil || renewed(l).After(renewed(lease))) {
			lease = l
		}
	}
	if lease == nil {
		e.ProvisionerRunning = ProvisionerRunningUnknown
		e.State += fmt.Sprintf("; whether provisioner %s runs is unknown: no Lease %s in any namespace (a provisioner without leader election holds none)", e.Provisioner, name)
		return
	}
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	duration := time.Duration(0)
	if d := lease.Spec.LeaseDurationSeconds; d != nil {
		duration = time.Duration(*d) * time.Second
	}
	at := renewed(lease)
	ago := now.Sub(at).Round(time.Second)
	if ago < 0 {
		ago = 0 // the holder's clock is ahead of ours
	}
	where := lease.Namespace + "/" + lease.Name
	switch {
	case holder != "" && !at.IsZero() && now.Before(at.Add(duration)):
		e.ProvisionerRunning = ProvisionerRunningYes
		e.State += fmt.Sprintf("; provisioner %s runs: Lease %s held by %s, renewed %s ago", e.Provisioner, where, holder, ago)
	case holder == "":
		e.ProvisionerRunning = ProvisionerRunningNo
		e.State += fmt.Sprintf("; provisioner %s appears not to run: its Lease %s is held by no one (released): is its provisioner running?", e.Provisioner, where)
	case at.IsZero():
		e.ProvisionerRunning = ProvisionerRunningNo
		e.State += fmt.Sprintf("; provisioner %s appears not to run: its Lease %s (held by %s) was never renewed: is its provisioner running?", e.Provisioner, where, holder)
	default:
		e.ProvisionerRunning = ProvisionerRunningNo
		e.State += fmt.Sprintf("; provisioner %s appears not to run: its Lease %s was not renewed in the last %s (held by %s, renewed %s ago): is its provisioner running?",
			e.Provisioner, where, duration, holder, ago)
	}
}

// renewed is when the lease was last renewed (or acquired), zero if never.
func renewed(l *coordinationv1.Lease) time.Time {
	if t := l.Spec.RenewTime; t != nil {
		return t.Time
	}
	if t := l.Spec.AcquireTime; t != nil {
		return t.Time
	}
	return time.Time{}
}
