package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/pvguard/pvguard/storage"
)

// TestCutListsKeepWhatTheCacheKeeps holds every kind whose pages serve's page readers cut to its
// cache transform: an object read by its page reader and transformed is the object listed whole
// and transformed.
func TestCutListsKeepWhatTheCacheKeeps(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	codec := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	for resource, k := range cutKinds() {
		t.Run(resource, func(t *testing.T) {
			gvks, _, err := scheme.Scheme.ObjectKinds(k.obj)
			if err != nil {
				t.Fatal(err)
			}
			gvk := gvks[0]
			obj := k.obj.DeepCopyObject().(metav1.Object)
			obj.SetName("written")
			obj.SetNamespace("team-a")
			obj.SetLabels(map[string]string{"app": "db"})
			obj.SetAnnotations(map[string]string{storage.AnnLastApplied: `{"kind":"` + gvk.Kind + `"}`, "team": "a"})
			obj.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: gvk.GroupVersion().String(), Time: &at, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{}}`)}}})
			list, err := scheme.Scheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err != nil {
				t.Fatal(err)
			}
			list.GetObjectKind().SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := meta.SetList(list, []runtime.Object{obj.(runtime.Object)}); err != nil {
				t.Fatal(err)
			}
			var body bytes.Buffer
			if err := codec.Encode(list, &body); err != nil {
				t.Fatal(err)
			}
			item := func(b []byte) any {
				out, _, err := codec.Decode(b, nil, list.DeepCopyObject())
				if err != nil {
					t.Fatal(err)
				}
				items, err := meta.ExtractList(out)
				if err != nil || len(items) != 1 {
					t.Fatalf("decoded %d items: %v", len(items), err)
				}
				cut, err := k.transform(items[0])
				if err != nil {
					t.Fatal(err)
				}
				return cut
			}
			// Listed as serve's page reader lists the kind: the page cut before it is decoded.
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
				_, _ = w.Write(body.Bytes())
			}))
			defer srv.Close()
			reads, err := pageReaders(&rest.Config{Host: srv.URL}, scheme.Scheme, srv.Client(), map[string]cutKind{resource: k})
			if err != nil {
				t.Fatal(err)
			}
			page, err := reads[reflect.TypeOf(k.obj)](context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			items, err := meta.ExtractList(page)
			if err != nil || len(items) != 1 {
				t.Fatalf("read %d items: %v", len(items), err)
			}
			if m := items[0].(metav1.Object); m.GetManagedFields() != nil || m.GetAnnotations()[storage.AnnLastApplied] != "" {
				t.Fatalf("the page of %s was read uncut: %#v", resource, items[0])
			}
			listed, err := k.transform(items[0])
			if err != nil {
				t.Fatal(err)
			}
			if whole := item(body.Bytes()); !equality.Semantic.DeepEqual(whole, listed) {
				t.Fatalf("the cache keeps of %s listed whole\n%#v\nand listed cut\n%#v", resource, whole, listed)
			}
		})
	}
}

// TestTheInformersPageReadersCutTheirLists: the cache's client is made from the config and reads
// what it is sent as it came; the page readers of the kinds kept cut read their pages over it,
// cut.
func TestTheInformersPageReadersCutTheirLists(t *testing.T) {
	list := &corev1.PersistentVolumeClaimList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaimList"},
		Items: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "team-a",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{}`)}}}}}}}
	var body bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(list, &body); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		_, _ = w.Write(body.Bytes())
	}))
	defer srv.Close()
	c, err := cacheOptions(&rest.Config{Host: srv.URL}, scheme.Scheme, ServeFlags{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.HTTPClient.Get(srv.URL + "/api/v1/persistentvolumeclaims")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || len(b) != body.Len() {
		t.Errorf("the cache's client read %d bytes of %d (%v)", len(b), body.Len(), err)
	}
	// Every cut kind's pages are read over that client, and decoded cut.
	reads, err := pageReaders(&rest.Config{Host: srv.URL}, scheme.Scheme, c.HTTPClient, cutKinds())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range cutKinds() {
		if reads[reflect.TypeOf(k.obj)] == nil {
			t.Errorf("no page reader of %T", k.obj)
		}
	}
	got, err := reads[reflect.TypeOf(&corev1.PersistentVolumeClaim{})](context.Background(), metav1.ListOptions{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	items, err := meta.ExtractList(got)
	if err != nil || len(items) != 1 {
		t.Fatalf("a page of claims read as %#v (%v)", got, err)
	}
	if claim, ok := items[0].(*corev1.PersistentVolumeClaim); !ok || claim.Name != "data" || claim.ManagedFields != nil {
		t.Errorf("a claim read as %#v", items[0])
	}
}
