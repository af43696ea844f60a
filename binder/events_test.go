package binder

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestShadowDisagreementNamesOnlyTheNamespacesVolumes: the BinderDisagreement event is written
// into the claim's namespace, where anyone who may read its events reads it: it names the volume
// pvguard would have chosen only when that volume is the namespace's (pre-bound or granted to it,
// or named by one of its claims); another namespace's volume is "a volume you cannot read".
func TestShadowDisagreementNamesOnlyTheNamespacesVolumes(t *testing.T) {
	claim := testobj.PVC("team-a", "data", testobj.ClaimUID("uid-data"), testobj.ClaimBoundTo("bound-by-cluster"))
	other := testobj.PVC("team-b", "x", testobj.VolumeName("team-b-volume"))
	granted := testobj.PV("granted", testobj.PVMeta(testobj.Annotation(policy.DefaultGrantAnnotation, "team-a")))
	for _, tc := range []struct {
		name, want string
		hidden     string // a name the event must not carry
	}{
		{name: "team-b-volume", want: policy.HiddenVolume, hidden: "team-b-volume"},
		{name: "granted", want: `"granted"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			view := testobj.NewView(claim, other, granted, testobj.PV("team-b-volume"))
			c := fake.NewClientBuilder().Build()
			rec := record.NewFakeRecorder(10)
			engine := policy.NewEngine(nil)
			b, err := New(Options{
				Mode: ModeShadow, Engine: func() *policy.Engine { return engine },
				Views:    func(context.Context) policy.View { return view },
				Recorder: rec, Cache: c, Live: c, Writer: c,
			})
			if err != nil {
				t.Fatal(err)
			}
			b.ledger.shadowChose(claim.UID, tc.name)
			b.shadowClaim(context.Background(), claim, ClaimAction{})
			select {
			case ev := <-rec.Events:
				if !strings.Contains(ev, ReasonBinderDisagreement) || !strings.Contains(ev, tc.want) || !strings.Contains(ev, `"bound-by-cluster"`) {
					t.Errorf("event %q: want %s and %q naming the claim's own volume", ev, ReasonBinderDisagreement, tc.want)
				}
				if tc.hidden != "" && strings.Contains(ev, tc.hidden) {
					t.Errorf("event %q names %s, a volume team-a's readers may not read", ev, tc.hidden)
				}
			default:
				t.Fatal("no BinderDisagreement event")
			}
		})
	}
}
