package policyparams

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/pvguard/pvguard/internal/leaseguard"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/webhook"
)

// readThrough is a cache whose reads are a client's.
type readThrough struct {
	*informertest.FakeInformers
	c client.Reader
}

func (r readThrough) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return r.c.Get(ctx, key, obj, opts...)
}

// heldLock is a Lease lock whose renewals by "me" succeed.
type heldLock struct{ resourcelock.Interface }

func (heldLock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return nil }
func (heldLock) Identity() string                                                { return "me" }

// renewed is a Guard over a Lease this replica renewed, whose writes are allowed for window.
func renewed(t *testing.T, window time.Duration) *leaseguard.Guard {
	t.Helper()
	g := leaseguard.New(heldLock{}, window)
	if err := g.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestParamsSyncWritesOnlyWhileTheLeaseIsHeld: an elected replica that was paused past its Lease
// (its last renewal is older than the renew deadline) neither creates the missing parameter
// object nor writes its config over the one found there; the same replica within its Lease does
// both.
func TestParamsSyncWritesOnlyWhileTheLeaseIsHeld(t *testing.T) {
	ctx := context.Background()
	obj := policy.ParamObject{Namespace: "pvguard", Name: "pvguard-admission-params"}
	elected := make(chan struct{})
	close(elected)
	stale := renewed(t, time.Millisecond)
	time.Sleep(5 * time.Millisecond) // the replica is paused past its window
	if err := stale.Check(); !errors.Is(err, leaseguard.ErrLeaseLost) {
		t.Fatalf("the paused replica's guard says %v, want ErrLeaseLost", err)
	}
	want := policy.AdmissionPolicyParams(policy.DefaultConfig())
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: obj.Name},
		Data: map[string]string{"exemptNamespaces": "written-by-the-new-leader"}}

	for name, existing := range map[string]*corev1.ConfigMap{"missing": nil, "another config": other} {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				guard *leaseguard.Guard
				write bool
			}{{stale, false}, {renewed(t, time.Hour), true}} {
				b := fake.NewClientBuilder()
				if existing != nil {
					b = b.WithObjects(existing.DeepCopy())
				}
				writes := 0
				c := b.WithInterceptorFuncs(interceptor.Funcs{
					Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
						writes++
						return c.Create(ctx, o, opts...)
					},
					Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
						writes++
						return c.Update(ctx, o, opts...)
					},
				}).Build()
				s, err := NewSync(ctx, SyncOptions{Object: obj, Engines: webhook.StaticEngine{E: policy.NewEngine(policy.DefaultConfig())},
					Cache: readThrough{&informertest.FakeInformers{}, c}, Writer: c, Elected: elected, WriteGuard: tc.guard.Check,
					Registry: prometheus.NewRegistry(), Log: logr.Discard()})
				if err != nil {
					t.Fatal(err)
				}
				err = s.sync(ctx, elected)
				live := &corev1.ConfigMap{}
				getErr := c.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: obj.Name}, live)
				if !tc.write {
					if !errors.Is(err, leaseguard.ErrLeaseLost) || writes != 0 {
						t.Fatalf("past the Lease: sync returned %v after %d write(s), want ErrLeaseLost and none", err, writes)
					}
					if existing == nil && !apierrors.IsNotFound(getErr) || existing != nil && !maps.Equal(live.Data, existing.Data) {
						t.Fatalf("past the Lease the object became %v (%v)", live.Data, getErr)
					}
					continue
				}
				if err != nil || writes != 1 || getErr != nil || !maps.Equal(live.Data, want) {
					t.Fatalf("within the Lease: sync returned %v after %d write(s), object %v (%v); want the loaded config written once", err, writes, live.Data, getErr)
				}
			}
		})
	}
}
