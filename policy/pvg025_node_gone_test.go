package policy_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

// hostTerms pins a volume to nodes by terms, each a list of requirements.
func hostTerms(terms ...[]corev1.NodeSelectorRequirement) testobj.PVMod {
	return func(pv *corev1.PersistentVolume) {
		sel := &corev1.NodeSelector{}
		for _, reqs := range terms {
			sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: reqs})
		}
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: sel}
	}
}

func in(key string, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

func TestNodeGone(t *testing.T) {
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	const zone = "topology.kubernetes.io/zone"
	data := testobj.PVC("team-a", "data-db-0", testobj.ClaimBoundTo("pv-local"), testobj.ClaimPhase(corev1.ClaimBound))
	local := func(mods ...testobj.PVMod) *corev1.PersistentVolume {
		return testobj.PV("pv-local", append([]testobj.PVMod{testobj.Class("local-storage"), testobj.NodeAffinity(corev1.LabelHostname, "node-1")}, mods...)...)
	}
	node2 := testobj.Node("node-2", map[string]string{zone: "z1"})
	for _, tc := range []struct {
		name   string
		pv     *corev1.PersistentVolume
		claims []*corev1.PersistentVolumeClaim
		nodes  []*corev1.Node
		pods   []*corev1.Pod
		want   string // text the finding must hold; "" for no finding
	}{
		{name: "the pods waiting on the claim are named",
			pv: local(testobj.BoundTo(data)), claims: []*corev1.PersistentVolumeClaim{data}, nodes: []*corev1.Node{node2},
			pods: []*corev1.Pod{testobj.Pod("team-a", "db-0", "", corev1.PodPending, "data-db-0"), testobj.Pod("team-a", "web", "node-2", corev1.PodRunning, "other")},
			want: "which it is bound to, can be scheduled; waiting on it: Pod team-a/db-0; its data went with the node"},
		{name: "a bound volume whose only node is gone names its claim and what frees it",
			pv: local(testobj.BoundTo(data)), claims: []*corev1.PersistentVolumeClaim{data}, nodes: []*corev1.Node{node2},
			want: "PersistentVolume pv-local can be used only on node node-1, which no longer exists, so no pod that uses PersistentVolumeClaim team-a/data-db-0, which it is bound to, can be scheduled; " +
				"its data went with the node: delete PersistentVolumeClaim team-a/data-db-0 (a StatefulSet then re-creates it, and it gets a new volume), then delete the volume once it is Released"},
		{name: "an Available volume whose only node is gone is to be deleted",
			pv: local(testobj.Phase(corev1.VolumeAvailable)), nodes: []*corev1.Node{node2},
			want: "can be used only on node node-1, which no longer exists; delete the volume: its storage went with the node"},
		{name: "a Released volume whose node is gone is to be deleted",
			pv: local(testobj.ClaimRef("team-a", "old", "u-old"), testobj.Phase(corev1.VolumeReleased)), nodes: []*corev1.Node{node2},
			want: "delete the volume: its storage went with the node"},
		{name: "a volume reserved for a claim names it",
			pv: local(testobj.ClaimRef("team-a", "pre", "")), nodes: []*corev1.Node{node2},
			want: "and it is reserved for PersistentVolumeClaim team-a/pre; delete the volume"},
		{name: "every host of every term gone",
			pv:    testobj.PV("pv-two", hostTerms([]corev1.NodeSelectorRequirement{in(corev1.LabelHostname, "node-1", "node-3")}, []corev1.NodeSelectorRequirement{in(corev1.LabelHostname, "node-4")})),
			nodes: []*corev1.Node{node2}, want: "only on nodes node-1, node-3, node-4, which no longer exist"},
		{name: "a host pinned by zone too is gone when the host is",
			pv:    testobj.PV("pv-zoned", hostTerms([]corev1.NodeSelectorRequirement{in(corev1.LabelHostname, "node-1"), in(zone, "z1")})),
			nodes: []*corev1.Node{node2}, want: "only on node node-1, which"},
		{name: "the node exists", pv: local(testobj.BoundTo(data)), nodes: []*corev1.Node{testobj.Node("node-1", nil), node2}},
		{name: "one of its hosts exists", pv: testobj.PV("pv-two", testobj.NodeAffinity(corev1.LabelHostname, "node-1", "node-2")), nodes: []*corev1.Node{node2}},
		{name: "a node of another name whose hostname label is the host exists",
			pv: local(), nodes: []*corev1.Node{testobj.Node("ip-10-0-0-1", map[string]string{corev1.LabelHostname: "node-1"})}},
		{name: "a node named as the host whose labels no longer match is not gone",
			pv:    testobj.PV("pv-zoned", hostTerms([]corev1.NodeSelectorRequirement{in(corev1.LabelHostname, "node-1"), in(zone, "z9")})),
			nodes: []*corev1.Node{testobj.Node("node-1", map[string]string{zone: "z1"})}},
		{name: "no node known (a dump without nodes, a cache not synced) judges nothing", pv: local(testobj.BoundTo(data))},
		{name: "a volume pinned by zone only may get nodes later", pv: testobj.PV("pv-zone", testobj.NodeAffinity(zone, "z9")), nodes: []*corev1.Node{node2}},
		{name: "a term that pins no host may match a node added later",
			pv:    testobj.PV("pv-mixed", hostTerms([]corev1.NodeSelectorRequirement{in(corev1.LabelHostname, "node-1")}, []corev1.NodeSelectorRequirement{in(zone, "z9")})),
			nodes: []*corev1.Node{node2}},
		{name: "a volume without node affinity", pv: testobj.PV("pv-net"), nodes: []*corev1.Node{node2}},
		{name: "a volume being deleted", pv: local(testobj.PVMeta(testobj.Deleting())), nodes: []*corev1.Node{node2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := clusterstate.New(tc.claims, []*corev1.PersistentVolume{tc.pv}, nil, tc.nodes).WithPods(tc.pods)
			rule, _ := policy.LookupRule("PVG025")
			e := policy.NewEngineWith(policy.DefaultConfig(), []policy.Rule{rule})
			found, err := e.AuditObject(tc.pv, st, now)
			if err != nil {
				t.Fatalf("AuditObject: %v", err)
			}
			switch {
			case tc.want == "" && len(found) > 0:
				t.Fatalf("findings %v, want none", found)
			case tc.want != "" && len(found) != 1:
				t.Fatalf("findings %v, want one holding %q", found, tc.want)
			case tc.want != "":
				if got := found[0].String(); !strings.Contains(got, tc.want) || found[0].Field != "spec.nodeAffinity" || found[0].Action != policy.ActionAudit {
					t.Errorf("finding %q on %s (%s), want it to hold %q, on spec.nodeAffinity, audit", got, found[0].Field, found[0].Action, tc.want)
				}
				// Its hosts are what explain says are gone.
				if gone := policy.NodesGone(tc.pv, tc.nodes); len(gone) == 0 {
					t.Errorf("NodesGone says no node is gone")
				}
				checkFixes(t, policy.DefaultConfig(), nil, st, found[0])
			}
			checkReads(t, rule, func(e *policy.Engine, v policy.View) { _, _ = e.AuditObject(tc.pv, v, now) }, policy.DefaultConfig(), st)
		})
	}
}

// TestNodeGoneConfirmed: a node missing from the cache is not reported as gone while a live list
// has it, nor while the live list is empty; a failed live list is an error, not a finding.
func TestNodeGoneConfirmed(t *testing.T) {
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	pv := testobj.PV("pv-local", testobj.NodeAffinity(corev1.LabelHostname, "node-1"), testobj.Phase(corev1.VolumeAvailable))
	cached := testobj.NewView(pv, testobj.Node("node-2", nil))
	e := policy.NewEngine(nil)
	found, err := e.AuditObject(pv, cached, now)
	if err != nil || len(found) != 1 || found[0].Rule != "PVG025" {
		t.Fatalf("on the cache: %v, %v; want PVG025", found, err)
	}
	for _, tc := range []struct {
		name string
		live *testobj.View
		want int
	}{
		{name: "the node is back live", live: testobj.NewView(pv, testobj.Node("node-1", nil), testobj.Node("node-2", nil))},
		{name: "no node listed live", live: testobj.NewView(pv)},
		{name: "gone live too", live: testobj.NewView(pv, testobj.Node("node-2", nil)), want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kept, err := e.Confirm(found, tc.live, now)
			if err != nil || len(kept) != tc.want {
				t.Fatalf("Confirm: %v, %v; want %d finding(s)", kept, err, tc.want)
			}
		})
	}
	broken := testobj.NewView(pv)
	broken.Err = errors.New("listing nodes: connection refused")
	if _, err := e.Confirm(found, broken, now); err == nil {
		t.Fatal("Confirm on a failing live view: no error")
	}
}

// TestAuditJudgesEachVolumesOwnAffinity audits, on one goroutine's memo, volumes some of which
// share one node affinity (as the informer cache shares equal ones) and some of which have equal
// affinities of their own: each volume is judged by its own affinity, whichever was parsed first.
func TestAuditJudgesEachVolumesOwnAffinity(t *testing.T) {
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	nodes := []*corev1.Node{testobj.Node("node-1", nil), testobj.Node("node-3", nil)}
	shared := map[string]*corev1.VolumeNodeAffinity{}
	var volumes []*corev1.PersistentVolume
	want := map[string]bool{}
	for i := range 60 {
		host := []string{"node-1", "node-2", "node-3"}[i%3]
		pv := testobj.PV(fmt.Sprintf("pv-%02d", i), testobj.Class("local-storage"), testobj.Phase(corev1.VolumeAvailable),
			testobj.NodeAffinity(corev1.LabelHostname, host))
		if i%2 == 0 {
			// Every other volume shares its host's one affinity.
			if a, ok := shared[host]; ok {
				pv.Spec.NodeAffinity = a
			} else {
				shared[host] = pv.Spec.NodeAffinity
			}
		}
		volumes = append(volumes, pv)
		want[pv.Name] = host == "node-2"
	}
	e := policy.NewEngine(nil)
	found, err := e.Audit(clusterstate.New(nil, volumes, nil, nodes), now, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range found {
		if f.Rule == "PVG025" {
			got[f.Object.Name] = true
		}
	}
	for _, pv := range volumes {
		if got[pv.Name] != want[pv.Name] {
			t.Errorf("%s (affinity %v): node gone reported %t, want %t", pv.Name, pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values, got[pv.Name], want[pv.Name])
		}
	}
}
