package explain_test

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pvguard/pvguard/explain"
	. "github.com/pvguard/pvguard/test/testobj"
)

// TestProvisionerLeaseName holds the name to csi-lib-utils' leaderelection (sanitizeName of the
// provisioner's name with "/" made "-", as csi-provisioner passes it).
func TestProvisionerLeaseName(t *testing.T) {
	for provisioner, want := range map[string]string{
		"csi.example.com":             "csi-example-com",
		"hostpath.csi.k8s.io":         "hostpath-csi-k8s-io",
		"example.com/nfs":             "example-com-nfs",
		"ebs.csi.aws.com_":            "ebs-csi-aws-com-X",
		"Disk.CSI.Azure.com":          "Disk-CSI-Azure-com",
		"rbd.csi.ceph.com":            "rbd-csi-ceph-com",
		"":                            "",
		"pd.csi.storage.gke.io/extra": "pd-csi-storage-gke-io-extra",
	} {
		if got := explain.ProvisionerLeaseName(provisioner); got != want {
			t.Errorf("ProvisionerLeaseName(%q) = %q, want %q", provisioner, got, want)
		}
	}
}

// TestProvisionerRunning: a claim waiting for its provisioner says whether the provisioner
// appears to run, from the Lease its leader election holds; without a Lease, that it cannot tell.
func TestProvisionerRunning(t *testing.T) {
	now := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	lease := func(ns, name, holder string, renewedAgo time.Duration) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &metav1.MicroTime{Time: now.Add(-renewedAgo)}}}
		if holder != "" || renewedAgo >= 0 {
			l.Spec.HolderIdentity = ptr.To(holder)
		}
		return l
	}
	cases := map[string]struct {
		leases  []*coordinationv1.Lease
		notRead bool
		running string
		state   string
	}{
		"held and renewed": {
			leases:  []*coordinationv1.Lease{lease("csi", "csi-example-com", "csi-0", 3*time.Second)},
			running: explain.ProvisionerRunningYes,
			state:   "; provisioner csi.example.com runs: Lease csi/csi-example-com held by csi-0, renewed 3s ago",
		},
		"not renewed within its duration": {
			leases:  []*coordinationv1.Lease{lease("csi", "csi-example-com", "csi-0", 5*time.Minute)},
			running: explain.ProvisionerRunningNo,
			state:   "; provisioner csi.example.com appears not to run: its Lease csi/csi-example-com was not renewed in the last 15s (held by csi-0, renewed 5m0s ago): is its provisioner running?",
		},
		"released": {
			leases:  []*coordinationv1.Lease{lease("csi", "csi-example-com", "", time.Second)},
			running: explain.ProvisionerRunningNo,
			state:   "is held by no one (released)",
		},
		"an old lease elsewhere, a fresh one here": {
			leases:  []*coordinationv1.Lease{lease("old", "csi-example-com", "gone", time.Hour), lease("csi", "csi-example-com", "csi-1", time.Second)},
			running: explain.ProvisionerRunningYes,
			state:   "held by csi-1, renewed 1s ago",
		},
		"another provisioner's lease": {
			leases:  []*coordinationv1.Lease{lease("csi", "other-example-com", "csi-0", time.Second)},
			running: explain.ProvisionerRunningUnknown,
			state:   "; whether provisioner csi.example.com runs is unknown: no Lease csi-example-com in any namespace (a provisioner without leader election holds none)",
		},
		"no lease": {
			running: explain.ProvisionerRunningUnknown,
			state:   "is unknown",
		},
		"leases not read (a dump)": {notRead: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := explain.Input{
				State: objects{
					Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c", ClaimClass("fast"))},
					Classes: []*storagev1.StorageClass{StorageClass("fast", "csi.example.com")},
				}.state(),
				Leases: tc.leases, LeasesRead: !tc.notRead, Now: now,
			}
			e, err := explain.Claim(in, "ns", "c")
			if err != nil {
				t.Fatal(err)
			}
			if e.WaitingFor != explain.WaitingForProvisioner || e.ProvisionerRunning != tc.running {
				t.Fatalf("waiting for %q, provisioner running %q, want %q; state %q", e.WaitingFor, e.ProvisionerRunning, tc.running, e.State.String())
			}
			if tc.notRead {
				if strings.Contains(e.State.String(), "Lease") {
					t.Errorf("state %q speaks of leases that were not read", e.State.String())
				}
				return
			}
			if !strings.Contains(e.State.String(), tc.state) {
				t.Errorf("state %q, want it to say %q", e.State.String(), tc.state)
			}
		})
	}
	t.Run("not waiting for a provisioner", func(t *testing.T) {
		in := explain.Input{
			State: objects{
				Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c", ClaimClass("fast"))},
				Volumes: []*corev1.PersistentVolume{available("pv-1", Class("fast"))},
				Classes: []*storagev1.StorageClass{StorageClass("fast", "csi.example.com")},
			}.state(),
			LeasesRead: true, Now: now,
		}
		e, err := explain.Claim(in, "ns", "c")
		if err != nil {
			t.Fatal(err)
		}
		if e.ProvisionerRunning != "" || strings.Contains(e.State.String(), "Lease") {
			t.Errorf("a claim the binder binds: provisioner running %q, state %q", e.ProvisionerRunning, e.State.String())
		}
	})
}
