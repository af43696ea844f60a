package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/clusterview"
	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// BenchmarkClusterView measures the reads one review of a pre-bound claim makes through the view
// the webhooks, the binder and the audit share (clusterview.Source), over a real informer cache
// of this suite's apiserver: the volume the claim names, the claims naming that volume, the
// volumes claiming the claim, the claim, and the storage classes. Run it with -benchmem: its
// allocations are what the view adds to each such review. Results are in docs/benchmarks.md.
//
//	go test -run '^$' -bench ClusterView -benchmem ./test/e2e/
func BenchmarkClusterView(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := cache.New(suite.cfg, cache.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := clusterview.SetupIndexes(ctx, c, nil); err != nil {
		b.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	// The seeder is exempt from the policy, so the pair is written as it is, in either order.
	seeder, err := devcluster.NewClient(suite.cfg, &devcluster.Warnings{}, seederUser, "system:masters", "system:authenticated")
	if err != nil {
		b.Fatal(err)
	}

	// A volume and its claim as a CSI driver and the binder leave them.
	ns := fmt.Sprintf("bench-view-%d", time.Now().UnixNano())
	if err := seeder.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	meta := []testobj.MetaMod{
		testobj.Label("app.kubernetes.io/name", "postgres"), testobj.Label("app.kubernetes.io/instance", ns),
		testobj.Annotation("pv.kubernetes.io/provisioned-by", "rbd.csi.ceph.com"), testobj.Finalizers("kubernetes.io/pv-protection"),
	}
	pv := harness.FreshPV(testobj.PV(ns, testobj.PVMeta(meta...), testobj.ClaimRef(ns, "data", ""),
		testobj.CSI("rbd.csi.ceph.com", "0001-0009-rook-ceph-"+ns, map[string]string{
			"clusterID": "rook-ceph", "pool": "replicapool", "imageFeatures": "layering", "imageName": "csi-vol-" + ns,
		})))
	pvc := harness.FreshPVC(testobj.PVC(ns, "data", testobj.VolumeName(pv.Name), testobj.ClaimMeta(meta...)))
	for _, obj := range []client.Object{pv, pvc} {
		if err := seeder.Create(ctx, obj); err != nil {
			b.Fatalf("creating %T: %v", obj, err)
		}
	}
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("cache did not sync")
	}
	cv := clusterview.New(c, seeder)

	// Every read must come from the cache and find the pair: a miss would measure a live read.
	read := func() error {
		v := cv.View(ctx)
		if got, err := v.PersistentVolume(pv.Name); err != nil || got == nil {
			return fmt.Errorf("volume: %v, %v", got, err)
		}
		if got, err := v.PersistentVolumeClaim(ns, "data"); err != nil || got == nil {
			return fmt.Errorf("claim: %v, %v", got, err)
		}
		if got, err := v.ClaimsNamingVolume(pv.Name); err != nil || len(got) != 1 {
			return fmt.Errorf("claims naming the volume: %d, %v", len(got), err)
		}
		if got, err := v.VolumesClaiming(ns, "data"); err != nil || len(got) != 1 {
			return fmt.Errorf("volumes claiming the claim: %d, %v", len(got), err)
		}
		_, err := v.StorageClasses()
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := read()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the cache never showed the pair: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := read(); err != nil {
			b.Fatal(err)
		}
	}
}
