package binder

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/internal/cores"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

// seatWatch records, for each API call of the binder, whether its worker held a seat then.
type seatWatch struct {
	client.Client
	mu                   sync.Mutex
	calls, callsOnASeat  int
	judged, judgedOnSeat int
}

func (w *seatWatch) call(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	if cores.Holding(ctx) {
		w.callsOnASeat++
	}
}

func (w *seatWatch) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	w.call(ctx)
	return w.Client.Get(ctx, key, obj, opts...)
}

func (w *seatWatch) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	w.call(ctx)
	return w.Client.Patch(ctx, obj, patch, opts...)
}

func (w *seatWatch) Status() client.SubResourceWriter { return statusWatch{w.Client.Status(), w} }

type statusWatch struct {
	client.SubResourceWriter
	w *seatWatch
}

func (s statusWatch) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.w.call(ctx)
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// TestSyncsComputeOnASeatAndStepAwayForTheAPI: a worker syncs on one of the process's seats (the
// policy's view is asked while it holds it), gives the seat back while the apiserver answers its
// reads past the cache and its writes, and leaves it free when the sync is done.
func TestSyncsComputeOnASeatAndStepAwayForTheAPI(t *testing.T) {
	claim := testobj.PVC("team-a", "data", testobj.ClaimUID("uid-data"), testobj.VolumeName("pv-1"))
	volume := testobj.PV("pv-1", testobj.Phase(corev1.VolumeAvailable))
	bound := testobj.PVC("team-a", "gone", testobj.ClaimUID("uid-gone"), testobj.ClaimBoundTo("pv-missing"))
	c := fake.NewClientBuilder().WithObjects(claim, volume, bound).WithStatusSubresource(&corev1.PersistentVolume{}, &corev1.PersistentVolumeClaim{}).Build()
	watch := &seatWatch{Client: c}
	seats := cores.New(1)
	engine := policy.NewEngine(nil)
	b, err := New(Options{
		Mode: ModeActive, Engine: func() *policy.Engine { return engine },
		Views: func(ctx context.Context) policy.View {
			watch.mu.Lock()
			watch.judged++
			if cores.Holding(ctx) {
				watch.judgedOnSeat++
			}
			watch.mu.Unlock()
			return testobj.NewView(claim, volume, bound)
		},
		Recorder: record.NewFakeRecorder(100), Cache: c, Live: watch, Writer: watch, Seats: seats,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// The pre-bound claim is bound (writes); the bound claim's volume is missing from the cache,
	// which only a live read may confirm.
	b.queue.Add(key{kind: 'c', namespace: "team-a", name: "data"})
	b.queue.Add(key{kind: 'c', namespace: "team-a", name: "gone"})
	for b.queue.Len() > 0 {
		b.processNext(ctx, b.queue)
	}
	if watch.calls == 0 || watch.judged == 0 {
		t.Fatalf("the syncs made %d API calls and asked the policy's view %d times, want some of each", watch.calls, watch.judged)
	}
	if watch.callsOnASeat != 0 {
		t.Errorf("%d of %d API calls were made on a seat, want none", watch.callsOnASeat, watch.calls)
	}
	if watch.judgedOnSeat != watch.judged {
		t.Errorf("the policy's view was asked on a seat %d times of %d, want every time", watch.judgedOnSeat, watch.judged)
	}
	if held, give := seats.Take(ctx); !cores.Holding(held) {
		t.Error("the seat was not given back after the syncs")
	} else {
		give()
	}
}
