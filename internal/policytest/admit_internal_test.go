package policytest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/policy"
)

// loadOne loads a suite file written from text.
func loadOne(t *testing.T, text string) *Suite {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	suites, errs := Load([]string{path})
	if len(errs) > 0 || len(suites) != 1 {
		t.Fatalf("suites %d, errors %v", len(suites), errs)
	}
	return suites[0]
}

const twoObjects = `
apiVersion: pvguard.io/v1alpha1
kind: PolicyTest
fixtures:
  objects:
  - apiVersion: v1
    kind: PersistentVolumeClaim
    metadata: {namespace: team-a, name: data, uid: uid-data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, storageClassName: ""}
    status: {phase: Pending}
  - apiVersion: v1
    kind: PersistentVolume
    metadata: {name: pv-1}
    spec: {accessModes: [ReadWriteOnce], capacity: {storage: 1Gi}, hostPath: {path: /pv-1}}
    status: {phase: Available}
cases:
- name: pre-bind, without the claimRef's kind and apiVersion
  write:
    operation: UPDATE
    user: admin
    oldFixture: PersistentVolume/pv-1
    patch: {spec: {claimRef: {namespace: team-a, name: data}}, status: {phase: Bound}}
  expect: {allowed: true}
`

// TestMutatingWebhookRuns: a volume's claimRef without kind and apiVersion reaches the
// validating webhook, and the store, with what pvguard's mutating webhook fills in; the status an
// update of the main resource carries is the stored one, as the apiserver keeps it.
func TestMutatingWebhookRuns(t *testing.T) {
	s := loadOne(t, twoObjects)
	w := s.Cases[0].Write
	v, stored := s.initial.admit(context.Background(), w)
	if v.String() != "allowed" {
		t.Fatalf("verdict %s", v)
	}
	var pv corev1.PersistentVolume
	if err := json.Unmarshal(stored, &pv); err != nil {
		t.Fatal(err)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Kind != "PersistentVolumeClaim" || ref.APIVersion != "v1" {
		t.Errorf("claimRef %+v: the mutating webhook's patch was not applied", pv.Spec.ClaimRef)
	}
	if pv.Status.Phase != corev1.VolumeAvailable {
		t.Errorf("phase %s: an update of the main resource keeps the stored status", pv.Status.Phase)
	}
}

// panicking is an engine source whose engine panics when a handler asks for it, as a rule that
// panics would.
type panicking struct{}

func (panicking) Engine() *policy.Engine { panic("a rule panicked") }

// TestPanicIsAnError: a handler that panics answers the write with an error, as `pvguard serve`
// answers it, and the case errs; the run goes on.
func TestPanicIsAnError(t *testing.T) {
	s := loadOne(t, twoObjects)
	wd := s.initial
	wd.hooks = newHooks(panicking{}, wd.st.view)
	v, _ := wd.admit(context.Background(), s.Cases[0].Write)
	if !strings.Contains(v.Error, "panic: a rule panicked [recovered]") {
		t.Fatalf("verdict %s, want an error naming the panic", v)
	}
}

const boundClaim = `
apiVersion: pvguard.io/v1alpha1
kind: PolicyTest
fixtures:
  objects:
  - apiVersion: v1
    kind: PersistentVolumeClaim
    metadata:
      namespace: team-a
      name: data
      uid: uid-data
      finalizers: [kubernetes.io/pvc-protection]
      annotations: {pv.kubernetes.io/bind-completed: "yes"}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, storageClassName: "", volumeName: pv-1}
    status: {phase: Bound, capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce]}
  - apiVersion: v1
    kind: PersistentVolume
    metadata: {name: pv-1, finalizers: [kubernetes.io/pv-protection]}
    spec:
      accessModes: [ReadWriteOnce]
      capacity: {storage: 1Gi}
      hostPath: {path: /pv-1}
      claimRef: {apiVersion: v1, kind: PersistentVolumeClaim, namespace: team-a, name: data, uid: uid-data}
    status: {phase: Bound}
cases:
- name: the protection finalizer removed through status
  write:
    operation: UPDATE
    subResource: status
    user: alice
    oldFixture: PersistentVolumeClaim/team-a/data
    patch: {metadata: {finalizers: null}, status: {phase: Lost}}
  expect: {denied: [PVG012]}
- name: an annotation added and the volume name changed through status
  write:
    operation: UPDATE
    subResource: status
    user: alice
    oldFixture: PersistentVolumeClaim/team-a/data
    patch: {metadata: {annotations: {example.com/owner: alice}}, spec: {volumeName: pv-2}, status: {phase: Lost}}
  expect: {allowed: true}
`

// TestStatusWriteKeepsMetadata: a write through the status subresource is judged and stored
// with its metadata and the stored spec, as the PersistentVolumeClaim status strategy keeps
// them: a protection finalizer it removes is refused as on the claim, an annotation it adds is
// stored, a volume name it changes is not.
func TestStatusWriteKeepsMetadata(t *testing.T) {
	s := loadOne(t, boundClaim)
	v, _ := s.initial.admit(context.Background(), s.Cases[0].Write)
	if !slices.Contains(v.Deny, "PVG012") {
		t.Errorf("removing pvc-protection through status: verdict %s, want denied by PVG012", v)
	}
	v, stored := s.initial.admit(context.Background(), s.Cases[1].Write)
	if v.String() != "allowed" {
		t.Fatalf("verdict %s", v)
	}
	var c corev1.PersistentVolumeClaim
	if err := json.Unmarshal(stored, &c); err != nil {
		t.Fatal(err)
	}
	if c.Annotations["example.com/owner"] != "alice" || c.Annotations["pv.kubernetes.io/bind-completed"] != "yes" {
		t.Errorf("annotations %v: the status write's metadata is kept", c.Annotations)
	}
	if c.Spec.VolumeName != "pv-1" || c.Status.Phase != corev1.ClaimLost || c.UID != "uid-data" {
		t.Errorf("volumeName %q, phase %s, uid %s: a status write changes the status, not the spec or the uid", c.Spec.VolumeName, c.Status.Phase, c.UID)
	}
}
