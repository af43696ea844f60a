package webhook

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigurationOptions describe where the apiserver reaches pvguard.
type ConfigurationOptions struct {
	// Name prefixes the configuration objects and names the webhooks (default "pvguard").
	Name string
	// Namespace and Service locate pvguard's Service; Port is its port (default 443).
	Namespace, Service string
	Port               int32
	// FailurePolicy is Fail by default: with pvguard down, storage writes wait rather than
	// slip through unchecked.
	FailurePolicy  admissionregistrationv1.FailurePolicyType
	TimeoutSeconds int32
	CABundle       []byte
}

func (o *ConfigurationOptions) applyDefaults() {
	if o.Name == "" {
		o.Name = "pvguard"
	}
	if o.Namespace == "" {
		o.Namespace = "pvguard-system"
	}
	if o.Service == "" {
		o.Service = "pvguard"
	}
	if o.Port == 0 {
		o.Port = 443
	}
	if o.FailurePolicy == "" {
		o.FailurePolicy = admissionregistrationv1.Fail
	}
	if o.TimeoutSeconds == 0 {
		o.TimeoutSeconds = 5
	}
}

// Configurations returns pvguard's validating and mutating webhook configurations.
//
// Status subresources are included because the binder's second and fourth writes (PV and PVC
// status) are where phase consistency is decided. Claims in pvguard's own namespace are not sent,
// so pvguard can always be repaired; volumes are cluster-scoped, where namespaceSelector does not
// apply, and are exempted in the policy config instead.
func Configurations(o ConfigurationOptions) (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration) {
	o.applyDefaults()
	createUpdate := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	rule := func(group string, resources ...string) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: createUpdate,
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: resources,
				Scope: ptr(admissionregistrationv1.AllScopes),
			},
		}}
	}
	client := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{
			Service:  &admissionregistrationv1.ServiceReference{Namespace: o.Namespace, Name: o.Service, Path: ptr(path), Port: ptr(o.Port)},
			CABundle: o.CABundle,
		}
	}
	notOwnNamespace := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{o.Namespace},
	}}}
	none := ptr(admissionregistrationv1.SideEffectClassNone)
	equivalent := ptr(admissionregistrationv1.Equivalent)
	validating := func(name, path string, rules []admissionregistrationv1.RuleWithOperations, nsSel *metav1.LabelSelector) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name: name + "." + o.Name + ".io", ClientConfig: client(path), Rules: rules,
			FailurePolicy: ptr(o.FailurePolicy), MatchPolicy: equivalent, NamespaceSelector: nsSel,
			SideEffects: none, TimeoutSeconds: ptr(o.TimeoutSeconds), AdmissionReviewVersions: []string{"v1"},
		}
	}
	mutating := func(name, path string, rules []admissionregistrationv1.RuleWithOperations, nsSel *metav1.LabelSelector) admissionregistrationv1.MutatingWebhook {
		return admissionregistrationv1.MutatingWebhook{
			Name: name + "." + o.Name + ".io", ClientConfig: client(path), Rules: rules,
			FailurePolicy: ptr(o.FailurePolicy), MatchPolicy: equivalent, NamespaceSelector: nsSel,
			SideEffects: none, TimeoutSeconds: ptr(o.TimeoutSeconds), AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy: ptr(admissionregistrationv1.NeverReinvocationPolicy),
		}
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			validating("validate-pv", PathValidatePV, rule("", "persistentvolumes", "persistentvolumes/status"), nil),
			validating("validate-pvc", PathValidatePVC, rule("", "persistentvolumeclaims", "persistentvolumeclaims/status"), notOwnNamespace),
			validating("validate-sc", PathValidateSC, rule("storage.k8s.io", "storageclasses"), nil),
		},
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			mutating("mutate-pv", PathMutatePV, rule("", "persistentvolumes"), nil),
			mutating("mutate-pvc", PathMutatePVC, []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       rule("", "persistentvolumeclaims")[0].Rule,
			}}, notOwnNamespace),
		},
	}
	return v, m
}
