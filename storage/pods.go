package storage

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pods as the rules read them: which claims a pod uses, and whether it holds a node.

// PodClaims lists the claims a pod uses: those its volumes name (persistentVolumeClaim), and
// those of its generic ephemeral volumes, which upstream names <pod>-<volume>.
func PodClaims(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName != "":
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			out = append(out, p.Name+"-"+v.Name)
		}
	}
	return out
}

// PodUsesClaim reports whether the pod uses the claim of that name (of its own namespace).
func PodUsesClaim(p *corev1.Pod, claim string) bool {
	for _, c := range PodClaims(p) {
		if c == claim {
			return true
		}
	}
	return false
}

// PodNode is the node a pod holds its volumes on: the node it is scheduled to (spec.nodeName,
// which a running pod always has), unless it has finished (Succeeded or Failed), when its
// volumes are unmounted and it holds none. "" for a pod not scheduled yet.
func PodNode(p *corev1.Pod) string {
	switch p.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return ""
	}
	return p.Spec.NodeName
}

// StripPod is what the rules read of a pod (PodClaims, PodNode), for a cache or a list to keep:
// its name, namespace, uid, resourceVersion and deletion timestamp, spec.nodeName, its volumes
// that name a claim (a generic ephemeral one without its template) and status.phase. Pods are
// the most numerous and largest objects of a cluster; the rest of them is not kept.
func StripPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out.Spec.Volumes = append(out.Spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.PersistentVolumeClaim.ClaimName},
			}})
		case v.Ephemeral != nil:
			out.Spec.Volumes = append(out.Spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				Ephemeral: &corev1.EphemeralVolumeSource{},
			}})
		}
	}
	return out
}
