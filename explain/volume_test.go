package explain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/explain"
	. "github.com/pvguard/pvguard/test/testobj"
)

func TestVolume(t *testing.T) {
	now := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	released := func(pv *corev1.PersistentVolume) {
		pv.Status.LastPhaseTransitionTime = &metav1.Time{Time: now.Add(-time.Hour)}
	}
	cases := map[string]struct {
		pv     *corev1.PersistentVolume
		claims []*corev1.PersistentVolumeClaim
		want   func(*explain.VolumeExplanation) bool
	}{
		"released, retain": {
			pv: PV("pv-1", ClaimRef("ns", "gone", "uid-gone"), Phase(corev1.VolumeReleased), released,
				PVMeta(Finalizers("kubernetes.io/pv-protection"))),
			want: func(e *explain.VolumeExplanation) bool {
				return e.Claim.String() == "ns/gone" && strings.Contains(e.ClaimState.String(), "no longer exists") &&
					strings.Contains(e.Next.String(), "Retain keeps it Released") && e.Since != nil && e.Since.Equal(now.Add(-time.Hour)) &&
					len(e.Finalizers) == 1 && strings.Contains(e.Finalizers[0].Holder, "pv-protection")
			},
		},
		"claim gone, not yet released": {
			pv:   PV("pv-1", ClaimRef("ns", "gone", "uid-gone"), Phase(corev1.VolumeBound)),
			want: func(e *explain.VolumeExplanation) bool { return strings.Contains(e.Next.String(), "phase to Released") },
		},
		"bound": {
			pv:     PV("pv-1", ClaimRef("ns", "c", "uid-ns-c"), Phase(corev1.VolumeBound)),
			claims: []*corev1.PersistentVolumeClaim{PVC("ns", "c", ClaimBoundTo("pv-1"))},
			want: func(e *explain.VolumeExplanation) bool {
				return e.ClaimState.String() == "bound" && strings.HasPrefix(e.Next.String(), "nothing")
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := explain.Input{State: objects{Volumes: []*corev1.PersistentVolume{tc.pv}, Claims: tc.claims}.state()}
			e, err := explain.Volume(in, "pv-1", now)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.want(e) {
				t.Fatalf("explanation %+v", e)
			}
		})
	}
	if _, err := explain.Volume(explain.Input{}, "pv-x", now); !errors.Is(err, explain.ErrUnknownVolume) || !strings.Contains(err.Error(), "pv-x") {
		t.Fatalf("error %v, want ErrUnknownVolume naming pv-x", err)
	}
}
