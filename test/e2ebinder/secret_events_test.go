package e2ebinder

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestBinderEventsCarryNoSecretValues has the active binder record events about CSI volumes
// whose volumeAttributes hold a credential-like value and which reference a Secret holding
// another: a binding policy forbids (PolicyForbidsBinding), a claim naming a volume of the
// wrong mode (VolumeMismatch and, after a second, NoVolumeFits on the claim) and a volume pre-bound to such a claim
// (VolumeMismatch on the volume, an event in "default", and on the claim). No event in any namespace may contain
// either value.
func TestBinderEventsCarryNoSecretValues(t *testing.T) {
	harness.Must(t, h.SetPolicy(policyConfig+"rules:\n  volume-grab: {action: deny}\n"), "tightening policy")
	t.Cleanup(func() { _ = h.SetPolicy(policyConfig) })
	startBinder(t, "active", func(o *cli.ServeFlags) { o.Binder.NoVolumeFitsAfter = time.Second })
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	attrCanary, secretCanary := "canary-attr-"+ns, "canary-secret-"+ns

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "csi-creds"},
		StringData: map[string]string{"password": secretCanary},
	}
	harness.Must(t, admin(t).Create(ctx, secret), "creating the CSI Secret")
	secretive := func(handle string) testobj.PVMod {
		return func(pv *corev1.PersistentVolume) {
			testobj.CSI("csi.example.com", handle, map[string]string{"password": attrCanary, "userKeyring": attrCanary, "pool": "fast"})(pv)
			ref := &corev1.SecretReference{Namespace: ns, Name: secret.Name}
			pv.Spec.CSI.NodePublishSecretRef, pv.Spec.CSI.NodeStageSecretRef = ref, ref
		}
	}
	block := corev1.PersistentVolumeBlock
	grabbed, wrongMode, prebound := ns+"-grabbed", ns+"-wrong-mode", ns+"-prebound"

	// Policy (volume-grab: deny) forbids the pair the binder would make.
	harness.Must(t, admin(t).Create(ctx, fresh(ns, testobj.PV(grabbed, secretive("h-grabbed")))), "creating volume "+grabbed)
	harness.Must(t, seed(t).Create(ctx, freshClaim(testobj.PVC(ns, "grab", testobj.VolumeName(grabbed)))), "seeding claim grab")
	// A Block claim names a Filesystem volume.
	harness.Must(t, admin(t).Create(ctx, fresh(ns, testobj.PV(wrongMode, secretive("h-wrong-mode")))), "creating volume "+wrongMode)
	harness.Must(t, seed(t).Create(ctx, freshClaim(testobj.PVC(ns, "block", testobj.ClaimVolumeMode(block), testobj.VolumeName(wrongMode)))), "seeding claim block")
	// A Filesystem volume points at a Block claim (its uid too) that does not name it.
	blockPre := freshClaim(testobj.PVC(ns, "block-pre", testobj.ClaimVolumeMode(block)))
	harness.Must(t, seed(t).Create(ctx, blockPre), "seeding claim block-pre")
	harness.Must(t, seed(t).Create(ctx, fresh(ns, testobj.PV(prebound, secretive("h-prebound"), testobj.ClaimRef(ns, "block-pre", string(blockPre.UID))))), "seeding volume "+prebound)

	harness.WaitFor(t, time.Minute, "PolicyForbidsBinding on claim grab", hasEvent(t, ns, "grab", "PolicyForbidsBinding"))
	harness.WaitFor(t, time.Minute, "VolumeMismatch on claim block", hasEvent(t, ns, "block", "VolumeMismatch"))
	harness.WaitFor(t, time.Minute, "NoVolumeFits on claim block", hasEvent(t, ns, "block", "NoVolumeFits"))
	harness.WaitFor(t, time.Minute, "VolumeMismatch on volume "+prebound, hasEvent(t, "default", prebound, "VolumeMismatch"))
	time.Sleep(2 * time.Second) // a few resyncs: repeated and aggregated events too

	var events corev1.EventList
	harness.Must(t, admin(t).List(ctx, &events), "listing events in every namespace")
	about := 0
	for _, e := range events.Items {
		data, err := json.Marshal(e)
		harness.Must(t, err, "encoding an event")
		if strings.Contains(string(data), attrCanary) || strings.Contains(string(data), secretCanary) {
			t.Errorf("event %s/%s (%s on %s %s) carries a secret value: %s", e.Namespace, e.Name, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		}
		switch e.InvolvedObject.Name {
		case grabbed, wrongMode, prebound, "grab", "block", "block-pre":
			about++
			t.Logf("event %s %s on %s %s/%s: %s", e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Message)
		}
	}
	if about < 3 {
		t.Fatalf("only %d events about the secretive volumes and their claims: nothing was checked", about)
	}
	t.Logf("%d events in all namespaces checked, %d of them about the volumes carrying the values", len(events.Items), about)
}
