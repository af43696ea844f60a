// Package clusterview is pvguard's policy.View over the informer cache, with a live read when
// the cache misses, and over live reads only (the view the audit confirms its findings on): the
// indexes it lists by, the informers it starts (pods stripped to what the rules read) and the
// count of cached objects by kind. Admission, the audit, the binder and explanations read the
// cluster through it.
package clusterview
