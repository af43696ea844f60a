package webhook

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/pvguard/pvguard/policy"
)

// Registration is one admission endpoint as the apiserver is told to call it: the one
// declaration of its path, the objects and operations sent to it and the conditions that keep
// from it the writes it need not judge. Handlers mounts a handler for each, and the chart's
// webhook configurations are generated from them (charts.WebhooksJSON, `make generate`), each
// registered twice: for people and for the cluster's components (docs/reliability.md).
type Registration struct {
	// Name names the webhooks: <Name>.pvguard.io and <Name>-components.pvguard.io.
	Name string `json:"name"`
	// Path is the URL path the server mounts the handler on.
	Path string `json:"path"`
	// Kind is what the handler judges.
	Kind policy.Kind `json:"kind"`
	// Mutating is a mutating webhook (else validating).
	Mutating bool `json:"mutating,omitempty"`
	// Rules are the resources, subresources and operations the apiserver sends.
	Rules []admissionregistrationv1.RuleWithOperations `json:"rules"`
	// Claims: the objects are namespaced claims, so the chart's claim namespace selector applies
	// (claims in pvguard's own namespace are not sent, so pvguard can always be repaired).
	Claims bool `json:"claims,omitempty"`
	// Volumes: the objects are cluster-scoped volumes, where no namespace selector applies, so
	// the installer's webhook.matchConditions apply instead.
	Volumes bool `json:"volumes,omitempty"`
	// MatchConditions keep from the handler the writes it need not see.
	MatchConditions []admissionregistrationv1.MatchCondition `json:"matchConditions,omitempty"`
}

// Endpoint paths. Docs, the chart and tests depend on these names.
const (
	PathValidatePV  = "/validate/persistentvolumes"
	PathValidatePVC = "/validate/persistentvolumeclaims"
	PathValidateSC  = "/validate/storageclasses"
	PathMutatePV    = "/mutate/persistentvolumes"
	PathMutatePVC   = "/mutate/persistentvolumeclaims"
)

// Registrations are pvguard's admission endpoints, validating first, as the chart registers them.
// The volumes' and claims' validating webhooks are called only for writes that can change what
// the rules of rules judge (policy.WebhookMatchConditions): a status write that changes no status
// field a rule reads and no metadata does not reach pvguard.
func Registrations(rules []policy.Rule) []Registration {
	createUpdate := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	judged := func(k policy.Kind) []admissionregistrationv1.MatchCondition {
		var out []admissionregistrationv1.MatchCondition
		for _, mc := range policy.WebhookMatchConditions(rules, k) {
			out = append(out, admissionregistrationv1.MatchCondition{Name: mc.Name, Expression: mc.Expression})
		}
		return out
	}
	return []Registration{
		{Name: "validate-pv", Path: PathValidatePV, Kind: policy.KindPersistentVolume, Volumes: true,
			Rules:           sendRules(createUpdate, "", "v1", "persistentvolumes", "persistentvolumes/status"),
			MatchConditions: judged(policy.KindPersistentVolume)},
		{Name: "validate-pvc", Path: PathValidatePVC, Kind: policy.KindPersistentVolumeClaim, Claims: true,
			Rules:           sendRules(createUpdate, "", "v1", "persistentvolumeclaims", "persistentvolumeclaims/status"),
			MatchConditions: judged(policy.KindPersistentVolumeClaim)},
		{Name: "validate-sc", Path: PathValidateSC, Kind: policy.KindStorageClass,
			Rules: sendRules(createUpdate, "storage.k8s.io", "v1", "storageclasses")},
		// Fills a claimRef's kind and apiVersion. Only a volume whose claimRef lacks one is sent:
		// every other write of a volume skips a call, and while pvguard is down or hung a write the
		// admission policies refuse is refused by them at once instead of failing here first
		// (mutating admission runs before the policies).
		{Name: "mutate-pv", Path: PathMutatePV, Kind: policy.KindPersistentVolume, Mutating: true, Volumes: true,
			Rules: sendRules(createUpdate, "", "v1", "persistentvolumes"),
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "claimref-incomplete",
				Expression: "has(object.spec.claimRef) && (!has(object.spec.claimRef.kind) || object.spec.claimRef.kind == '' || !has(object.spec.claimRef.apiVersion) || object.spec.claimRef.apiVersion == '')"}}},
		// Aligns the class of a new pre-bound claim (policy mutation.alignPreboundClaimClass): only
		// a claim that names a volume can be aligned, so the others (nearly all: dynamically
		// provisioned ones) pay for one webhook call, not two.
		{Name: "mutate-pvc", Path: PathMutatePVC, Kind: policy.KindPersistentVolumeClaim, Mutating: true, Claims: true,
			Rules: sendRules([]admissionregistrationv1.OperationType{admissionregistrationv1.Create}, "", "v1", "persistentvolumeclaims"),
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "names-a-volume",
				Expression: "has(object.spec.volumeName) && object.spec.volumeName != ''"}}},
	}
}

// sendRules is one RuleWithOperations: ops on the resources of group/version, at any scope.
func sendRules(ops []admissionregistrationv1.OperationType, group, version string, resources ...string) []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: ops,
		Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{version},
			Resources: resources, Scope: ptr(admissionregistrationv1.AllScopes)},
	}}
}
