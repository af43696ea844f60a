package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/internal/devcluster"
)

// Client is a client of the control plane acting as user with groups (the admin for ""); the
// test fails when it cannot be made.
func (h *Harness) Client(t testing.TB, user string, groups ...string) client.Client {
	t.Helper()
	c, err := devcluster.NewClient(h.Config, nil, user, groups...)
	if err != nil {
		t.Fatalf("client for %q: %v", user, err)
	}
	return c
}

// PVCProtector is a client acting as kube-controller-manager's pvc-protection controller, for
// DeleteClaim: no kube-controller-manager runs with the harness.
func (h *Harness) PVCProtector(t testing.TB) client.Client {
	t.Helper()
	return h.Client(t, "system:serviceaccount:kube-system:pvc-protection-controller", "system:serviceaccounts", "system:authenticated")
}

// GetPV reads a volume; the test fails when it cannot.
func GetPV(t testing.TB, c client.Reader, name string) *corev1.PersistentVolume {
	t.Helper()
	pv := &corev1.PersistentVolume{}
	Must(t, c.Get(context.Background(), client.ObjectKey{Name: name}, pv), "reading volume "+name)
	return pv
}

// GetPVC reads a claim; the test fails when it cannot.
func GetPVC(t testing.TB, c client.Reader, ns, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	Must(t, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pvc), "reading claim "+ns+"/"+name)
	return pvc
}

// FreshPV readies a builder's volume (test/testobj) for creation: the apiserver owns its status.
func FreshPV(pv *corev1.PersistentVolume) *corev1.PersistentVolume {
	pv.Status = corev1.PersistentVolumeStatus{}
	return pv
}

// FreshPVC readies a builder's claim (test/testobj) for creation: the apiserver owns its uid and
// status.
func FreshPVC(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	pvc.UID, pvc.Status = "", corev1.PersistentVolumeClaimStatus{}
	return pvc
}

// BoundTo is a condition for WaitFor: the claim and the volume are bound to each other (the
// volume's claimRef has the claim's uid), both Bound, and the claim bind-completed.
func BoundTo(c client.Reader, ns, claim, volume string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		pvc, pv := &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolume{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, pvc); err != nil {
			return false, err
		}
		if err := c.Get(ctx, client.ObjectKey{Name: volume}, pv); err != nil {
			return false, err
		}
		ref := pv.Spec.ClaimRef
		return pvc.Spec.VolumeName == volume && pvc.Status.Phase == corev1.ClaimBound &&
			ref != nil && ref.UID == pvc.UID && pv.Status.Phase == corev1.VolumeBound &&
			pvc.Annotations["pv.kubernetes.io/bind-completed"] == "yes", nil
	}
}

// DeleteClaim deletes a claim no pod uses as c, then, as kube-controller-manager's
// pvc-protection controller does, removes its protection finalizer as protector (with an update:
// the controller's role has no patch) and waits until the claim is gone.
func DeleteClaim(t testing.TB, c, protector client.Client, ns, name string) {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKey{Namespace: ns, Name: name}
	Must(t, c.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}), "deleting claim "+ns+"/"+name)
	Eventually(t, time.Minute, "claim "+ns+"/"+name+" gone", func(ctx context.Context) error {
		pvc := &corev1.PersistentVolumeClaim{}
		err := protector.Get(ctx, key, pvc)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		var kept []string
		for _, f := range pvc.Finalizers {
			if f != "kubernetes.io/pvc-protection" {
				kept = append(kept, f)
			}
		}
		if len(kept) != len(pvc.Finalizers) {
			pvc.Finalizers = kept
			if err := protector.Update(ctx, pvc); err != nil {
				return fmt.Errorf("pvc-protection controller removing its finalizer: %w", err)
			}
		}
		return errors.New("still there")
	})
}

// EventReasons lists the reasons of the events recorded on the named object in ns.
func EventReasons(t testing.TB, c client.Reader, ns, name string) []string {
	t.Helper()
	var list corev1.EventList
	Must(t, c.List(context.Background(), &list, client.InNamespace(ns)), "listing events")
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}

// DescribeEvents gives each event as "name (xCOUNT): message", for failure messages.
func DescribeEvents(evs []corev1.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = fmt.Sprintf("%s (x%d): %s", e.Name, e.Count, e.Message)
	}
	return out
}

// DeniedBy reports whether err is pvguard's admission denial by rule.
func DeniedBy(err error, rule string) bool {
	return err != nil && strings.Contains(err.Error(), "denied the request") && strings.Contains(err.Error(), "["+rule+" ")
}

// WebhookUnreachable reports whether err is the apiserver refusing a write because it could not
// call one of pvguard's webhooks.
func WebhookUnreachable(err error) bool {
	return err != nil && strings.Contains(err.Error(), "failed calling webhook") && strings.Contains(err.Error(), ".pvguard.io\"")
}

// FetchReport reads the live audit report of the pvguard instance serving at baseURL.
func FetchReport(ctx context.Context, hc *http.Client, baseURL string) (*audit.Report, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/api/v1/report", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v1/report: HTTP %d", resp.StatusCode)
	}
	r := &audit.Report{}
	return r, json.NewDecoder(resp.Body).Decode(r)
}
