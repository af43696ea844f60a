package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/policy"
)

// This file is who an admission answer is for. A denial's message and a warning go back to the
// requester, and anyone who can reach the webhook's port can send a review of their own making:
// they name, besides the request's own objects, only what the requester may read.

// ReadRights answers whether a user may do verb on resource in namespace ("" for a
// cluster-scoped resource or every namespace) with Kubernetes' authorization (a
// SubjectAccessReview). It answers within its own budget: answered is false when it could not
// (the budget spent, the apiserver slow), and the message is then the one for a reader of the
// request alone. Only a server that knows its reviews come from the apiserver may consult it:
// otherwise the user of a review is whatever its sender wrote.
type ReadRights interface {
	May(ctx context.Context, user policy.UserInfo, verb, resource, namespace string) (allowed, answered bool)
}

// ValidatorOption configures a Validator.
type ValidatorOption func(*Validator)

// WithReadRights has the validator name, in its messages, the objects beyond the request that
// rights says the requester may read (a claim in another namespace, a volume), as it names them
// to a cluster admin. Without it a message names only the request's own objects: the object, the
// claims of its namespace, the volume or claim its fields name, and the volumes of its namespace.
func WithReadRights(rights ReadRights) ValidatorOption {
	return func(v *Validator) { v.rights = rights }
}

// requestAudience is the requester of review r as the audience of its answer.
type requestAudience struct {
	ctx    context.Context
	r      *policy.Review
	rights ReadRights
	// own is the namespace whose objects the request may be told of (a claim's); its readers' view
	// of the cluster says which volumes are that namespace's.
	own    string
	nsView policy.Audience
	named  map[policy.ObjectRef]bool
	uids   map[types.UID]bool

	mu  sync.Mutex
	may map[[3]string]bool
}

// audienceOf is the requester of r, with view to find the volumes of a claim's namespace.
func audienceOf(ctx context.Context, r *policy.Review, view policy.View, cfg *policy.Config, rights ReadRights) *requestAudience {
	a := &requestAudience{ctx: ctx, r: r, rights: rights, named: map[policy.ObjectRef]bool{}, uids: map[types.UID]bool{}, may: map[[3]string]bool{}}
	a.named[r.Object()] = true
	for _, pvc := range []*corev1.PersistentVolumeClaim{r.PVC, r.OldPVC} {
		if pvc == nil {
			continue
		}
		a.own = pvc.Namespace
		a.uids[pvc.UID] = true
		if pvc.Spec.VolumeName != "" {
			a.named[policy.ObjectRef{Kind: policy.KindPersistentVolume, Name: pvc.Spec.VolumeName}] = true
		}
	}
	for _, pv := range []*corev1.PersistentVolume{r.PV, r.OldPV} {
		if pv == nil {
			continue
		}
		a.named[policy.ObjectRef{Kind: policy.KindPersistentVolume, Name: pv.Name}] = true
		a.uids[pv.UID] = true
		if ref := pv.Spec.ClaimRef; ref != nil {
			a.named[policy.ObjectRef{Kind: policy.KindPersistentVolumeClaim, Namespace: ref.Namespace, Name: ref.Name}] = true
			a.uids[ref.UID] = true
		}
	}
	delete(a.uids, "")
	if a.own != "" && view != nil {
		a.nsView = policy.NamespaceReaders(a.own, view, cfg)
	}
	return a
}

// Names implements policy.Audience: what the request names, or what the requester may read.
func (a *requestAudience) Names(o policy.ObjectRef) bool { return a.named[o] || a.Reads(o) }

// Reads implements policy.Audience: the request's own object, the objects of its own namespace,
// and what the requester's read rights reach.
func (a *requestAudience) Reads(o policy.ObjectRef) bool {
	if o == a.r.Object() {
		return true
	}
	if a.nsView != nil && a.nsView.Reads(o) {
		return true
	}
	switch o.Kind {
	case policy.KindPersistentVolumeClaim:
		return o.Namespace != "" && a.mayRead("persistentvolumeclaims", o.Namespace)
	case policy.KindPod:
		return o.Namespace != "" && a.mayRead("pods", o.Namespace)
	case policy.KindPersistentVolume:
		return a.mayRead("persistentvolumes", "")
	case policy.KindStorageClass, policy.KindNode:
		return true
	}
	return false
}

// UID implements policy.Audience: only the uids the request itself carries. A live object's uid
// is never told, whoever asks: a review's identity cannot always be trusted, and nobody needs it
// to fix a write.
func (a *requestAudience) UID(_ policy.ObjectRef, uid types.UID) bool { return a.uids[uid] }

// mayRead asks the read rights, once per resource and namespace for this review, whether the
// requester may get resource there.
func (a *requestAudience) mayRead(resource, namespace string) bool {
	if a.rights == nil {
		return false
	}
	key := [3]string{"get", resource, namespace}
	a.mu.Lock()
	defer a.mu.Unlock()
	if ok, seen := a.may[key]; seen {
		return ok
	}
	allowed, answered := a.rights.May(a.ctx, a.r.User, "get", resource, namespace)
	ok := allowed && answered
	a.may[key] = ok
	return ok
}

// failedRules says which rules could not judge a review and why, in words that name no object:
// the rule, and the cause at the bottom of its error (a network error without its URL, an API
// error's reason). pvguard's log has the whole error.
func failedRules(err error) string {
	ruleErrs, rest := policy.SplitRuleErrors(err)
	var out []string
	for _, e := range ruleErrs {
		var re *policy.RuleError
		if errors.As(e, &re) {
			out = append(out, fmt.Sprintf("%s %s: %s", re.Rule, re.Name, cause(re.Err)))
		}
	}
	if rest != nil {
		out = append(out, cause(rest))
	}
	return strings.Join(out, "; ")
}

// cause is the bottom of err's chain, as a requester may be told it.
func cause(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return "the apiserver answered " + string(status.Status().Reason)
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}
