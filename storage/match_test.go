package storage

import (
	"encoding/json"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// selectorCases are selectors and labels, as JSON, for SelectorMatches.
var selectorCases = []string{
	`{"sel":{},"labels":{"a":"b"}}`,
	`{"sel":{"matchLabels":{"a":"b"}},"labels":{"a":"b"}}`,
	`{"sel":{"matchLabels":{"a":"b"}},"labels":{"a":"c"}}`,
	`{"sel":{"matchLabels":{"a":"b","c":"d"}},"labels":{"a":"b"}}`,
	`{"sel":{"matchLabels":{"a":""}},"labels":{"a":""}}`,
	`{"sel":{"matchLabels":{"a":""}},"labels":{}}`,
	`{"sel":{"matchExpressions":[{"key":"a","operator":"In","values":["x","b"]}]},"labels":{"a":"b"}}`,
	`{"sel":{"matchExpressions":[{"key":"a","operator":"In","values":["x"]}]},"labels":{}}`,
	`{"sel":{"matchExpressions":[{"key":"a","operator":"NotIn","values":["x"]}]},"labels":{}}`,
	`{"sel":{"matchExpressions":[{"key":"a","operator":"NotIn","values":["b"]}]},"labels":{"a":"b"}}`,
	`{"sel":{"matchExpressions":[{"key":"a","operator":"Exists"}]},"labels":{"a":""}}`,
	`{"sel":{"matchExpressions":[{"key":"a","operator":"DoesNotExist"}]},"labels":{"a":""}}`,
	`{"sel":{"matchExpressions":[{"key":"a","operator":"DoesNotExist"}]},"labels":{"b":""}}`,
	`{"sel":{"matchLabels":{"example.com/disk":"nvme"},"matchExpressions":[{"key":"zone","operator":"In","values":["a","b"]}]},"labels":{"example.com/disk":"nvme","zone":"b"}}`,
	// Invalid: LabelSelectorAsSelector refuses them.
	`{"sel":{"matchLabels":{"a b":"c"}},"labels":{}}`,
	`{"sel":{"matchLabels":{"a":"c d"}},"labels":{}}`,
	`{"sel":{"matchExpressions":[{"key":"a","operator":"In","values":[]}]},"labels":{}}`,
	`{"sel":{"matchExpressions":[{"key":"a","operator":"Exists","values":["x"]}]},"labels":{"a":"x"}}`,
	`{"sel":{"matchExpressions":[{"key":"a","operator":"Gt","values":["1"]}]},"labels":{"a":"2"}}`,
	`{"sel":{"matchExpressions":[{"key":"","operator":"Exists"}]},"labels":{}}`,
	`{"sel":{"matchLabels":{"a":"b"},"matchExpressions":[{"key":"a","operator":"In","values":["-x"]}]},"labels":{"a":"c"}}`,
}

// checkSelectorMatches holds SelectorMatches to the labels.Selector LabelSelectorAsSelector
// builds: it judges exactly the selectors that build, and matches as they do.
func checkSelectorMatches(t *testing.T, js []byte) {
	t.Helper()
	var c struct {
		Sel    *metav1.LabelSelector `json:"sel"`
		Labels map[string]string     `json:"labels"`
	}
	if err := json.Unmarshal(js, &c); err != nil {
		return
	}
	match, ok := SelectorMatches(c.Sel, c.Labels)
	sel, err := metav1.LabelSelectorAsSelector(c.Sel)
	switch {
	case c.Sel == nil:
		if ok {
			t.Fatalf("%s: judged a nil selector", js)
		}
	case ok != (err == nil):
		t.Fatalf("%s: judged it: %v; LabelSelectorAsSelector: %v", js, ok, err)
	case ok && match != sel.Matches(labels.Set(c.Labels)):
		t.Fatalf("%s: matches: %v; the Selector (%s): %v", js, match, sel, !match)
	}
}

func TestSelectorMatchesAgreesWithLabelSelectorAsSelector(t *testing.T) {
	judged, matched := 0, 0
	for _, js := range selectorCases {
		checkSelectorMatches(t, []byte(js))
		var c struct {
			Sel    *metav1.LabelSelector `json:"sel"`
			Labels map[string]string     `json:"labels"`
		}
		if err := json.Unmarshal([]byte(js), &c); err != nil {
			t.Fatal(err)
		}
		if m, ok := SelectorMatches(c.Sel, c.Labels); ok {
			judged++
			if m {
				matched++
			}
		}
	}
	// The table has 14 valid selectors, 8 of them matching.
	if judged != 14 || matched != 8 {
		t.Fatalf("judged %d selectors and matched %d, want 14 and 8", judged, matched)
	}
}

// FuzzSelectorMatches holds SelectorMatches to LabelSelectorAsSelector on any selector and
// labels (as JSON).
//
//	go test -run '^$' -fuzz FuzzSelectorMatches -fuzztime 1m ./storage/
func FuzzSelectorMatches(f *testing.F) {
	for _, js := range selectorCases {
		f.Add([]byte(js))
	}
	f.Fuzz(checkSelectorMatches)
}

// TestSelectorMatchesDoesNotAllocate: a valid selector is matched without building a Selector.
func TestSelectorMatchesDoesNotAllocate(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector allocates")
	}
	sel := &metav1.LabelSelector{
		MatchLabels:      map[string]string{"disk": "nvme"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}},
	}
	set := map[string]string{"disk": "nvme", "zone": "b"}
	if n := testing.AllocsPerRun(100, func() { SelectorMatches(sel, set) }); n > 2 {
		t.Fatalf("%v allocations per match, want at most one per key (IsQualifiedName splits it)", n)
	}
}

// TestVolumeAffinityHosts: the hosts a volume's node affinity names, and when it names none that
// a node added later could not escape.
func TestVolumeAffinityHosts(t *testing.T) {
	expr := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	host := func(values ...string) corev1.NodeSelectorRequirement {
		return expr(corev1.LabelHostname, corev1.NodeSelectorOpIn, values...)
	}
	zone := expr("topology.kubernetes.io/zone", corev1.NodeSelectorOpIn, "z1")
	for _, tc := range []struct {
		name  string
		terms []corev1.NodeSelectorTerm // nil: no affinity
		want  []string
		ok    bool
	}{
		{name: "no affinity"},
		{name: "one host", terms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{host("a")}}}, want: []string{"a"}, ok: true},
		{name: "a host in a zone", terms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{zone, host("a")}}}, want: []string{"a"}, ok: true},
		{name: "two requirements on the host admit what they share",
			terms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{host("a", "b"), host("b", "c")}}}, want: []string{"b"}, ok: true},
		{name: "terms add up", terms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{host("c")}},
			{MatchFields: []corev1.NodeSelectorRequirement{expr(metav1.ObjectNameField, corev1.NodeSelectorOpIn, "a")}},
		}, want: []string{"a", "c"}, ok: true},
		{name: "a name and a hostname in one term count both",
			terms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{host("a")},
				MatchFields: []corev1.NodeSelectorRequirement{expr(metav1.ObjectNameField, corev1.NodeSelectorOpIn, "n-a")}}},
			want: []string{"a", "n-a"}, ok: true},
		{name: "a zone alone", terms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{zone}}}},
		{name: "a host other than some", terms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			expr(corev1.LabelHostname, corev1.NodeSelectorOpNotIn, "a")}}}},
		{name: "one term of a zone", terms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{host("a")}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{zone}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pv := &corev1.PersistentVolume{}
			if tc.terms != nil {
				pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: tc.terms}}
			}
			aff, err := ParseVolumeAffinity(pv)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := aff.Hosts()
			if ok != tc.ok || !slices.Equal(got, tc.want) {
				t.Errorf("Hosts() = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
