package e2ecluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/test/cluster"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/populators"
)

// TestCDIImportAndCrossNamespaceClone runs KubeVirt CDI's hand-offs (test/populators.CDI, as
// cdi/cdi-sa with the cdi-controller's RBAC) beside pvguard:
//
//   - import: a claim of a WaitForFirstConsumer class, used by a pod, whose dataSourceRef is a
//     VolumeImportSource. CDI makes prime-<uid> in the claim's namespace (selected-node copied
//     from the target), the real external-provisioner provisions it, the importer pod (the
//     kubelet stand-in writes the image) runs on the selected node, and CDI Rebinds the volume
//     to the target with a full Update of the volume;
//   - a host-assisted clone across namespaces: a claim of an Immediate class whose
//     dataSourceRef is a VolumeCloneSource in the source namespace (as CDI's DataVolume
//     controller makes it). CDI makes tmp-pvc-<uid> in the source namespace (the target's
//     labels and annotations copied), the clone pods copy the source's data (the kubelet
//     stand-in), and CDI Rebinds the tmp-pvc's volume to the target.
//
// Each target ends Bound to the volume holding its data; the prime claim and the tmp-pvc are
// gone, nothing is left Terminating, nothing leaks, and no component, CDI included, is warned or
// refused.
func TestCDIImportAndCrossNamespaceClone(t *testing.T) {
	installHandOffCRDs(t)
	forEachMode(t, func(t *testing.T, m cluster.Mode) *endState {
		before := readCounters(t)
		f := newCSIFlow(t, "cdi", m)
		ns := f.ns
		srcNS := extraNamespace(t, "cdi-source-"+string(m))
		wffc, imm := "cdi-wffc-"+string(m), "cdi-imm-"+string(m)
		csiClass(t, wffc, storagev1.VolumeBindingWaitForFirstConsumer)
		csiClass(t, imm, storagev1.VolumeBindingImmediate)
		const file = "disk.img"
		url := "http://images.example.com/fedora.img"

		// The clone's source: a claim of the source namespace holding data.
		golden := claim(srcNS, "golden", imm, "10Mi")
		create(t, golden)
		harness.WaitFor(t, time.Minute, "source claim golden Bound", func(ctx context.Context) (bool, error) {
			return allBoundAndScheduled(ctx, srcNS)
		})
		if err := writeData(context.Background(), srcNS, "golden", file, "golden image"); err != nil {
			t.Fatal(err)
		}

		ctx := standInContext(t)
		cdi, err := populators.StartCDI(ctx, cl.Admin, cl.LogDir)
		if err != nil {
			t.Fatal(err)
		}
		startKubelet(t, &populators.Kubelet{
			Namespaces: []string{ns, srcNS},
			Run:        func(p *corev1.Pod) bool { return p.Labels["app"] == "containerized-data-importer" },
			Work: func(ctx context.Context, p *corev1.Pod) error {
				switch {
				case strings.HasPrefix(p.Name, "importer-"):
					return writeData(ctx, p.Namespace, podClaim(p), file, "imported from "+url)
				case strings.HasPrefix(p.Name, "cdi-upload-"):
					dir, err := volumeDir(ctx, srcNS, "golden")
					if err != nil {
						return err
					}
					data, err := os.ReadFile(filepath.Join(dir, file))
					if err != nil {
						return err
					}
					return writeData(ctx, p.Namespace, podClaim(p), file, string(data))
				}
				return nil
			},
		})

		createCR(t, populators.VolumeImportSources, populators.VolumeImportSourceKind, ns, "fedora", map[string]any{
			"source": map[string]any{"http": map[string]any{"url": url}}, "contentType": "kubevirt"})
		createCR(t, populators.VolumeCloneSources, populators.VolumeCloneSourceKind, srcNS, "golden-clone", map[string]any{
			"source": map[string]any{"kind": "PersistentVolumeClaim", "name": "golden"}})
		disk := claim(ns, "disk", wffc, "10Mi")
		disk.Spec.DataSourceRef = dataSourceRef("cdi.kubevirt.io", populators.VolumeImportSourceKind, "fedora")
		cp := claim(ns, "copy", imm, "10Mi")
		cp.Annotations = map[string]string{populators.AnnDataSourceNamespace: srcNS}
		cp.Spec.DataSourceRef = dataSourceRef("cdi.kubevirt.io", populators.VolumeCloneSourceKind, "golden-clone")
		createClaims(t, disk, cp)
		create(t, pod(ns, "vm", "disk"))

		harness.WaitFor(t, 2*time.Minute, "both targets Bound, the pod scheduled, CDI's claims and pods gone", func(ctx context.Context) (bool, error) {
			binderRefused(t, ns, srcNS)
			refusedStandIn(t, "CDI", cdi.Conn)
			if ok, err := allBoundAndScheduled(ctx, ns); !ok {
				return false, err
			}
			d, c := &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolumeClaim{}
			if err := cl.Client.Get(ctx, client.ObjectKeyFromObject(disk), d); err != nil {
				return false, err
			}
			if err := cl.Client.Get(ctx, client.ObjectKeyFromObject(cp), c); err != nil {
				return false, err
			}
			if ok, err := claimsGone(ctx, client.ObjectKey{Namespace: ns, Name: "prime-" + string(d.UID)},
				client.ObjectKey{Namespace: srcNS, Name: "tmp-pvc-" + string(c.UID)}); !ok {
				return false, err
			}
			for _, n := range []string{ns, srcNS} {
				for _, p := range podsIn(t, n) {
					if p.Labels["app"] == "containerized-data-importer" {
						return false, fmt.Errorf("CDI's pod %s/%s still exists", n, p.Name)
					}
				}
			}
			return true, nil
		})

		s := newEndState()
		var provisioned []string
		for _, c := range []struct{ name, want, what string }{{"disk", "imported from " + url, "imported"}, {"copy", "golden image", "cloned across namespaces"}} {
			pvc := harness.GetPVC(t, cl.Client, ns, c.name)
			pv := expectBoundPair(t, pvc)
			if pv == nil {
				continue
			}
			provisioned = append(provisioned, pv.Name)
			if pv.Name == "pvc-"+string(pvc.UID) {
				t.Errorf("claim %s bound to a volume provisioned for it, want the one CDI handed over", c.name)
			}
			if checkData(t, ns, c.name, file, c.want) {
				s.add("target Bound to the volume CDI "+c.what, 1)
			}
			shape(s, pvc, pv)
		}
		f.volumes = append(f.volumes, provisioned...)
		p, pvc := getPod(t, ns, "vm"), harness.GetPVC(t, cl.Client, ns, "disk")
		if pv := harness.GetPV(t, cl.Client, pvc.Spec.VolumeName); volumeNode(pv) != p.Spec.NodeName {
			t.Errorf("imported volume on %q, its pod on %q", volumeNode(pv), p.Spec.NodeName)
		}
		settleUnused(t, s, ns)
		s.reasons = kindReasons(t, ns, f.volumes)

		// The source namespace's claim and volume go too.
		goldenPV := harness.GetPVC(t, cl.Client, srcNS, "golden").Spec.VolumeName
		f.volumes = append(f.volumes, goldenPV)
		if err := cl.Client.Delete(context.Background(), golden); err != nil {
			t.Fatal(err)
		}
		f.deleteAll(append(provisioned, goldenPV))
		checkStandIn(t, "CDI", cdi.Conn)
		checkAdmission(t, before, readCounters(t))
		return s
	})
}
