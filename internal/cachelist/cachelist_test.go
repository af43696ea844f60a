package cachelist_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/internal/cachelist"
)

// informers is an informer cache whose one informer is the given client-go informer (what
// controller-runtime's informers are); the reader answers Get and List. Nothing else is used.
type informers struct {
	cache.Cache
	reader   client.Reader
	informer cache.Informer
}

func (i informers) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return i.informer, nil
}

func (i informers) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return i.reader.Get(ctx, key, obj, opts...)
}

func (i informers) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return i.reader.List(ctx, list, opts...)
}

// storeless is an informer that does not expose its store.
type storeless struct{ cache.Informer }

func pv(name string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func TestList(t *testing.T) {
	ctx := context.Background()
	inStore := []*corev1.PersistentVolume{pv("pv-a"), pv("pv-b")}
	inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.PersistentVolume{}, 0, toolscache.Indexers{})
	for _, v := range inStore {
		if err := inf.GetStore().Add(v); err != nil {
			t.Fatal(err)
		}
	}
	// The reader holds other volumes than the store, so that each case shows which it read.
	reader := fake.NewClientBuilder().WithObjects(pv("pv-listed")).Build()

	t.Run("an informer's store: its own objects", func(t *testing.T) {
		got, err := cachelist.List(ctx, informers{reader: reader, informer: inf}, &corev1.PersistentVolume{}, &corev1.PersistentVolumeList{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(inStore) {
			t.Fatalf("%d volumes, want the store's %d", len(got), len(inStore))
		}
		for _, v := range got {
			if v != inStore[0] && v != inStore[1] {
				t.Errorf("volume %s is a copy, not the store's object", v.Name)
			}
		}
	})
	t.Run("no store: the reader's list", func(t *testing.T) {
		got, err := cachelist.List(ctx, informers{reader: reader, informer: storeless{inf}}, &corev1.PersistentVolume{}, &corev1.PersistentVolumeList{})
		if err != nil || len(got) != 1 || got[0].Name != "pv-listed" {
			t.Fatalf("got %v, %v; want the reader's pv-listed", got, err)
		}
	})
	t.Run("a plain reader", func(t *testing.T) {
		got, err := cachelist.List(ctx, reader, &corev1.PersistentVolume{}, &corev1.PersistentVolumeList{})
		if err != nil || len(got) != 1 || got[0].Name != "pv-listed" {
			t.Fatalf("got %v, %v; want the reader's pv-listed", got, err)
		}
	})
	t.Run("a store of another type is an error naming both", func(t *testing.T) {
		_, err := cachelist.List(ctx, informers{reader: reader, informer: inf}, &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolumeClaimList{})
		if err == nil || !strings.Contains(err.Error(), "*v1.PersistentVolumeClaim") || !strings.Contains(err.Error(), "holds a *v1.PersistentVolume") {
			t.Fatalf("error %v, want one naming the claim type and the volume it holds", err)
		}
	})
}

func TestListWithoutAList(t *testing.T) {
	ctx := context.Background()
	reader := fake.NewClientBuilder().WithObjects(pv("pv-listed")).Build()
	got, err := cachelist.List(ctx, reader, &corev1.PersistentVolume{}, (*corev1.PersistentVolumeList)(nil))
	if err != nil || len(got) != 1 || got[0].Name != "pv-listed" {
		t.Fatalf("got %v, %v; want the reader's pv-listed", got, err)
	}
}

func TestGet(t *testing.T) {
	ctx := context.Background()
	inStore := pv("pv-a")
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.PersistentVolume{}, 0, toolscache.Indexers{})
	claims := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.PersistentVolumeClaim{}, 0, toolscache.Indexers{})
	if err := inf.GetStore().Add(inStore); err != nil {
		t.Fatal(err)
	}
	if err := claims.GetStore().Add(claim); err != nil {
		t.Fatal(err)
	}
	reader := fake.NewClientBuilder().WithObjects(pv("pv-listed")).Build()
	kind := &corev1.PersistentVolume{}
	t.Run("an informer's store: its own object", func(t *testing.T) {
		got, err := cachelist.Get(ctx, informers{reader: reader, informer: inf}, client.ObjectKey{Name: "pv-a"}, kind)
		if err != nil || got != inStore {
			t.Fatalf("got %p, %v; want the store's object %p", got, err, inStore)
		}
	})
	t.Run("a namespaced object by its namespace and name", func(t *testing.T) {
		got, err := cachelist.Get(ctx, informers{reader: reader, informer: claims}, client.ObjectKey{Namespace: "ns", Name: "c"}, &corev1.PersistentVolumeClaim{})
		if err != nil || got != claim {
			t.Fatalf("got %p, %v; want the store's object %p", got, err, claim)
		}
	})
	t.Run("absent from the store: NotFound", func(t *testing.T) {
		_, err := cachelist.Get(ctx, informers{reader: reader, informer: inf}, client.ObjectKey{Name: "pv-listed"}, kind)
		if !apierrors.IsNotFound(err) {
			t.Fatalf("error %v, want NotFound (the store does not hold pv-listed)", err)
		}
	})
	t.Run("a plain reader: its object, and NotFound", func(t *testing.T) {
		got, err := cachelist.Get(ctx, reader, client.ObjectKey{Name: "pv-listed"}, kind)
		if err != nil || got.Name != "pv-listed" || got == kind {
			t.Fatalf("got %v, %v; want the reader's pv-listed in an object of its own", got, err)
		}
		if _, err := cachelist.Get(ctx, reader, client.ObjectKey{Name: "pv-a"}, kind); !apierrors.IsNotFound(err) {
			t.Fatalf("error %v, want NotFound", err)
		}
		if kind.Name != "" {
			t.Fatalf("the kind passed was written to: %v", kind.Name)
		}
	})
}
