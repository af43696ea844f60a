package binder

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/test/testobj"
)

// TestResyncSpreadsItsSyncs: a periodic resync queues the objects in shares over its spread,
// not all at once, and every object by the end; without a spread (the first, at the start) all
// at once.
func TestResyncSpreadsItsSyncs(t *testing.T) {
	var objs []client.Object
	for i := range 40 {
		objs = append(objs, testobj.PV(fmt.Sprintf("pv-%02d", i)), testobj.PVC("ns", fmt.Sprintf("c-%02d", i)))
	}
	ctx := context.Background()

	b := scalePlanner(t, objs...)
	b.resyncAll(ctx, 0)
	if n := b.queue.Len(); n != len(objs) {
		t.Fatalf("a resync without spread queued %d objects, want all %d at once", n, len(objs))
	}

	b = scalePlanner(t, objs...)
	done := make(chan struct{})
	go func() {
		b.resyncAll(ctx, 10*resyncStep)
		close(done)
	}()
	time.Sleep(resyncStep / 2)
	if n := b.queue.Len(); n == 0 || n > len(objs)/2 {
		t.Errorf("half a step into a resync spread over ten: %d of %d objects queued, want the first share only", n, len(objs))
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the spread resync did not end")
	}
	if n := b.queue.Len(); n != len(objs) {
		t.Errorf("after the spread resync: %d objects queued, want all %d", n, len(objs))
	}
}
