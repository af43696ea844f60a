package policytest

import (
	"time"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/policy"
)

// state is the fixtures as the engine takes them: the one place that knows which type holds the
// cluster's objects for the rules, the audit and the explanations. Everything else reads it
// through view, cluster and explainInput.
type state struct {
	cluster *clusterstate.State
	view    policy.View
}

// stateOf builds the state of a suite's fixtures: the cluster state the audit judges, which is
// also the view the admission rules read related objects through (policy.View), indexed once and
// shared by every case (it is only read).
func stateOf(f *Fixtures) *state {
	cluster := clusterstate.New(f.Claims, f.Volumes, f.Classes, f.Nodes)
	return &state{cluster: cluster, view: cluster}
}

// explainInput is what explain.Claim reads of the fixtures: the cluster state, the pods, and the
// Leases (read when the fixtures hold any, so that none of a provisioner's name means it holds
// none), with the engine and the binder's identity.
func (s *state) explainInput(f *Fixtures, engine *policy.Engine, identity policy.UserInfo, now time.Time) explain.Input {
	return explain.Input{
		State: s.cluster, Pods: f.Pods,
		Leases: f.Leases, LeasesRead: len(f.Leases) > 0,
		Policy: engine, Identity: identity, View: s.view, Now: now,
	}
}
