package access_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/internal/access"
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

// TestScrubber: a tenant's texts keep its own claims and uids, and lose the other tenant's,
// including a namespace that is a suffix of a readable one, and a namespace known only from a
// volume's claim reference.
func TestScrubber(t *testing.T) {
	rd := access.NewReader("tenant-a", false, []string{"a", "ba"}, false, false)
	claims := []*corev1.PersistentVolumeClaim{claim("a", "data", uidA), claim("b", "data", uidB), claim("ba", "x", "")}
	volumes := []*corev1.PersistentVolume{boundTo("pv-1", "gone", "old")}
	s := rd.Scrubber(claims, volumes)
	for in, want := range map[string]string{
		"bound to a/data":                     "bound to a/data",
		"bound to b/data":                     "bound to " + access.Hidden,
		"bound to ba/data (uid " + uidA + ")": "bound to ba/data (uid " + uidA + ")",
		"bind to b/data in flight":            "bind to " + access.Hidden + " in flight",
		"bind to uid " + uidB + " in flight":  "bind to uid " + access.HiddenUID + " in flight",
		"pvc-" + uidB:                         "pvc-" + access.HiddenUID,
		"pre-bound to gone/old":               "pre-bound to " + access.Hidden,
		"no volume fits: the closest, pv-1, goes to b/data in the binder's plan": "no volume fits: the closest, pv-1, goes to " + access.Hidden + " in the binder's plan",
		"provisioner kubernetes.io/no-provisioner":                               "provisioner kubernetes.io/no-provisioner",
		"class ebs.csi.aws.com/b":                                                "class ebs.csi.aws.com/b",
	} {
		if got := s.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
	if !s.HidesClaim("b/data") || s.HidesClaim("a/data") || s.HidesClaim("ba/x") {
		t.Error("HidesClaim does not follow the namespaces the reader may read")
	}
	full := access.Everything("admin").Scrubber(claims, volumes)
	if got := full.String("bound to b/data (uid " + uidB + ")"); strings.Contains(got, access.Hidden) || strings.Contains(got, access.HiddenUID) {
		t.Errorf("a full reader's text was scrubbed: %q", got)
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
