// Package access decides what a caller of pvguard's read endpoints (the dashboard, the audit
// report, the explanations) may see: who the caller is (a bearer token, checked with a
// TokenReview), what Kubernetes RBAC lets them list (SubjectAccessReviews), and how an answer
// built from the whole cluster is cut down to that (Reader, and its Audience, for which
// policy.Redact renders every reference an answer makes). The answers themselves are filtered by
// internal/web (visible.go) and package explain (explain/visible.go), with these predicates only.
package access

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/policy"
)

// Reader is what one caller may read, from the SubjectAccessReviews of their identity.
type Reader struct {
	// User is the caller's name, as the TokenReview gave it.
	User string
	// AllClaims: the caller may list persistentvolumeclaims in every namespace; otherwise
	// namespaces holds the namespaces (of those that have claims) where they may.
	AllClaims  bool
	namespaces map[string]bool
	// Volumes and Classes: the caller may list persistentvolumes, storageclasses.
	Volumes, Classes bool
}

// Everything is the reader of a caller who may read all that pvguard shows.
func Everything(user string) *Reader {
	return &Reader{User: user, AllClaims: true, Volumes: true, Classes: true}
}

// NewReader is a reader that may list claims in namespaces (and nowhere else unless allClaims).
func NewReader(user string, allClaims bool, namespaces []string, volumes, classes bool) *Reader {
	r := &Reader{User: user, AllClaims: allClaims, Volumes: volumes, Classes: classes, namespaces: map[string]bool{}}
	for _, ns := range namespaces {
		r.namespaces[ns] = true
	}
	return r
}

// Full reports whether nothing is filtered out for this caller.
func (r *Reader) Full() bool { return r.AllClaims && r.Volumes && r.Classes }

// None reports whether the caller may read nothing that pvguard shows.
func (r *Reader) None() bool {
	return !r.AllClaims && len(r.namespaces) == 0 && !r.Volumes && !r.Classes
}

// Claims reports whether the caller may read the claims of namespace (and their findings).
func (r *Reader) Claims(namespace string) bool { return r.AllClaims || r.namespaces[namespace] }

// Volume reports whether the caller may read the volume: they may list volumes, or it is bound
// (or pre-bound) to a claim in a namespace whose claims they may read.
func (r *Reader) Volume(pv *corev1.PersistentVolume) bool {
	if r.Volumes {
		return true
	}
	ref := pv.Spec.ClaimRef
	return ref != nil && ref.Namespace != "" && r.Claims(ref.Namespace)
}

// Namespaces lists the namespaces whose claims the caller may read (nil with AllClaims).
func (r *Reader) Namespaces() []string {
	if r.AllClaims {
		return nil
	}
	out := make([]string, 0, len(r.namespaces))
	for ns := range r.namespaces {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// Filtered says, one sentence each, what this caller's answers leave out and why; none for a
// caller who may read everything.
func (r *Reader) Filtered() []string {
	var out []string
	if !r.AllClaims {
		ns := r.Namespaces()
		if len(ns) == 0 {
			out = append(out, "Claims and their findings are not shown: you may not list persistentvolumeclaims in any namespace that has claims.")
		} else {
			out = append(out, fmt.Sprintf("Claims and their findings are shown only in the namespaces where you may list persistentvolumeclaims: %s.", strings.Join(ns, ", ")))
		}
	}
	if !r.Volumes {
		out = append(out, "Volumes are shown only when bound to a claim you may read, and volumes' findings not at all: you may not list persistentvolumes.")
	}
	if !r.Classes {
		out = append(out, "StorageClasses' findings are not shown: you may not list storageclasses.")
	}
	if !r.AllClaims {
		out = append(out, "Where an answer refers to a claim you cannot read, it says \""+policy.HiddenClaim+"\".")
	}
	return out
}

type readerKey struct{}

// WithReader returns ctx carrying the caller's reader.
func WithReader(ctx context.Context, r *Reader) context.Context {
	return context.WithValue(ctx, readerKey{}, r)
}

// FromContext is the caller's reader. A context without one (a handler mounted without the
// guard) reads nothing: access fails closed.
func FromContext(ctx context.Context) *Reader {
	if r, ok := ctx.Value(readerKey{}).(*Reader); ok && r != nil {
		return r
	}
	return &Reader{namespaces: map[string]bool{}}
}

// Audience is the reader as the audience of an answer (policy.Audience): the claims of the
// namespaces it may read, and the volumes it may list or that are its namespaces' (v finds them;
// cfg names the grant annotation, nil for the default). Every answer the read endpoints serve is
// rendered for it (policy.Redact).
func (r *Reader) Audience(v policy.View, cfg *policy.Config) policy.Audience {
	if r.Full() {
		return policy.Everyone
	}
	return policy.Readers{Claims: r.Claims, AllVolumes: r.Volumes, View: v, Config: cfg, Namespaces: r.Namespaces()}
}
