package explain

import (
	"context"
	"testing"

	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

// StartShadowBinder starts, until the test ends, a binder in shadow mode (it plans as the active
// one does and writes nothing) over c, keeping its plans for explanations to read.
func StartShadowBinder(t *testing.T, c client.Client) *binder.Binder {
	t.Helper()
	b, err := binder.New(binder.Options{
		Mode: binder.ModeShadow, Engine: func() *policy.Engine { return policy.NewEngine(nil) },
		Views:    func(context.Context) policy.View { return testobj.NewView() },
		Recorder: record.NewFakeRecorder(100), Cache: c, Live: c, Writer: c, KeepPlans: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return b
}
