package cachelist_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/pager"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/pvguard/pvguard/internal/cachelist"
)

// pageDecoder is the decoder pvguard serve gives its page readers: client-go's for the cache.
func pageDecoder() runtime.Decoder {
	return runtime.WithoutVersionDecoder{Decoder: scheme.Codecs.UniversalDeserializer()}
}

// pageReader is a PageReader of resource, a core v1 kind whose list type is list's, through hc,
// as pvguard serve makes one.
func pageReader(t testing.TB, host string, hc *http.Client, resource string, list runtime.Object) *cachelist.PageReader {
	t.Helper()
	gvk := schema.GroupVersionKind{Version: "v1", Kind: strings.TrimSuffix(reflect.TypeOf(list).Elem().Name(), "List")}
	rc, err := apiutil.RESTClientForGVK(gvk, false, false, &rest.Config{Host: host, RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter()}, scheme.Codecs, hc)
	if err != nil {
		t.Fatal(err)
	}
	return cachelist.NewPageReader(rc, resource, list, scheme.ParameterCodec, pageDecoder(), lastApplied)
}

// claimsReader is a PageReader of claims through hc, as pvguard serve makes one.
func claimsReader(t testing.TB, host string, hc *http.Client) *cachelist.PageReader {
	return pageReader(t, host, hc, "persistentvolumeclaims", &corev1.PersistentVolumeClaimList{})
}

// readPage is body, served as the apiserver serves a page in protobuf, read by a PageReader of
// resource (list's type).
func readPage(t *testing.T, body []byte, resource string, list runtime.Object) runtime.Object {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	got, err := pageReader(t, srv.URL, srv.Client(), resource, list).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// claimsRead is a cut page of claims a PageReader read, as a list of claims. It fails the test
// unless each item was decoded into an object of its own, in the list client-go's pager makes of
// pages.
func claimsRead(t *testing.T, got runtime.Object) *corev1.PersistentVolumeClaimList {
	t.Helper()
	l, ok := got.(*metainternalversion.List)
	if !ok {
		t.Fatalf("a cut page read as a %T, not as items of their own", got)
	}
	out := &corev1.PersistentVolumeClaimList{TypeMeta: l.TypeMeta, ListMeta: l.ListMeta}
	for _, item := range l.Items {
		c, ok := item.(*corev1.PersistentVolumeClaim)
		if !ok {
			t.Fatalf("an item read as a %T", item)
		}
		out.Items = append(out.Items, *c)
	}
	return out
}

// TestPageReaderReadsPagesCut: a PageReader asks for the page as the informer would, and decodes
// it without its items' managed fields and last-applied annotation.
func TestPageReaderReadsPagesCut(t *testing.T) {
	pages := map[string]*corev1.PersistentVolumeClaimList{
		"": claims(written("first", map[string]string{lastApplied: "{}", "team": "a"}), written("second", nil),
			written("third", nil), written("fourth", nil), written("fifth", nil)),
		"2": claims(written("sixth", map[string]string{lastApplied: `{"kind":"PersistentVolumeClaim"}`})),
	}
	pages[""].Continue, pages["2"].Continue = "2", ""
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		if r.URL.Query().Get("continue") == "json" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprint(w, `{"kind":"PersistentVolumeClaimList","apiVersion":"v1","metadata":{},"items":[{"metadata":{"name":"j","namespace":"team-a"}}]}`)
			return
		}
		page, ok := pages[r.URL.Query().Get("continue")]
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusGone)
			_, _ = fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410,"message":"too old"}`)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		_, _ = w.Write(encoded(t, page))
	}))
	defer srv.Close()
	asked = nil
	r := claimsReader(t, srv.URL, srv.Client())
	ctx := context.Background()
	first, err := r.List(ctx, metav1.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	// The next page is read into the buffer the first was read into, when the pool hands it
	// back: what the first page decoded to must not change with it.
	second, err := r.List(ctx, metav1.ListOptions{Limit: 2, Continue: "2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		got  runtime.Object
		want *corev1.PersistentVolumeClaimList
	}{{first, pages[""]}, {second, pages["2"]}} {
		want := withoutCut(p.want)
		want.TypeMeta = metav1.TypeMeta{} // as client-go leaves a decoded list's
		if got := claimsRead(t, p.got); !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("read\n%#v\nwant\n%#v", got, want)
		}
	}
	mu.Lock()
	if want := []string{"/api/v1/persistentvolumeclaims?limit=2", "/api/v1/persistentvolumeclaims?continue=2&limit=2"}; fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Errorf("asked for %v, want %v", asked, want)
	}
	mu.Unlock()
	// An expired continue token is the error client-go makes of it: the reflector then lists
	// again from the start.
	if _, err = r.List(ctx, metav1.ListOptions{Limit: 2, Continue: "gone"}); !apierrors.IsResourceExpired(err) {
		t.Errorf("an expired continue token: %v, want the apiserver's Expired", err)
	}
	// A page in JSON is decoded as it came.
	if got, err := r.List(ctx, metav1.ListOptions{Continue: "json"}); err != nil || len(got.(*corev1.PersistentVolumeClaimList).Items) != 1 {
		t.Errorf("a page in JSON read as %#v, %v", got, err)
	}
	// client-go's pager, as an informer's reflector runs it, makes one list of both pages.
	all, paged, err := pager.New(r.List).ListWithAlloc(ctx, metav1.ListOptions{Limit: 2})
	if err != nil || !paged {
		t.Fatalf("paged list: %v (paged %v)", err, paged)
	}
	items, err := meta.ExtractListWithAlloc(all)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, item := range items {
		names = append(names, item.(*corev1.PersistentVolumeClaim).Name)
	}
	if want := "[first second third fourth fifth sixth]"; fmt.Sprint(names) != want {
		t.Errorf("the pager listed %v, want %s", names, want)
	}
}

func TestPageReaderFailsOnAPageItCannotDecode(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		_, _ = w.Write([]byte("k8s\x00\xff\xff"))
	}))
	defer srv.Close()
	r := claimsReader(t, srv.URL, srv.Client())
	if list, err := r.List(context.Background(), metav1.ListOptions{}); err == nil {
		t.Fatalf("decoded garbage into %#v", list)
	}
}

// TestPageReaderLaysAPagesObjectsSideBySide: a page's objects are made one after the other
// before any is decoded, so that each lies next to the one before in the allocator's spans rather
// than among what was decoded for it (a volume's capacity map is of a volume's size class, and
// the cache's transform drops it for a shared one): decoded one at a time, about 50 MB more of
// the heap stayed in use, in spans part empty, at 100,000 pairs.
func TestPageReaderLaysAPagesObjectsSideBySide(t *testing.T) {
	l := &corev1.PersistentVolumeList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeList"}}
	for i := range 500 {
		l.Items = append(l.Items, corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pv-%d", i)},
			Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}})
	}
	items := readPage(t, encoded(t, l), "persistentvolumes", &corev1.PersistentVolumeList{}).(*metainternalversion.List).Items
	size := unsafe.Sizeof(corev1.PersistentVolume{})
	apart := 0
	for i := 1; i < len(items); i++ {
		gap := uintptr(unsafe.Pointer(items[i].(*corev1.PersistentVolume))) - uintptr(unsafe.Pointer(items[i-1].(*corev1.PersistentVolume)))
		if gap >= 2*size {
			apart++
		}
	}
	// A span ends now and then: the next object starts another one.
	if apart > len(items)/10 {
		t.Errorf("%d of %d volumes lie apart from the one decoded before them", apart, len(items)-1)
	}
}
