package testobj

import (
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// The kinds of the core objects an AdmissionReview is about (Review).
var (
	PVKind  = metav1.GroupVersionKind{Version: "v1", Kind: "PersistentVolume"}
	PVCKind = metav1.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}
	PodKind = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
)

// Review is the admission.k8s.io/v1 AdmissionReview JSON of a request (uid req-1) to write obj, of
// that kind and core v1 resource, by user; old is the object before an update or a delete (nil
// for none).
func Review(t testing.TB, kind metav1.GroupVersionKind, resource string, op admissionv1.Operation, obj, old runtime.Object, user string) []byte {
	t.Helper()
	raw := func(o runtime.Object) runtime.RawExtension {
		if o == nil {
			return runtime.RawExtension{}
		}
		data, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: data}
	}
	ar := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("req-1"), Kind: kind, Operation: op,
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: resource},
			Object:   raw(obj), OldObject: raw(old),
			UserInfo: authenticationv1.UserInfo{Username: user},
		},
	}
	data, err := json.Marshal(ar)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
