package cachelist_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/cachelist"
)

// pagedServer serves n volumes, each with a large annotation, in the pages asked for, and
// records what each page held when it was handed out and every request.
type pagedServer struct {
	n int

	mu      sync.Mutex
	pages   []*corev1.PersistentVolumeList
	lists   []metav1.ListOptions
	watches []metav1.ListOptions
}

func (s *pagedServer) list(o metav1.ListOptions) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists = append(s.lists, o)
	from := 0
	if o.Continue != "" {
		from, _ = strconv.Atoi(o.Continue)
	}
	to := s.n
	if o.Limit > 0 {
		to = min(s.n, from+int(o.Limit))
	}
	page := &corev1.PersistentVolumeList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}}
	for i := from; i < to; i++ {
		page.Items = append(page.Items, corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("pv-%04d", i), ResourceVersion: "7",
			Annotations: map[string]string{"big": strings.Repeat("x", 1024), "kept": "yes"},
		}})
	}
	if to < s.n {
		// As the apiserver counts what is left of a list without a selector.
		remaining := int64(s.n - to)
		page.Continue, page.RemainingItemCount = strconv.Itoa(to), &remaining
	}
	s.pages = append(s.pages, page)
	return page, nil
}

func (s *pagedServer) watch(o metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watches = append(s.watches, o)
	return watch.NewFake(), nil
}

// cutBig drops the "big" annotation in place.
func cutBig(obj any) (any, error) {
	if v, ok := obj.(*corev1.PersistentVolume); ok {
		delete(v.Annotations, "big")
	}
	return obj, nil
}

// cutBigCopy returns a copy without the "big" annotation, leaving obj alone.
func cutBigCopy(obj any) (any, error) {
	v, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return obj, nil
	}
	out := v.DeepCopy()
	delete(out.Annotations, "big")
	return out, nil
}

func TestPagedInformersListInCutPages(t *testing.T) {
	for _, tc := range []struct {
		name      string
		transform toolscache.TransformFunc
		// reader: the pages are read by a reader of the type, not by the informer's list.
		reader bool
	}{
		{"a transform that cuts in place", cutBig, false},
		{"a transform that returns a copy", cutBigCopy, false},
		{"pages read by a reader", cutBig, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &pagedServer{n: 2*cachelist.PageSize + 17}
			var told []int64
			var toldMu sync.Mutex
			lw := &toolscache.ListWatch{ListFunc: srv.list, WatchFunc: srv.watch}
			var reads map[reflect.Type]cachelist.ListFunc
			if tc.reader {
				reads = map[reflect.Type]cachelist.ListFunc{reflect.TypeOf(&corev1.PersistentVolume{}): func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return srv.list(o)
				}}
				lw.ListFunc = func(metav1.ListOptions) (runtime.Object, error) {
					return nil, errors.New("the informer's own list function was asked for a page")
				}
			}
			newInformer := cachelist.PagedInformers(map[reflect.Type]toolscache.TransformFunc{
				reflect.TypeOf(&corev1.PersistentVolume{}): tc.transform,
			}, reads, func(n int64) { toldMu.Lock(); told = append(told, n); toldMu.Unlock() })
			inf := newInformer(lw, &corev1.PersistentVolume{}, 0, toolscache.Indexers{})
			// No transform of the informer's own: what the pages hold is the wrapper's cut.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			go inf.RunWithContext(ctx)
			if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				t.Fatal("the informer did not sync")
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if len(srv.pages) != 3 {
				t.Fatalf("listed in %d pages, want 3 of at most %d", len(srv.pages), cachelist.PageSize)
			}
			for i, o := range srv.lists {
				if o.Limit != cachelist.PageSize {
					t.Errorf("list %d asked for a limit of %d, want %d", i, o.Limit, cachelist.PageSize)
				}
				if o.ResourceVersion == "0" {
					// The apiserver's watch cache answers such a list whole, whatever the limit.
					t.Errorf("list %d asked for resourceVersion 0", i)
				}
			}
			for i, page := range srv.pages {
				for _, v := range page.Items {
					if _, ok := v.Annotations["big"]; ok {
						t.Fatalf("page %d kept %s's whole object after the page was listed", i, v.Name)
					}
					if v.Annotations["kept"] != "yes" {
						t.Fatalf("page %d lost what the transform keeps of %s: %v", i, v.Name, v.Annotations)
					}
				}
			}
			for _, w := range srv.watches {
				if w.SendInitialEvents != nil && *w.SendInitialEvents {
					t.Fatalf("the informer streamed its first list as watch events: %+v", w)
				}
			}
			if got := len(inf.GetStore().List()); got != srv.n {
				t.Fatalf("the store holds %d volumes, want %d", got, srv.n)
			}
			toldMu.Lock()
			defer toldMu.Unlock()
			if len(told) != 1 || told[0] != int64(srv.n) {
				t.Fatalf("the first list's count was told as %v, want once %d", told, srv.n)
			}
		})
	}
}

func TestPagedInformersLeaveOtherTypesToClientGo(t *testing.T) {
	srv := &pagedServer{n: 3}
	newInformer := cachelist.PagedInformers(map[reflect.Type]toolscache.TransformFunc{
		reflect.TypeOf(&corev1.Pod{}): cutBig,
	}, nil, nil)
	inf := newInformer(&toolscache.ListWatch{ListFunc: srv.list, WatchFunc: srv.watch}, &corev1.PersistentVolume{}, 0, toolscache.Indexers{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go inf.RunWithContext(ctx)
	// client-go's own way: its first list streamed as watch events (WatchListClient), which the
	// fake watch never ends; the first request tells.
	for {
		srv.mu.Lock()
		lists, watches := len(srv.lists), append([]metav1.ListOptions(nil), srv.watches...)
		srv.mu.Unlock()
		if lists > 0 {
			t.Fatalf("an informer of a type without a transform listed: %+v", srv.lists)
		}
		if len(watches) > 0 {
			if w := watches[0]; w.SendInitialEvents == nil || !*w.SendInitialEvents {
				t.Fatalf("an informer of a type without a transform did not list as client-go does: %+v", w)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the informer made no request")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestPagedInformersRefuseATransformOfAnotherType(t *testing.T) {
	srv := &pagedServer{n: 2}
	toPod := func(any) (any, error) { return &corev1.Pod{}, nil }
	lw := &toolscache.ListWatch{ListFunc: srv.list, WatchFunc: srv.watch}
	inf := cachelist.PagedInformers(map[reflect.Type]toolscache.TransformFunc{
		reflect.TypeOf(&corev1.PersistentVolume{}): toPod,
	}, nil, nil)(lw, &corev1.PersistentVolume{}, 0, toolscache.Indexers{})
	errs := make(chan error, 8)
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		select {
		case errs <- err:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go inf.RunWithContext(ctx)
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), "*v1.PersistentVolume") || !strings.Contains(err.Error(), "*v1.Pod") {
			t.Fatalf("the error does not name both types: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("no error for a transform that returned another type")
	}
}

func TestCutWhereListedCutsWatchedObjectsOnce(t *testing.T) {
	fw := watch.NewFake()
	srv := &pagedServer{n: 1}
	cuts := 0
	count := func(obj any) (any, error) {
		cuts++
		return cutBig(obj)
	}
	byObject := map[client.Object]cache.ByObject{
		&corev1.PersistentVolume{}: {Transform: count},
		&corev1.Secret{}:           {},
	}
	newInformer := cachelist.CutWhereListed(byObject, nil, nil)
	for obj, by := range byObject {
		switch obj.(type) {
		case *corev1.PersistentVolume:
			if by.Transform == nil {
				t.Fatal("the volumes' informer lost its transform: controller-runtime would apply its default")
			}
			v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"big": "x"}}}
			if got, _ := by.Transform(v); got != v || len(v.Annotations) != 1 || cuts != 0 {
				t.Fatal("the informer's own transform still cuts: every object would be cut twice")
			}
		case *corev1.Secret:
			if by.Transform != nil {
				t.Fatal("a kind without a transform got one")
			}
		}
	}
	var by cache.ByObject
	for obj, b := range byObject {
		if _, ok := obj.(*corev1.PersistentVolume); ok {
			by = b
		}
	}
	lw := &toolscache.ListWatch{ListFunc: srv.list, WatchFunc: func(metav1.ListOptions) (watch.Interface, error) { return fw, nil }}
	inf := newInformer(lw, &corev1.PersistentVolume{}, 0, toolscache.Indexers{})
	if err := inf.SetTransform(by.Transform); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	fw.Add(&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "watched", ResourceVersion: "8",
		Annotations: map[string]string{"big": "x", "kept": "yes"}}})
	for {
		if o, ok, _ := inf.GetStore().GetByKey("watched"); ok {
			v := o.(*corev1.PersistentVolume)
			if _, big := v.Annotations["big"]; big || v.Annotations["kept"] != "yes" {
				t.Fatalf("a watched volume was stored uncut: %v", v.Annotations)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the watched volume never reached the store")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if cuts != 2 {
		t.Fatalf("%d cuts for one listed and one watched volume, want 2", cuts)
	}
}

func TestCutWatchEndsWhenStoppedWithAnEventUnread(t *testing.T) {
	fw := watch.NewFakeWithChanSize(1, false)
	lw := &toolscache.ListWatch{WatchFunc: func(metav1.ListOptions) (watch.Interface, error) { return fw, nil }}
	before := goruntime.NumGoroutine()
	w, err := cachelist.CutLister(lw, cutBig).WatchWithContext(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fw.Add(&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "unread"}})
	time.Sleep(20 * time.Millisecond) // the cut watch now holds the event, waiting for a reader
	w.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for goruntime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("the cut watch kept its goroutine after Stop (%d goroutines, %d before)", goruntime.NumGoroutine(), before)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPagedListerAsksForTheNextPageWhileItCuts(t *testing.T) {
	srv := &pagedServer{n: 3*cachelist.PageSize + 1}
	lw := &toolscache.ListWatch{ListFunc: srv.list, WatchFunc: srv.watch}
	asked := func() int {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.lists)
	}
	// The cut of each page waits until the next page has been asked for: without the request
	// ahead it would wait forever (here, until the deadline).
	page := 0
	waitForNext := func(obj any) (any, error) {
		deadline := time.Now().Add(5 * time.Second)
		for asked() < page+2 && page < 3 { // the fourth page is the last
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("page %d was cut before page %d was asked for", page+1, page+2)
			}
			time.Sleep(time.Millisecond)
		}
		return cutBig(obj)
	}
	l := cachelist.CutLister(lw, waitForNext)
	opts := metav1.ListOptions{ResourceVersion: "0", Limit: 500}
	total := 0
	for {
		list, err := l.ListWithContext(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		pv := list.(*corev1.PersistentVolumeList)
		total += len(pv.Items)
		page++
		if pv.Continue == "" {
			break
		}
		// As client-go's pager asks for the next page.
		opts.Continue, opts.ResourceVersion, opts.Limit = pv.Continue, "", 500
	}
	if total != srv.n {
		t.Fatalf("listed %d volumes, want %d", total, srv.n)
	}
	if got := asked(); got != page {
		t.Fatalf("the apiserver was asked for %d pages, want %d: a page asked for ahead was not the one handed out", got, page)
	}
}
