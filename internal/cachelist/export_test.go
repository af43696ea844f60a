package cachelist

import toolscache "k8s.io/client-go/tools/cache"

// CutLister is the lister PagedInformers gives an informer of a type with transform t.
func CutLister(lw toolscache.ListerWatcher, t toolscache.TransformFunc) toolscache.ListerWatcherWithContext {
	return newPagedLister(lw, t)
}

// CutList is cutList over a copy of body (the cut is made in place).
func CutList(body []byte, annotation string) ([]byte, bool) {
	cut, _, ok := cutList(append([]byte(nil), body...), []byte(annotation))
	return cut, ok
}
