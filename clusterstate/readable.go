package clusterstate

import (
	"fmt"
	"reflect"

	storagev1 "k8s.io/api/storage/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Readable is a kind of object the rules may read through the View's generic read (ListKind)
// beyond its typed reads: the kind's name, which rules declare in their Reads, and its Go types.
// Every reader of the cluster serves the kinds of this one table: clusterview starts an informer
// for each that a rule of its set reads and lists them from it or live, Read lists them into a
// State, internal/manifests reads them from files.
type Readable struct {
	// Kind is the API's name of the kind, as a manifest's kind spells it.
	Kind Kind
	// Object and List are empty objects of the kind and of its list: prototypes, never filled.
	Object client.Object
	List   client.ObjectList
}

// readables are the kinds a rule may read with ListKind. A rule that reads a new kind adds its
// line here and names the kind in its Reads; pvguard's ClusterRole must let it list and watch the
// kind once a rule it ships reads it (docs/development.md, "Adding a rule").
var readables = []Readable{
	{Kind: "VolumeAttributesClass", Object: &storagev1.VolumeAttributesClass{}, List: &storagev1.VolumeAttributesClassList{}},
}

// Readables lists the kinds a rule may read with ListKind.
func Readables() []Readable { return append([]Readable(nil), readables...) }

// ReadableKind returns the entry of kind k, and false when no rule may read it with ListKind.
func ReadableKind(k Kind) (Readable, bool) {
	for _, r := range readables {
		if r.Kind == k {
			return r, true
		}
	}
	return Readable{}, false
}

// ReadableOf returns the entry of obj's type, and false when its type is not in the table.
func ReadableOf(obj any) (Readable, bool) {
	t := reflect.TypeOf(obj)
	for _, r := range readables {
		if reflect.TypeOf(r.Object) == t {
			return r, true
		}
	}
	return Readable{}, false
}

// APIVersion is the kind's group and version as a manifest's apiVersion spells them
// ("storage.k8s.io/v1"), from client-go's scheme; "" for a type the scheme does not know.
func (r Readable) APIVersion() string {
	gvks, _, err := clientgoscheme.Scheme.ObjectKinds(r.Object)
	if err != nil || len(gvks) == 0 {
		return ""
	}
	return gvks[0].GroupVersion().String()
}

// NewList returns a new, empty list of the kind, for one read to fill.
func (r Readable) NewList() client.ObjectList {
	return r.List.DeepCopyObject().(client.ObjectList)
}

// errNotHeld is ListKind's answer for a kind a State was not given.
func errNotHeld(k Kind) error {
	if _, ok := ReadableKind(k); !ok {
		return fmt.Errorf("listing %s: not a kind rules may list (clusterstate.Readables)", k)
	}
	return fmt.Errorf("listing %s: the state was not read with it", k)
}
