package clusterview

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/cachelist"
)

// SetupDoubledIndexes files the view's indexes into c's informers as controller-runtime's
// IndexField does (each value of a namespaced object under "namespace/value" and under
// "__all_namespaces/value"), for BenchmarkIndexMemory's comparison.
func SetupDoubledIndexes(c cache.Informers) error {
	for _, ix := range []struct {
		kind client.Object
		idx  cachelist.Index
	}{
		{&corev1.PersistentVolumeClaim{}, claimsByVolumeName},
		{&corev1.PersistentVolume{}, volumesByClaimRef},
		{&corev1.PersistentVolumeClaim{}, claimsWaitingByUID},
		{&corev1.Pod{}, podsByClaim},
	} {
		inf, err := c.GetInformer(context.Background(), ix.kind)
		if err != nil {
			return err
		}
		values := ix.idx.Values
		if err := inf.AddIndexers(toolscache.Indexers{"field:" + ix.idx.Name: func(o any) ([]string, error) {
			obj := o.(client.Object)
			var out []string
			for _, v := range values(obj) {
				if ns := obj.GetNamespace(); ns != "" {
					out = append(out, ns+"/"+v, "__all_namespaces/"+v)
				} else {
					out = append(out, "/"+v)
				}
			}
			return out, nil
		}}); err != nil {
			return err
		}
	}
	return nil
}
