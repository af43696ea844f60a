package devcli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/devcluster"
)

// RunDemo plays the misbindings pvguard exists for against a cluster with pvguard installed,
// printing what a kubectl user would see. It fails if pvguard lets a misbinding through or
// refuses a legitimate write, so running it is also a smoke test.
func RunDemo(ctx context.Context, cfg *rest.Config, out io.Writer) error {
	warns := &devcluster.Warnings{}
	user, err := devcluster.NewClient(cfg, warns, "")
	if err != nil {
		return err
	}
	d := &demo{cfg: cfg, out: out, warns: warns, user: user}
	for _, step := range []func(context.Context) error{
		d.importDisks,
		d.refuseMisbindings,
		d.bindPreboundClaim,
		d.refuseChangesToTheBoundDisk,
		d.failDeletedStaticVolume,
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// demo is the demo's cluster and the story it prints.
type demo struct {
	cfg   *rest.Config
	out   io.Writer
	warns *devcluster.Warnings
	// user writes as the admin, collecting pvguard's warnings into warns.
	user client.Client
}

// step prints the heading of step n.
func (d *demo) step(n int, what string) { fmt.Fprintf(d.out, "%d. %s\n", n, what) }

// refused checks that pvguard refused a write by the rule of that name ("[PVGnnn name] ...").
func (d *demo) refused(err error, rule string) error {
	if err == nil || !strings.Contains(err.Error(), " "+rule+"] ") {
		return fmt.Errorf("expected pvguard to refuse with %s, got: %v", rule, err)
	}
	fmt.Fprintf(d.out, "   refused: %s\n", indent(err.Error()))
	return nil
}

// admitted checks that a write was admitted and prints the warnings it got.
func (d *demo) admitted(err error) error {
	if err != nil {
		return err
	}
	fmt.Fprintln(d.out, "   admitted")
	for _, w := range d.warns.Take() {
		fmt.Fprintf(d.out, "   warning: %s\n", w)
	}
	return nil
}

// importDisks creates the tenants' namespaces and the two disks (step 1).
func (d *demo) importDisks(ctx context.Context) error {
	d.step(1, "An admin imports two 10Gi disks: pv-disk-fs (Filesystem) and pv-disk-block (Block), Retain.")
	for _, ns := range []string{"team-a", "team-b"} {
		if err := d.user.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	if err := d.admitted(d.user.Create(ctx, demoPV("pv-disk-fs", corev1.PersistentVolumeFilesystem))); err != nil {
		return err
	}
	return d.admitted(d.user.Create(ctx, demoPV("pv-disk-block", corev1.PersistentVolumeBlock)))
}

// refuseMisbindings shows claims that would misbind refused (steps 2 and 3).
func (d *demo) refuseMisbindings(ctx context.Context) error {
	d.step(2, "team-a asks for a Block claim pre-bound to the Filesystem disk (would fail only at mount time):")
	if err := d.refused(d.user.Create(ctx, demoPVC("team-a", "db", corev1.PersistentVolumeBlock, "pv-disk-fs")), "volume-mode-match"); err != nil {
		return err
	}
	d.step(3, "team-b names the Block disk it was never given in spec.volumeName:")
	return d.refused(d.user.Create(ctx, demoPVC("team-b", "grab", corev1.PersistentVolumeBlock, "pv-disk-block")), "volume-grab")
}

// bindPreboundClaim pre-binds the Block disk to team-a/db, creates the claim and waits for
// pvguard's binder to bind them (steps 4 and 5).
func (d *demo) bindPreboundClaim(ctx context.Context) error {
	d.step(4, "The admin pre-binds the Block disk to team-a/db, and team-a creates the right claim:")
	if err := d.admitted(devcluster.PatchPV(ctx, d.user, "pv-disk-block", func(pv *corev1.PersistentVolume) {
		pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "team-a", Name: "db"}
	})); err != nil {
		return err
	}
	if err := d.admitted(d.user.Create(ctx, demoPVC("team-a", "db", corev1.PersistentVolumeBlock, "pv-disk-block"))); err != nil {
		return err
	}

	d.step(5, "pvguard's binder binds them (the four upstream writes, each judged by policy first):")
	pv := &corev1.PersistentVolume{}
	pvc := &corev1.PersistentVolumeClaim{}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := d.user.Get(ctx, client.ObjectKey{Name: "pv-disk-block"}, pv); err != nil {
			return false, err
		}
		if err := d.user.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "db"}, pvc); err != nil {
			return false, err
		}
		return pv.Status.Phase == corev1.VolumeBound && pvc.Status.Phase == corev1.ClaimBound, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the binder to bind team-a/db: %w", err)
	}
	fmt.Fprintf(d.out, "   PersistentVolume pv-disk-block is %s to %s/%s; PersistentVolumeClaim team-a/db is %s to %s\n",
		pv.Status.Phase, pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name, pvc.Status.Phase, pvc.Spec.VolumeName)
	return nil
}

// refuseChangesToTheBoundDisk shows a reclaim downgrade and a second claim on the bound disk
// refused (steps 6 and 7).
func (d *demo) refuseChangesToTheBoundDisk(ctx context.Context) error {
	d.step(6, "Someone flips the bound Retain disk to Delete:")
	if err := d.refused(devcluster.PatchPV(ctx, d.user, "pv-disk-block", func(pv *corev1.PersistentVolume) {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	}), "reclaim-downgrade"); err != nil {
		return err
	}
	d.step(7, "A second claim names the bound disk:")
	return d.refused(d.user.Create(ctx, demoPVC("team-a", "db-copy", corev1.PersistentVolumeBlock, "pv-disk-block")), "no-double-binding")
}

// failDeletedStaticVolume deletes the claim on a static Delete disk and waits for the binder to
// release the disk and mark it Failed (step 8).
func (d *demo) failDeletedStaticVolume(ctx context.Context) error {
	d.step(8, "team-a deletes a claim on a static disk whose reclaim policy is Delete; nothing can delete that storage:")
	scratch := demoPV("pv-scratch", corev1.PersistentVolumeFilesystem)
	scratch.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	scratch.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "team-a", Name: "scratch"}
	if err := d.user.Create(ctx, scratch); err != nil {
		return fmt.Errorf("creating pv-scratch: %w", err)
	}
	claim := demoPVC("team-a", "scratch", corev1.PersistentVolumeFilesystem, "")
	if err := d.user.Create(ctx, claim); err != nil {
		return fmt.Errorf("creating team-a/scratch: %w", err)
	}
	if err := waitPhase(ctx, d.user, "pv-scratch", corev1.VolumeBound); err != nil {
		return err
	}
	if err := d.user.Delete(ctx, claim); err != nil {
		return fmt.Errorf("deleting team-a/scratch: %w", err)
	}
	if err := d.releaseDeletedClaim(ctx, "team-a", "scratch"); err != nil {
		return err
	}
	if err := waitPhase(ctx, d.user, "pv-scratch", corev1.VolumeFailed); err != nil {
		return err
	}
	fmt.Fprintln(d.out, "   the binder released pv-scratch after a live read confirmed the claim gone, then marked it Failed (VolumeFailedDelete)")
	return nil
}

// releaseDeletedClaim removes the finalizers of a deleted claim as the pvc-protection
// controller does.
func (d *demo) releaseDeletedClaim(ctx context.Context, namespace, name string) error {
	// No kube-controller-manager runs here: act as its pvc-protection controller, which lets a
	// deleted claim go once no pod uses it.
	protector, err := devcluster.NewClient(d.cfg, nil, "system:serviceaccount:kube-system:pvc-protection-controller", "system:serviceaccounts", "system:authenticated")
	if err != nil {
		return err
	}
	deleted := &corev1.PersistentVolumeClaim{}
	if err := protector.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, deleted); err != nil {
		return fmt.Errorf("reading %s/%s: %w", namespace, name, err)
	}
	deleted.Finalizers = nil // it updates, as the real controller does (its role has no patch)
	if err := protector.Update(ctx, deleted); err != nil {
		return fmt.Errorf("releasing %s/%s: %w", namespace, name, err)
	}
	return nil
}

func waitPhase(ctx context.Context, c client.Client, name string, phase corev1.PersistentVolumePhase) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pv := &corev1.PersistentVolume{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, pv); err != nil {
			return false, err
		}
		return pv.Status.Phase == phase, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s to be %s: %w", name, phase, err)
	}
	return nil
}

func demoPV(name string, mode corev1.PersistentVolumeMode) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			VolumeMode:                    &mode,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				Local: &corev1.LocalVolumeSource{Path: "/mnt/disks/" + name},
			},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1"}}},
			}}}},
		},
	}
}

func demoPVC(ns, name string, mode corev1.PersistentVolumeMode, volume string) *corev1.PersistentVolumeClaim {
	noClass := ""
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &noClass,
			VolumeMode:       &mode,
			VolumeName:       volume,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("10Gi"),
			}},
		},
	}
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n            ") }
