package policy_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pvguard/pvguard/policy"
	. "github.com/pvguard/pvguard/test/testobj"
)

// TestReadersReadsVolumeAsReads: judged on the volume the view holds under its name, a reader
// reads exactly the volumes Reads says: its namespaces' by claimRef (with or without uid) or by
// grant (a name, a pattern, a list), none of another namespace's, none granted to nobody, and
// every volume when it may list them.
func TestReadersReadsVolumeAsReads(t *testing.T) {
	grant := func(v string) PVMod { return PVMeta(Annotation(policy.DefaultGrantAnnotation, v)) }
	volumes := []*corev1.PersistentVolume{
		PV("bound-a", ClaimRef("team-a", "data", "uid-1")),
		PV("prebound-a", ClaimRef("team-a", "data", "")),
		PV("bound-b", ClaimRef("team-b", "data", "uid-2")),
		PV("free"),
		PV("granted-a", grant("team-a")),
		PV("granted-pattern", grant(" other, team-*")),
		PV("granted-b", grant("team-b")),
		PV("granted-none", grant(",")),
		PV("granted-empty", grant("")),
		PV("no-namespace", ClaimRef("", "data", "uid-3")),
	}
	var objs []runtime.Object
	for _, v := range volumes {
		objs = append(objs, v)
	}
	view := NewView(objs...)
	want := map[string]bool{"bound-a": true, "prebound-a": true, "granted-a": true, "granted-pattern": true}
	tenant := policy.Readers{Claims: func(ns string) bool { return ns == "team-a" }, View: view, Namespaces: []string{"team-a"}}
	all := policy.Readers{Claims: func(string) bool { return false }, AllVolumes: true}
	noView := policy.Readers{Claims: tenant.Claims, Namespaces: tenant.Namespaces}
	for _, v := range volumes {
		ref := policy.ObjectRef{Kind: policy.KindPersistentVolume, Name: v.Name}
		if got := tenant.ReadsVolume(v); got != want[v.Name] || got != tenant.Reads(ref) {
			t.Errorf("tenant: ReadsVolume(%s) = %v, Reads %v, want %v", v.Name, got, tenant.Reads(ref), want[v.Name])
		}
		if !all.ReadsVolume(v) || !all.Reads(ref) {
			t.Errorf("a reader of every volume does not read %s", v.Name)
		}
		if noView.ReadsVolume(v) || noView.Reads(ref) {
			t.Errorf("a reader without a view reads %s", v.Name)
		}
	}
	if tenant.ReadsVolume(nil) {
		t.Error("tenant reads a nil volume")
	}
}
