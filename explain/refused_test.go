package explain

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/test/testobj"
)

func TestRefusals(t *testing.T) {
	claim := testobj.PVC("team-a", "data")
	at := func(s int) metav1.Time { return metav1.NewTime(time.Date(2026, 11, 26, 12, 0, s, 0, time.UTC)) }
	ev := func(typ, reason, msg string, s int) *corev1.Event {
		return &corev1.Event{
			InvolvedObject: corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "team-a", Name: "data", UID: claim.UID},
			Type:           typ, Reason: reason, Message: msg, Count: 2, LastTimestamp: at(s),
			Source: corev1.EventSource{Component: "external-resizer csi.example.com"},
		}
	}
	cases := []struct {
		name string
		ev   *corev1.Event
		want *Refusal
	}{
		{"the webhook denied", ev("Warning", "VolumeResizeFailed",
			`resize volume "pv-1" by resizer "csi.example.com" failed: admission webhook "validate-pv-components.pvguard.io" denied the request: [PVG005 capacity-fits] PersistentVolume pv-1 ...`, 1),
			&Refusal{Point: PointWebhook, Name: "validate-pv-components.pvguard.io", Rule: "PVG005"}},
		{"an admission policy denied", ev("Warning", "ProvisioningFailed",
			`persistentvolumes "pv-1" is forbidden: ValidatingAdmissionPolicy 'pvguard-pvg011-reclaim-downgrade' with binding 'pvguard-pvg011-reclaim-downgrade' denied request: [PVG011 reclaim-downgrade] PersistentVolume pv-1 is in use`, 2),
			&Refusal{Point: PointAdmissionPolicy, Name: "pvguard-pvg011-reclaim-downgrade", Rule: "PVG011"}},
		{"the webhook did not answer", ev("Warning", "ProvisioningFailed",
			`Internal error occurred: failed calling webhook "validate-pvc.pvguard.io": failed to call webhook: Post "https://pvguard.pvguard-system.svc:443/validate/persistentvolumeclaims?timeout=2s": context deadline exceeded`, 3),
			&Refusal{Point: PointWebhookUnreachable, Name: "validate-pvc.pvguard.io"}},
		{"pvguard's binder", ev("Warning", "PolicyForbidsBinding", `pvguard did not bind volume "pv-1": [PVG009 node-affinity-match] ...`, 4),
			&Refusal{Point: PointBinder, Rule: "PVG009"}},
		{"another webhook's denial is not pvguard's", ev("Warning", "ProvisioningFailed", `admission webhook "validate.kyverno.svc" denied the request: no`, 5), nil},
		{"a Normal event is not a refusal", ev("Normal", "ExternalProvisioning", `admission webhook "validate-pvc.pvguard.io" denied the request: [PVG001 x]`, 6), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := refusals([]*corev1.Event{tc.ev}, claim)
			switch {
			case tc.want == nil && len(got) != 0:
				t.Fatalf("refusals = %+v, want none", got)
			case tc.want == nil:
				return
			case len(got) != 1:
				t.Fatalf("refusals = %+v, want one", got)
			}
			g := got[0]
			if g.Point != tc.want.Point || g.Name != tc.want.Name || g.Rule != tc.want.Rule || g.Reason != tc.ev.Reason || g.Count != 2 || !g.Last.Equal(tc.ev.LastTimestamp.Time) {
				t.Errorf("refusal = %+v, want %+v with the event's reason, count and time", g, *tc.want)
			}
		})
	}
	// Another claim's event is not this claim's; the newest comes first.
	other := ev("Warning", "PolicyForbidsBinding", "[PVG009 x]", 9)
	other.InvolvedObject.Name = "other"
	got := refusals([]*corev1.Event{cases[0].ev, other, cases[3].ev}, claim)
	if len(got) != 2 || got[0].Point != PointBinder || got[1].Point != PointWebhook {
		t.Errorf("refusals = %+v, want the binder's (newer) then the webhook's, and not the other claim's", got)
	}
}
