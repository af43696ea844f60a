package explain_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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

// TestReadProvisionerLeases: the Leases named for the claim's provisioner are read from every
// namespace, and only those; a class without an external provisioner reads none; a reader that
// may not list Leases leaves them unread.
func TestReadProvisionerLeases(t *testing.T) {
	lease := func(ns, name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	objs := []client.Object{StorageClass("fast", "csi.example.com"), StorageClass("local", "kubernetes.io/no-provisioner"),
		PVC("team-a", "data", ClaimClass("fast")), PVC("team-a", "scratch", ClaimClass("local")),
		lease("csi", "csi-example-com"), lease("other", "csi-example-com"), lease("csi", "other-example-com"), lease("kube-node-lease", "n1")}
	// The API server selects any object by metadata.name; the fake client needs an index for it.
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).
		WithIndex(&coordinationv1.Lease{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).Build()
	ctx := context.Background()
	in, err := explain.ReadInput(ctx, c, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := explain.ReadProvisionerLeases(ctx, c, &in, "team-a", "data"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range in.Leases {
		got = append(got, l.Namespace+"/"+l.Name)
	}
	slices.Sort(got)
	if !in.LeasesRead || strings.Join(got, ",") != "csi/csi-example-com,other/csi-example-com" {
		t.Errorf("read %v (read: %v), want the two csi-example-com leases", got, in.LeasesRead)
	}

	in.Leases, in.LeasesRead = nil, false
	if err := explain.ReadProvisionerLeases(ctx, c, &in, "team-a", "scratch"); err != nil || in.LeasesRead {
		t.Errorf("a no-provisioner class: read %v, err %v", in.LeasesRead, err)
	}
	forbidden := interceptor.NewClient(c, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
		return apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "", errors.New("no"))
	}})
	if err := explain.ReadProvisionerLeases(ctx, forbidden, &in, "team-a", "data"); err != nil || in.LeasesRead {
		t.Errorf("forbidden: read %v, err %v", in.LeasesRead, err)
	}
}
