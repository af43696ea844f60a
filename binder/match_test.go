package binder

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkFitsUnbound is the planner's predicate for one (claim, volume) pair of a static
// local-disk pool, asked for every pair of a class on every plan: a claim that selects volumes by
// label, scheduled to a node or not, against local volumes with node affinity that fit it.
// "parsed-per-pair" parses the selector and the affinity for every pair, as fitsUnbound alone
// does (and the planner did); "per-plan" through one fitCache, as the planner does now.
func BenchmarkFitsUnbound(b *testing.B) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"kubernetes.io/hostname": "node-1"}}}
	claim := assignPVC("team-a/data", "10Gi", func(c *corev1.PersistentVolumeClaim) {
		c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"disk-type": "nvme"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"gold", "silver"}}}}
	})
	for _, tc := range []struct {
		name      string
		scheduled bool
		shared    bool
	}{{"unscheduled/parsed-per-pair", false, false}, {"unscheduled/per-plan", false, true},
		{"scheduled/parsed-per-pair", true, false}, {"scheduled/per-plan", true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			vols := make([]*corev1.PersistentVolume, 100)
			for i := range vols {
				vols[i] = assignPV(fmt.Sprintf("local-%d", i), "20Gi", func(v *corev1.PersistentVolume) {
					v.Labels = map[string]string{"disk-type": "nvme", "tier": "gold"}
					v.Status.Phase = corev1.VolumeAvailable
					v.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1"}}},
					}}}}
				})
			}
			fits := fitsUnbound
			if tc.shared {
				fits = newFitCache().fitsUnbound
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if !fits(claim, vols[i%len(vols)], node, tc.scheduled, false) {
					b.Fatal("the pair does not fit")
				}
				i++
			}
		})
	}
}

// TestFitCacheAgreesWithFitsUnbound: a plan's shared fitCache answers every (claim, volume, node)
// question as parsing afresh does, on a first and a second pass (the second from what it
// parsed), for claims with and without (valid, invalid) selectors and volumes with and without
// (valid, invalid) node affinity.
func TestFitCacheAgreesWithFitsUnbound(t *testing.T) {
	selector := func(sel *metav1.LabelSelector) func(*corev1.PersistentVolumeClaim) {
		return func(c *corev1.PersistentVolumeClaim) { c.Spec.Selector = sel }
	}
	claims := []*corev1.PersistentVolumeClaim{
		assignPVC("a/none", "1Gi"),
		assignPVC("a/nvme", "1Gi", selector(&metav1.LabelSelector{MatchLabels: map[string]string{"disk-type": "nvme"}})),
		assignPVC("a/gold", "1Gi", selector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"gold"}}}})),
		assignPVC("a/invalid", "1Gi", selector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: "Near", Values: []string{"gold"}}}})),
		assignPVC("a/too-big", "100Gi", selector(&metav1.LabelSelector{MatchLabels: map[string]string{"disk-type": "nvme"}})),
	}
	affinity := func(op corev1.NodeSelectorOperator, values ...string) func(*corev1.PersistentVolume) {
		return func(v *corev1.PersistentVolume) {
			v.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: op, Values: values}},
			}}}}
		}
	}
	labelled := func(l map[string]string) func(*corev1.PersistentVolume) {
		return func(v *corev1.PersistentVolume) { v.Labels, v.Status.Phase = l, corev1.VolumeAvailable }
	}
	volumes := []*corev1.PersistentVolume{
		assignPV("plain", "10Gi", labelled(nil)),
		assignPV("nvme-gold-n1", "10Gi", labelled(map[string]string{"disk-type": "nvme", "tier": "gold"}), affinity(corev1.NodeSelectorOpIn, "n1")),
		assignPV("nvme-n2", "10Gi", labelled(map[string]string{"disk-type": "nvme"}), affinity(corev1.NodeSelectorOpIn, "n2")),
		assignPV("gold-bad-affinity", "10Gi", labelled(map[string]string{"tier": "gold"}), affinity(corev1.NodeSelectorOpGt, "n1", "n2")),
	}
	nodes := []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{"kubernetes.io/hostname": "n2"}}},
		nil,
	}
	shared := newFitCache()
	fits := 0
	for pass := range 2 {
		for _, c := range claims {
			for _, v := range volumes {
				for _, n := range nodes {
					for _, scheduled := range []bool{false, true} {
						want := fitsUnbound(c, v, n, scheduled, false)
						if got := shared.fitsUnbound(c, v, n, scheduled, false); got != want {
							t.Errorf("pass %d: claim %s, volume %s, node %v, scheduled %v: shared cache says %v, afresh %v", pass, c.Name, v.Name, n, scheduled, got, want)
						}
						if want {
							fits++
						}
					}
				}
			}
		}
	}
	// Neither "everything fits" nor "nothing does": the table tells the cases apart.
	if fits == 0 || fits == 2*len(claims)*len(volumes)*len(nodes)*2 {
		t.Fatalf("%d of the questions fit", fits)
	}
}
