package binder

import (
	"context"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestPlanInputHoldsTheKindsItsRulesRead: the pairs a plan judges by policy are judged on its
// State, which must answer ListKind for every kind the engine's rules read beyond the typed reads
// (a rule would otherwise fail on each pair), and for no other.
func TestPlanInputHoldsTheKindsItsRulesRead(t *testing.T) {
	ctx := context.Background()
	const vac = policy.Kind("VolumeAttributesClass")
	gold := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, DriverName: "csi.example.com"}
	claim := testobj.PVC("ns", "a", testobj.ClaimClass("fast"))
	readsClasses := policy.Rule{ID: "PVG097", Name: "reads-attributes-classes", Default: policy.ActionDeny,
		Judges: policy.JudgesState, Kinds: []policy.Kind{policy.KindPersistentVolumeClaim}, Reads: []policy.Kind{vac},
		Check: func(*policy.Review, policy.View, *policy.Config) ([]policy.Finding, error) { return nil, nil }}
	for _, tc := range []struct {
		name  string
		rules []policy.Rule
		want  int // VolumeAttributesClasses the state lists; -1: ListKind fails
	}{
		{"no rule reads the kind", nil, -1},
		{"a rule reads it", []policy.Rule{readsClasses}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bd, _ := liveBinder(t, claim, gold)
			bd.o.Engine = func() *policy.Engine { return policy.NewEngineWith(nil, tc.rules) }
			in, err := bd.planInput(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got, err := in.State.ListKind(vac)
			switch {
			case tc.want < 0 && err == nil:
				t.Errorf("the state lists %d %ss that no rule reads", len(got), vac)
			case tc.want >= 0 && err != nil:
				t.Errorf("ListKind(%s): %v", vac, err)
			case tc.want >= 0 && len(got) != tc.want:
				t.Errorf("the state lists %d %ss, want %d", len(got), vac, tc.want)
			}
		})
	}
}
