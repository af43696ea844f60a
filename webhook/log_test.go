package webhook

import (
	"errors"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// TestRequestLoggerWritesWhatTheDefaultWrites: the lazy request logger writes the same lines,
// with the same values and caller, as controller-runtime's DefaultLogConstructor.
func TestRequestLoggerWritesWhatTheDefaultWrites(t *testing.T) {
	req := &admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "req-1", Namespace: "team-a", Name: "db",
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"},
		UserInfo: authenticationv1.UserInfo{Username: "alice"},
	}}
	write := func(l logr.Logger) {
		l.Info("one", "k", 1)
		l.V(1).Info("verbose")
		l.Error(errors.New("boom"), "two")
		l.WithValues("extra", true).Info("three")
		l.WithName("sub").Error(nil, "four")
		l.WithCallDepth(0).Info("five")
	}
	var lines [2][]string
	for i, construct := range []func(logr.Logger, *admission.Request) logr.Logger{admission.DefaultLogConstructor, requestLogger} {
		base := funcr.New(func(prefix, args string) { lines[i] = append(lines[i], prefix+" "+args) },
			funcr.Options{LogCaller: funcr.All, Verbosity: 1})
		write(construct(base, req))
	}
	if len(lines[0]) != 6 {
		t.Fatalf("default logger wrote %d lines, want 6: %q", len(lines[0]), lines[0])
	}
	for i := range lines[0] {
		if i >= len(lines[1]) || lines[0][i] != lines[1][i] {
			t.Fatalf("line %d differs:\n default: %q\n lazy:    %q", i, lines[0], lines[1])
		}
	}
	if got := requestLogger(logr.Discard(), req); got.GetSink() != nil {
		t.Errorf("a discarding logger should stay discarding")
	}
}
