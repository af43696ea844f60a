package cachelist

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PageSize is how many objects each page of an informer's list holds (CutWhereListed): client-go's
// 500 made 370 requests of the apiserver at 100,000 volumes and claims; at 2,000 a page holds
// about 6 MB of whole objects until it is cut.
const PageSize = 2000

// CutWhereListed returns a constructor of informers (controller-runtime's
// cache.Options.NewInformer) that list page by page and cut each object with its type's transform
// where it arrives, in the page or the watch event that brings it, rather than stream every
// object as a watch event (client-go's WatchListClient) and cut it when the informer stores it.
// It moves each transform of byObject there, leaving in its place one that keeps the object as it
// is (every object the informer stores was cut on its way in).
//
// Why: at 100,000 volumes the watch stream's per-event decoding and the collector it kept busy
// were most of pvguard's start (docs/benchmarks.md, "Ready and the first full audit"); a list
// decodes a page of objects at once. Without the cut per page, client-go's pager would keep every
// page's whole objects until the last page arrived (the start's peak memory doubled at 30,000
// volumes); cut per page, it keeps what the cache keeps.
//
// listed, when not nil, is told once per informer how many objects its first list holds, as soon
// as its first page says (the page's objects and the apiserver's remainingItemCount); a list
// whose count the apiserver does not give (a selector) is not told.
//
// reads, by the informer's example object's type, are the kinds whose pages are read by a
// PageReader rather than by the informer's own list function (a kind cached whole, without a
// namespace or a selector: the reader asks for every object of its resource).
func CutWhereListed(byObject map[client.Object]cache.ByObject, reads map[reflect.Type]ListFunc, listed func(int64)) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	cuts := map[reflect.Type]toolscache.TransformFunc{}
	for obj, by := range byObject {
		if by.Transform != nil {
			cuts[reflect.TypeOf(obj)] = by.Transform
			by.Transform = keep
			byObject[obj] = by
		}
	}
	return PagedInformers(cuts, reads, listed)
}

// keep is the informer's transform of the objects CutWhereListed cuts on their way in.
func keep(obj any) (any, error) { return obj, nil }

// ListFunc lists one page of a resource as options ask (a PageReader's List).
type ListFunc func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error)

// PagedInformers is CutWhereListed's constructor for the given transforms and readers, by the
// informer's example object's type (e.g. *corev1.PersistentVolume); an informer of another type
// lists and watches as client-go does.
func PagedInformers(transforms map[reflect.Type]toolscache.TransformFunc, reads map[reflect.Type]ListFunc, listed func(int64)) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		if t := transforms[reflect.TypeOf(obj)]; t != nil {
			pl := newPagedLister(lw, t)
			if read := reads[reflect.TypeOf(obj)]; read != nil {
				pl.read = read
			}
			pl.listed = listed
			lw = pl
		}
		return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	}
}

// pagedLister lists in pages and cuts each page's objects and each watch event's object.
type pagedLister struct {
	toolscache.ListerWatcherWithContext
	transform toolscache.TransformFunc
	// read lists a page: the wrapped list, or a PageReader's.
	read ListFunc

	mu    sync.Mutex
	ahead *fetched // the page after the last one handed out, asked for already

	// listed is told the first list's count once (CutWhereListed).
	listed     func(int64)
	listedOnce sync.Once
}

var _ toolscache.ListerWatcherWithContext = &pagedLister{}

func newPagedLister(lw toolscache.ListerWatcher, t toolscache.TransformFunc) *pagedLister {
	p := &pagedLister{ListerWatcherWithContext: toolscache.ToListerWatcherWithContext(lw), transform: t}
	p.read = p.ListerWatcherWithContext.ListWithContext
	return p
}

// IsWatchListSemanticsUnSupported makes the reflector list and then watch
// (k8s.io/client-go/util/watchlist.DoesClientNotSupportWatchListSemantics).
func (p *pagedLister) IsWatchListSemanticsUnSupported() bool { return true }

// List is the wrapped list, cut page by page.
func (p *pagedLister) List(options metav1.ListOptions) (runtime.Object, error) {
	return p.ListWithContext(context.Background(), options)
}

// Watch is the wrapped watch, cut.
func (p *pagedLister) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return p.WatchWithContext(context.Background(), options)
}

// WatchWithContext is the wrapped watch, each event's object cut.
func (p *pagedLister) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	w, err := p.ListerWatcherWithContext.WatchWithContext(ctx, options)
	if err != nil || w == nil {
		return w, err
	}
	cw := &cutWatch{in: w, out: make(chan watch.Event), stop: make(chan struct{}), transform: p.transform}
	go cw.run()
	return cw, nil
}

// ListWithContext lists one page (the reflector's pager asks for each in turn, with the continue
// token of the one before) and cuts its objects in place. While it cuts, the next page is
// already asked for: the pager asks for a page only once the one before was returned, and
// without this the apiserver would sit idle while pvguard decodes and cuts, and pvguard while the
// apiserver reads and encodes (a watch-list stream overlaps the two; at 100,000 volumes, pages
// asked for one after the other took longer to ready than the stream, on less CPU).
func (p *pagedLister) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	if options.Continue == "" && options.ResourceVersion == "0" {
		// The apiserver's watch cache ignores the limit of a list at resourceVersion 0 and
		// answers every object in one response; a consistent list (resourceVersion unset, no
		// older than 0) is served from the same cache in pages.
		options.ResourceVersion = ""
	}
	if options.Limit > 0 || options.ResourceVersion == "" {
		options.Limit = PageSize
	}
	list, err := p.page(ctx, options)
	if err != nil {
		return list, err
	}
	m, err := meta.ListAccessor(list)
	if err == nil && options.Continue == "" {
		p.tellListed(list, m)
	}
	if err == nil && m.GetContinue() != "" {
		next := options
		// As the pager asks for the next page (k8s.io/client-go/tools/pager).
		next.Continue, next.ResourceVersion, next.ResourceVersionMatch = m.GetContinue(), "", ""
		p.prefetch(ctx, next)
	}
	if err := cutEach(list, p.transform); err != nil {
		return nil, fmt.Errorf("cutting a page of %T: %w", list, err)
	}
	return list, nil
}

// tellListed tells listed, once, how many objects the list whose first page is list holds: the
// page's and the remaining ones the apiserver counts (none when it does not count them).
func (p *pagedLister) tellListed(list runtime.Object, m metav1.ListInterface) {
	if p.listed == nil {
		return
	}
	total := int64(meta.LenList(list))
	if m.GetContinue() != "" {
		remaining := m.GetRemainingItemCount()
		if remaining == nil {
			return
		}
		total += *remaining
	}
	p.listedOnce.Do(func() { p.listed(total) })
}

// fetched is a page asked for before the pager asks for it.
type fetched struct {
	options metav1.ListOptions
	done    chan struct{}
	list    runtime.Object
	err     error
}

// page is the page options ask for: the one fetched ahead, if it is that page, or one asked for
// now. A page fetched ahead that is not asked for next is dropped.
func (p *pagedLister) page(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	p.mu.Lock()
	f := p.ahead
	p.ahead = nil
	p.mu.Unlock()
	if f != nil && options.Continue != "" && reflect.DeepEqual(f.options, options) {
		select {
		case <-f.done:
			return f.list, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return p.read(ctx, options)
}

// prefetch asks for the page options name in the background, for page to hand out.
func (p *pagedLister) prefetch(ctx context.Context, options metav1.ListOptions) {
	f := &fetched{options: options, done: make(chan struct{})}
	p.mu.Lock()
	p.ahead = f
	p.mu.Unlock()
	go func() {
		defer close(f.done)
		f.list, f.err = p.read(ctx, options)
	}()
}

// cutEach cuts each object of list with transform, in place.
func cutEach(list runtime.Object, transform toolscache.TransformFunc) error {
	return meta.EachListItem(list, func(o runtime.Object) error {
		cut, err := transform(o)
		if err != nil {
			return err
		}
		if c, ok := cut.(runtime.Object); ok && c != o {
			// A transform that returns another object: the page's slice holds values.
			dst, src := reflect.ValueOf(o), reflect.ValueOf(c)
			if dst.Kind() != reflect.Pointer || src.Type() != dst.Type() {
				return fmt.Errorf("transform of %T returned a %T", o, c)
			}
			dst.Elem().Set(src.Elem())
		}
		return nil
	})
}

// cutWatch is a watch whose events' objects are cut. Unlike apimachinery's watch.Filter it stops
// sending once stopped, so that a reader that stops reading leaves no goroutine behind.
type cutWatch struct {
	in        watch.Interface
	out       chan watch.Event
	stop      chan struct{}
	stopOnce  sync.Once
	transform toolscache.TransformFunc
}

func (w *cutWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *cutWatch) Stop() {
	w.stopOnce.Do(func() {
		close(w.stop)
		w.in.Stop()
	})
}

func (w *cutWatch) run() {
	defer close(w.out)
	for {
		var ev watch.Event
		var ok bool
		select {
		case ev, ok = <-w.in.ResultChan():
			if !ok {
				return
			}
		case <-w.stop:
			return
		}
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			cut, err := w.transform(ev.Object)
			if o, isObj := cut.(runtime.Object); err == nil && isObj {
				ev.Object = o
			} else {
				if err == nil {
					err = fmt.Errorf("transform of %T returned a %T", ev.Object, cut)
				}
				ev = watch.Event{Type: watch.Error, Object: &metav1.Status{
					Status: metav1.StatusFailure, Reason: metav1.StatusReasonInternalError,
					Message: fmt.Sprintf("cutting a watched %T: %v", ev.Object, err),
				}}
			}
		}
		select {
		case w.out <- ev:
		case <-w.stop:
			return
		}
	}
}
