package devcluster

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/charts"
)

// WebhookOptions say how the apiserver reaches a pvguard served outside the cluster.
type WebhookOptions struct {
	// BaseURL is https://host:port of pvguard's listener.
	BaseURL  string
	CABundle []byte
	// FailurePolicy defaults to Fail, as in production.
	FailurePolicy admissionregistrationv1.FailurePolicyType
	// Values are chart values to render the configurations with (nil: the chart's defaults);
	// FailurePolicy, when set, overrides webhook.failurePolicy in them.
	Values map[string]any
	// NoWait returns once the configurations are created, without waiting for the apiserver to
	// call them: for webhooks pointed at a pvguard that is not answering.
	NoWait bool
}

// InstallWebhooks creates (or replaces) pvguard's webhook configurations exactly as the Helm chart
// renders them (charts.WebhookConfigurations), but pointed at a URL instead of a Service, and
// waits until the apiserver calls them.
func InstallWebhooks(ctx context.Context, cfg *rest.Config, o WebhookOptions) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	values := map[string]any{}
	maps.Copy(values, o.Values)
	if o.FailurePolicy != "" {
		wh := map[string]any{}
		if old, ok := values["webhook"].(map[string]any); ok {
			maps.Copy(wh, old)
		}
		wh["failurePolicy"] = string(o.FailurePolicy)
		values["webhook"] = wh
	}
	v, m, err := charts.WebhookConfigurations(ChartRelease, ChartNamespace, values)
	if err != nil {
		return fmt.Errorf("rendering the chart's webhook configurations: %w", err)
	}
	for i := range v.Webhooks {
		toURL(&v.Webhooks[i].ClientConfig, o.BaseURL, o.CABundle)
	}
	for i := range m.Webhooks {
		toURL(&m.Webhooks[i].ClientConfig, o.BaseURL, o.CABundle)
	}
	for _, obj := range []client.Object{v, m} {
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing old %s: %w", obj.GetName(), err)
		}
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating webhook configuration %s: %w", obj.GetName(), err)
		}
	}
	if o.NoWait {
		return nil
	}
	return WaitForWebhook(ctx, c)
}

// toURL points a webhook rendered for in-cluster use (a Service) at a URL: a test apiserver
// cannot reach a Service.
func toURL(cc *admissionregistrationv1.WebhookClientConfig, base string, caBundle []byte) {
	url := strings.TrimSuffix(base, "/") + *cc.Service.Path
	cc.URL, cc.Service = &url, nil
	if len(caBundle) > 0 {
		cc.CABundle = caBundle
	}
}

// The release the chart is rendered as for the test control plane and `pvguard-dev`.
const (
	ChartRelease   = "pvguard"
	ChartNamespace = "pvguard-system"
)

// WaitForWebhook waits until the apiserver sends volumes and claims to pvguard: until a dry-run
// create of a volume whose claimRef has the wrong kind, which pvguard refuses, is refused by one
// of pvguard's webhooks (not failed for want of an answer, nor let through), and a dry-run create
// of a claim is answered.
func WaitForWebhook(ctx context.Context, c client.Client) error {
	probe := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvguard-probe"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/probe"}},
			// No apiVersion: the volumes' mutating webhook (which completes a claimRef) is called
			// too, so both configurations' caBundles are proven.
			ClaimRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "probe"},
		},
	}
	// The claims' webhooks (mutating and validating) are in the same two configurations, but
	// the apiserver learns of each configuration's caBundle on its own: a dry-run claim must
	// also reach them, not fail for want of a trusted answer. It names a volume, so that the
	// claims' mutating webhook (called only for a claim that names one) is reached too.
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "pvguard-probe"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
			VolumeName:  "pvguard-probe",
		},
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = c.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if last == nil || !strings.Contains(last.Error(), `.pvguard.io" denied the request`) {
			return false, nil
		}
		last = c.Create(ctx, claim.DeepCopy(), client.DryRunAll)
		return last == nil || strings.Contains(last.Error(), `.pvguard.io" denied the request`), nil
	})
	if err != nil {
		return fmt.Errorf("pvguard's webhook never answered (last probe result: %v): %w", last, err)
	}
	return nil
}
