package testobj

import (
	"net/http"
	"net/http/httptest"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/access"
)

// ExplainNow is the fixed time the explain and web tests explain at.
var ExplainNow = time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)

// HTTPGet is GET path as a caller who may read everything.
func HTTPGet(h http.Handler, path string) *httptest.ResponseRecorder {
	return HTTPGetAs(access.Everything("admin"), h, path)
}

// HTTPGetAs is GET path as a caller with reader rd, as the server's guard passes it on.
func HTTPGetAs(rd *access.Reader, h http.Handler, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	h.ServeHTTP(rec, req.WithContext(access.WithReader(req.Context(), rd)))
	return rec
}

// ExplainCluster is the explain and web tests' cluster: a class "local" whose only volume of the
// claim team-a/data's size is Filesystem while the claim asks for Block, a Block volume too
// small, and a volume of another class.
func ExplainCluster() []client.Object {
	return []client.Object{
		StorageClass("local", "kubernetes.io/no-provisioner"),
		PVC("team-a", "data", ClaimClass("local"), ClaimVolumeMode(corev1.PersistentVolumeBlock), Request("5Gi")),
		PV("pv-fs", Class("local"), Capacity("10Gi"), Phase(corev1.VolumeAvailable)),
		PV("pv-small", Class("local"), Capacity("1Gi"), VolumeMode(corev1.PersistentVolumeBlock), Phase(corev1.VolumeAvailable)),
		PV("pv-slow", Class("slow"), Capacity("10Gi"), Phase(corev1.VolumeAvailable)),
	}
}
