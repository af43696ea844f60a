package populators

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Kubelet stands in for the kubelets of the fake nodes, for the pods of some namespaces: no
// kubelet runs in the test cluster, and the flows need two things from one.
//
//   - A pod bound to a node (spec.nodeName, by the scheduler or set by its creator) that Run
//     selects is run: Work does the pod's job (writes the data a populator, importer or cloner
//     pod would), then the pod's status is written as the kubelet's status manager writes a
//     finished pod's: phase Succeeded, its container terminated with exit code 0 (reason
//     Completed). A pod Run does not select stays as scheduled.
//   - A pod bound to a node that is being deleted (deletionTimestamp set) is deleted with grace
//     period 0 and its uid as precondition, as the status manager does once the pod's containers
//     have stopped; a graceful deletion would otherwise leave it Terminating for ever.
//
// It writes as the client it is given (the test's admin: the kubelet's node identity and the
// NodeRestriction admission are not part of these flows; pvguard does not judge pods).
type Kubelet struct {
	Client     kubernetes.Interface
	Namespaces []string
	// Run selects the pods to run to completion.
	Run func(*corev1.Pod) bool
	// Work does a selected pod's job before it is marked Succeeded; an error leaves it to the
	// next pass.
	Work func(context.Context, *corev1.Pod) error

	mu   sync.Mutex
	errs []string
}

// Start runs the stand-in until ctx ends.
func (k *Kubelet) Start(ctx context.Context) {
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, ns := range k.Namespaces {
				k.pass(ctx, ns)
			}
		}
	}()
}

// Errors are the failures of its passes so far.
func (k *Kubelet) Errors() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.errs...)
}

func (k *Kubelet) fail(err error) {
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.errs = append(k.errs, err.Error())
}

func (k *Kubelet) pass(ctx context.Context, ns string) {
	pods, err := k.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		if ctx.Err() == nil {
			k.fail(err)
		}
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" {
			continue
		}
		if p.DeletionTimestamp != nil {
			grace := int64(0)
			k.fail(k.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &p.UID}}))
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || k.Run == nil || !k.Run(p) {
			continue
		}
		if k.Work != nil {
			if err := k.Work(ctx, p); err != nil {
				k.fail(fmt.Errorf("running pod %s/%s: %w", p.Namespace, p.Name, err))
				continue
			}
		}
		now := metav1.Now()
		p.Status.Phase = corev1.PodSucceeded
		p.Status.StartTime = &now
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: c.Image,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}},
			})
		}
		_, err := k.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		k.fail(err)
	}
}
