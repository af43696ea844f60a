package explain

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/storage"
)

// ReadInput reads what an explanation reads: from cluster, the cluster state (clusterstate.Read:
// every claim, volume and class and the nodes' names and labels, an informer cache's own
// objects); from namespaced, when it is set and
// namespace is not "", the pods and events of that namespace (which let a claim waiting for its
// first consumer quote the scheduler). `pvguard explain` passes its live client as both; the
// server passes its informer cache as cluster and no namespaced reader: it caches no events, and
// pods only stripped to what PVG009 reads (docs/explain.md). kinds are the kinds beyond the
// typed reads that the policy judging the pairs reads (policy.Engine.Reads).
func ReadInput(ctx context.Context, cluster, namespaced client.Reader, namespace string, kinds ...clusterstate.Kind) (Input, error) {
	state, err := clusterstate.Read(ctx, cluster, kinds...)
	if err != nil {
		return Input{}, err
	}
	in := Input{State: state, NodesListed: true}
	if namespaced == nil || namespace == "" {
		return in, nil
	}
	var pods corev1.PodList
	var events corev1.EventList
	for _, l := range []client.ObjectList{&pods, &events} {
		if err := namespaced.List(ctx, l, client.InNamespace(namespace)); err != nil {
			return Input{}, fmt.Errorf("listing %T in namespace %s: %w", l, namespace, err)
		}
	}
	for i := range pods.Items {
		in.Pods = append(in.Pods, &pods.Items[i])
	}
	// The rules judging the claim's pairs (Input.Policy, against the State) see where its pods are.
	in.State = state.WithPods(in.Pods)
	for i := range events.Items {
		in.Events = append(in.Events, &events.Items[i])
	}
	return in, nil
}

// ReadProvisionerLeases adds to in the Leases that the provisioner of the claim
// namespace/name's class holds if it runs with leader election (ProvisionerLeaseName), from
// every namespace, so that the explanation of a claim waiting for it says whether it appears to
// run. It reads nothing for a claim or class that is not in the input, or a class with no
// external provisioner. A reader that may not list Leases is no error: the explanation then
// says nothing about the provisioner.
func ReadProvisionerLeases(ctx context.Context, r client.Reader, in *Input, namespace, name string) error {
	class := ""
	if c, _ := in.state().PersistentVolumeClaim(namespace, name); c != nil {
		class = storage.ClaimClass(c)
	}
	provisioner := ""
	for _, sc := range in.state().Classes() {
		if class != "" && sc.Name == class {
			provisioner = sc.Provisioner
		}
	}
	if provisioner == "" || provisioner == "kubernetes.io/no-provisioner" { // local volumes: no provisioner runs
		return nil
	}
	lease := ProvisionerLeaseName(provisioner)
	var leases coordinationv1.LeaseList
	// One request, filtered by the API server: listing every Lease would fetch a node heartbeat
	// per node as well.
	err := r.List(ctx, &leases, client.MatchingFields{"metadata.name": lease})
	switch {
	case apierrors.IsForbidden(err):
		return nil
	case err != nil:
		return fmt.Errorf("listing Leases named %s (provisioner %s): %w", lease, provisioner, err)
	}
	in.Leases, in.LeasesRead = nil, true
	for i := range leases.Items {
		in.Leases = append(in.Leases, &leases.Items[i])
	}
	return nil
}
