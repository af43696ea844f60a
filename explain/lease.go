package explain

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/pvguard/pvguard/policy"
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

// provisionerRunning says, for a claim waiting for its provisioner, whether the provisioner
// appears to run (Explanation.ProvisionerRunning), and the state with why: a provisioner with
// leader election renews its Lease every few seconds while it runs, and one whose Lease was not
// renewed within the Lease's own duration has stopped (or lost the API server): another replica
// would have taken it over. Without leader election there is no Lease, and nothing the API holds
// tells whether it runs.
func provisionerRunning(st claimState, in Input) (string, claimState) {
	if st.waitingFor != WaitingForProvisioner || !in.LeasesRead {
		return "", st
	}
	name := ProvisionerLeaseName(st.provisioner)
	var lease *coordinationv1.Lease
	for _, l := range in.Leases {
		if l.Name == name && (lease == nil || renewed(l).After(renewed(lease))) {
			lease = l
		}
	}
	if lease == nil {
		st.text = st.text.Append(policy.Plain(policy.Word(fmt.Sprintf("; whether provisioner %s runs is unknown: no Lease %s in any namespace (a provisioner without leader election holds none)", st.provisioner, name))))
		return ProvisionerRunningUnknown, st
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
		st.text = st.text.Append(policy.Plain(policy.Word(fmt.Sprintf("; provisioner %s runs: Lease %s held by %s, renewed %s ago", st.provisioner, where, holder, ago))))
		return ProvisionerRunningYes, st
	case holder == "":
		st.text = st.text.Append(policy.Plain(policy.Word(fmt.Sprintf("; provisioner %s appears not to run: its Lease %s is held by no one (released): is its provisioner running?", st.provisioner, where))))
	case at.IsZero():
		st.text = st.text.Append(policy.Plain(policy.Word(fmt.Sprintf("; provisioner %s appears not to run: its Lease %s (held by %s) was never renewed: is its provisioner running?", st.provisioner, where, holder))))
	default:
		st.text = st.text.Append(policy.Plain(policy.Word(fmt.Sprintf("; provisioner %s appears not to run: its Lease %s was not renewed in the last %s (held by %s, renewed %s ago): is its provisioner running?",
			st.provisioner, where, duration, holder, ago))))
	}
	return ProvisionerRunningNo, st
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
