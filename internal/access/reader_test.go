package access_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/internal/access"
	"github.com/pvguard/pvguard/policy"
)

const (
	uidA = "11111111-2222-3333-4444-555555555555"
	uidB = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
)

func claim(ns, name, uid string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
}

func boundTo(name, ns, claim string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{Namespace: ns, Name: claim}}}
}

// TestAudience: a tenant's answers keep its own claims and their uids, and lose the other
// tenant's, including a namespace that has a readable one as its suffix; a full reader's lose
// nothing.
func TestAudience(t *testing.T) {
	pvc := func(ns, name string) policy.ObjectRef {
		return policy.ObjectRef{Kind: policy.KindPersistentVolumeClaim, Namespace: ns, Name: name}
	}
	text := func(ns, name, uid string) policy.Text {
		return policy.Textf("bound to %s (uid %s)", policy.NameOf(pvc(ns, name)), policy.UID(pvc(ns, name), types.UID(uid)))
	}
	aud := access.NewReader("tenant-a", false, []string{"a", "ba"}, false, false).Audience(nil, nil)
	hidden := "bound to " + policy.HiddenClaim + " (uid " + policy.HiddenUID + ")"
	for _, tc := range []struct {
		in   policy.Text
		want string
	}{
		{text("a", "data", uidA), "bound to a/data (uid " + uidA + ")"},
		{text("ba", "x", uidA), "bound to ba/x (uid " + uidA + ")"},
		{text("b", "data", uidB), hidden},
		{text("gone", "old", ""), hidden},
		{text("aa", "data", uidA), hidden},
	} {
		if got := tc.in.For(aud); got != tc.want {
			t.Errorf("%q for the tenant = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := text("b", "data", uidB).For(access.Everything("admin").Audience(nil, nil)); strings.Contains(got, "cannot read") {
		t.Errorf("a full reader's text was cut: %q", got)
	}
}

// TestReader: what a reader may read, and what it says it left out.
func TestReader(t *testing.T) {
	rd := access.NewReader("tenant-a", false, []string{"a"}, false, false)
	if !rd.Claims("a") || rd.Claims("b") || rd.Full() || rd.None() {
		t.Errorf("tenant reader: Claims(a)=%v Claims(b)=%v Full=%v None=%v", rd.Claims("a"), rd.Claims("b"), rd.Full(), rd.None())
	}
	if !rd.Volume(boundTo("pv-1", "a", "data")) || rd.Volume(boundTo("pv-2", "b", "data")) || rd.Volume(&corev1.PersistentVolume{}) {
		t.Error("a tenant reads exactly the volumes bound to its claims")
	}
	if f := strings.Join(rd.Filtered(), " "); !strings.Contains(f, "persistentvolumes") || !strings.Contains(f, "storageclasses") || !strings.Contains(f, ": a.") {
		t.Errorf("Filtered() = %q: does not say what was left out", f)
	}
	if len(access.Everything("admin").Filtered()) != 0 || !access.Everything("admin").Full() {
		t.Error("a full reader has something filtered")
	}
	if !access.NewReader("nobody", false, nil, false, false).None() {
		t.Error("a reader of nothing is not None")
	}
}
