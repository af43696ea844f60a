package cachelist

import toolscache "k8s.io/client-go/tools/cache"

// CutLister is the lister PagedInformers gives an informer of a type with transform t.
func CutLister(lw toolscache.ListerWatcher, t toolscache.TransformFunc) toolscache.ListerWatcherWithContext {
	return newPagedLister(lw, t)
}
