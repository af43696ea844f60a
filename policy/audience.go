package policy

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Readers is the Audience of a reader known by what Kubernetes RBAC lets it read: the claims of
// some namespaces (or all), and every volume or only those of its namespaces. A volume is its
// namespaces' when it is linked or pre-bound to a claim there (spec.claimRef) or grants one of them
// (the grant annotation of the config). A volume that a claim there names (spec.volumeName) is
// named to the reader, who reads that name in the claim, but not read: a claim can name any
// volume, and must not open it to its namespace.
type Readers struct {
	// Claims reports whether the reader may read the claims of namespace.
	Claims func(namespace string) bool
	// AllVolumes: the reader may list persistentvolumes.
	AllVolumes bool
	// View finds the volumes named by reference; without one, a reader that may not list volumes
	// reads none.
	View View
	// Config names the grant annotation (nil: the default one).
	Config *Config
	// Namespaces lists the namespaces whose claims the reader may read, when they are known: a
	// grant by pattern ("team-*") is matched against them.
	Namespaces []string
}

// NamespaceReaders is the Audience of whoever may read a namespace's objects, and nothing else:
// who reads an Event or an OpenReports Report written there.
func NamespaceReaders(namespace string, v View, c *Config) Readers {
	return Readers{Claims: func(ns string) bool { return ns == namespace }, View: v, Config: c, Namespaces: []string{namespace}}
}

// Names implements Audience.
func (r Readers) Names(o ObjectRef) bool {
	return r.Reads(o) || o.Kind == KindPersistentVolume && r.named(o.Name)
}

// named reports whether a claim the reader may read names the volume.
func (r Readers) named(name string) bool {
	if r.View == nil || r.Claims == nil || name == "" {
		return false
	}
	claims, err := r.View.ClaimsNamingVolume(name)
	if err != nil {
		return false
	}
	for _, c := range claims {
		if r.Claims(c.Namespace) {
			return true
		}
	}
	return false
}

// Reads implements Audience.
func (r Readers) Reads(o ObjectRef) bool {
	switch o.Kind {
	case KindPersistentVolumeClaim, KindPod:
		return o.Namespace != "" && r.Claims != nil && r.Claims(o.Namespace)
	case KindPersistentVolume:
		return r.volume(o.Name)
	case KindStorageClass, KindNode:
		return true // no tenant's: their names are in every claim and volume that uses them
	}
	return false
}

// UID implements Audience: the uid of an object the reader may read.
func (r Readers) UID(o ObjectRef, _ types.UID) bool { return r.Reads(o) }

func (r Readers) volume(name string) bool {
	if r.AllVolumes {
		return true
	}
	if r.View == nil || r.Claims == nil || name == "" {
		return false
	}
	pv, err := r.View.PersistentVolume(name)
	if err != nil || pv == nil {
		return false
	}
	return r.reads(pv)
}

// ReadsVolume is Reads of the volume pv, which must be the one View holds under pv's name, judged
// on pv without looking it up again: a caller that walks every volume of the View (an
// explanation's candidates) asks of each, and a lookup by name per volume was most of the walk.
func (r Readers) ReadsVolume(pv *corev1.PersistentVolume) bool {
	if r.AllVolumes {
		return true
	}
	if r.View == nil || r.Claims == nil || pv == nil || pv.Name == "" {
		return false
	}
	return r.reads(pv)
}

// reads reports whether the volume is the reader's namespaces': linked or pre-bound to a claim
// there, or granting one of them.
func (r Readers) reads(pv *corev1.PersistentVolume) bool {
	if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace != "" && r.Claims(ref.Namespace) {
		return true
	}
	cfg := r.Config
	if cfg == nil {
		cfg = DefaultConfig()
	}
	grant := pv.Annotations[cfg.grantAnnotation()]
	if grant == "" {
		return false // grants no namespace, as grantsNamespace reads it
	}
	for _, ns := range r.Namespaces {
		if grantsNamespace(grant, ns) {
			return true
		}
	}
	return false
}
