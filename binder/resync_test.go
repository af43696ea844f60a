package binder

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

// newQueueBinder is a binder over cache, whose queues nothing drains unless the test does.
func newQueueBinder(t *testing.T, cache client.Reader) *Binder {
	t.Helper()
	b, err := New(Options{
		Mode: ModeActive, Engine: func() *policy.Engine { return policy.NewEngine(nil) },
		Views:    func(context.Context) policy.View { return testobj.NewView() },
		Recorder: record.NewFakeRecorder(10), Cache: cache, Live: cache, Writer: cache.(client.Client),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestResyncQueuesEveryKeyABatchAtATime: a resync of more objects than a batch queues a batch
// while the queue holds fewer than a batch, waits while it holds more, and in the end has queued
// every volume and claim once, and a plan.
func TestResyncQueuesEveryKeyABatchAtATime(t *testing.T) {
	const volumes, claims = 3 * resyncBatch, resyncBatch + 100
	var objs []client.Object
	for i := range volumes {
		objs = append(objs, testobj.PV(fmt.Sprintf("pv-%05d", i)))
	}
	for i := range claims {
		objs = append(objs, testobj.PVC("ns", fmt.Sprintf("c-%05d", i)))
	}
	b := newQueueBinder(t, fake.NewClientBuilder().WithObjects(objs...).Build())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.resyncAll(ctx)
	}()

	// Nothing drains the queue: the resync stops at the second batch.
	deadline := time.Now().Add(10 * time.Second)
	for b.queue.Len() < resyncBatch && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if n := b.queue.Len(); n < resyncBatch || n >= 2*resyncBatch {
		t.Fatalf("with nothing drained, the resync queued %d keys; want a batch or two, fewer than %d", n, 2*resyncBatch)
	}
	if b.plans.Len() != 1 {
		t.Fatalf("the resync queued %d plans before its keys; want one", b.plans.Len())
	}

	// Drained as workers drain it, the resync queues the rest.
	seen, most := map[key]int{}, 0
	for {
		most = max(most, b.queue.Len())
		if b.queue.Len() == 0 {
			select {
			case <-done:
			case <-time.After(50 * time.Millisecond):
				continue
			}
			if b.queue.Len() == 0 {
				break
			}
		}
		k, _ := b.queue.Get()
		seen[k]++
		b.queue.Done(k)
	}
	if len(seen) != volumes+claims {
		t.Fatalf("the resync queued %d keys, want %d", len(seen), volumes+claims)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("key %v queued %d times", k, n)
		}
	}
	if most >= 2*resyncBatch {
		t.Fatalf("the queue held %d keys at most, want fewer than %d", most, 2*resyncBatch)
	}
}

// TestResyncEndsWithTheContext: a resync waiting for room returns when its context ends.
func TestResyncEndsWithTheContext(t *testing.T) {
	var objs []client.Object
	for i := range 2 * resyncBatch {
		objs = append(objs, testobj.PV(fmt.Sprintf("pv-%05d", i)))
	}
	b := newQueueBinder(t, fake.NewClientBuilder().WithObjects(objs...).Build())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.resyncAll(ctx)
	}()
	for b.queue.Len() < resyncBatch {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the resync did not return once its context ended")
	}
}

// TestTheFirstListsAreLeftToTheFirstResync: the objects of the informers' first lists are not
// queued as the handlers are told of them (Start's first resync queues them all, once the
// handlers have been told), a change after them is.
func TestTheFirstListsAreLeftToTheFirstResync(t *testing.T) {
	var objs []runtime.Object
	for i := range 50 {
		objs = append(objs, testobj.PV(fmt.Sprintf("pv-%02d", i), testobj.ClaimRef("ns", fmt.Sprintf("c-%02d", i), "")),
			testobj.PVC("ns", fmt.Sprintf("c-%02d", i), testobj.VolumeName(fmt.Sprintf("pv-%02d", i))))
	}
	objs = append(objs, testobj.StorageClass("fast", "csi.example.com"))
	cs := k8sfake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(cs, 0)
	fi := &informertest.FakeInformers{Scheme: scheme.Scheme, InformersByGVK: map[schema.GroupVersionKind]toolscache.SharedIndexInformer{
		corev1.SchemeGroupVersion.WithKind("PersistentVolume"):      factory.Core().V1().PersistentVolumes().Informer(),
		corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"): factory.Core().V1().PersistentVolumeClaims().Informer(),
		storagev1.SchemeGroupVersion.WithKind("StorageClass"):       factory.Storage().V1().StorageClasses().Informer(),
	}}
	b := newQueueBinder(t, fake.NewClientBuilder().Build())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := b.SetupInformers(ctx, fi); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), b.synced...) {
		t.Fatal("the handlers were never told of the first lists")
	}
	if n, p := b.queue.Len(), b.plans.Len(); n != 0 || p != 0 {
		t.Fatalf("the first lists queued %d keys and %d plans; want none (the first resync's)", n, p)
	}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, testobj.PV("pv-new"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for b.queue.Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if k, _ := b.queue.Get(); k != (key{kind: 'v', name: "pv-new"}) {
		t.Fatalf("a volume created after the first lists queued %v, want it", k)
	}
}
