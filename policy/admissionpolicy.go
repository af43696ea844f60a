package policy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AdmissionPolicyOptions shape the objects AdmissionPolicies makes.
type AdmissionPolicyOptions struct {
	// Prefix starts every name (default "pvguard").
	Prefix string
	// Static names them for the apiserver's manifest-based admission config, whose objects'
	// names must end with ".static.k8s.io" (they are loaded from files at start, and the API
	// cannot change or delete them).
	Static bool
	// Labels are set on every object.
	Labels map[string]string
	// Params, when set, makes the policies read the config's actions, exemptions, controllers
	// and reclaim confirmation annotation from this ConfigMap (its data is
	// AdmissionPolicyParams of the config), which pvguard's leader keeps equal to the config it
	// has loaded: a reload changes what the policies enforce without new policies. There is then
	// a policy for every CEL form, whatever the config's actions (a rule not at deny in the
	// parameters is skipped by its matchConditions), and the config passed in is not read.
	// Without Params the config is written into the policies as literals (the manifest-based
	// admission config, whose policies cannot read API objects, needs that).
	Params *ParamObject
}

// ParamObject names the ConfigMap the policies read their parameters from.
type ParamObject struct {
	Namespace, Name string
}

// AdmissionPolicy is one rule's CEL form as the apiserver enforces it.
type AdmissionPolicy struct {
	Rule RuleID
	// Form is the rule's CEL form the policy enforces.
	Form    CELForm
	Policy  *admissionregistrationv1.ValidatingAdmissionPolicy
	Binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
}

// AdmissionPolicies are the ValidatingAdmissionPolicies and their bindings that enforce, in the
// apiserver itself, the CEL forms of the rules the config has at deny, with the config's
// exemptions and controllers: the guards that hold while pvguard is down. A rule at warn, audit
// or off has none (pvguard reports what it finds when it is back). With pvguard up, a write such
// a policy refuses is refused before the webhook is called, with one message that names the rule.
func AdmissionPolicies(c *Config, o AdmissionPolicyOptions) []AdmissionPolicy {
	if c == nil {
		c = DefaultConfig()
	}
	if o.Prefix == "" {
		o.Prefix = "pvguard"
	}
	var out []AdmissionPolicy
	for _, rl := range Catalogue() {
		if len(rl.CEL) == 0 || o.Params == nil && c.ActionFor(&rl) != ActionDeny {
			continue
		}
		for _, form := range rl.CEL {
			name := fmt.Sprintf("%s-%s-%s", o.Prefix, strings.ToLower(string(rl.ID)), rl.Name)
			if len(rl.CEL) > 1 {
				name += "-" + map[Kind]string{KindPersistentVolume: "pv", KindPersistentVolumeClaim: "pvc"}[form.Kind]
			}
			if o.Static {
				name += ".static.k8s.io"
			}
			out = append(out, admissionPolicy(c, &rl, form, name, o))
		}
	}
	return out
}

func admissionPolicy(c *Config, rl *Rule, form CELForm, name string, o AdmissionPolicyOptions) AdmissionPolicy {
	labels := o.Labels
	resource := map[Kind]string{KindPersistentVolume: "persistentvolumes", KindPersistentVolumeClaim: "persistentvolumeclaims"}[form.Kind]
	resources := []string{resource}
	if form.Status {
		resources = append(resources, resource+"/status")
	}
	var ops []admissionregistrationv1.OperationType
	for _, op := range form.Operations {
		ops = append(ops, admissionregistrationv1.OperationType(op))
	}
	fail := admissionregistrationv1.Fail
	forbidden := metav1.StatusReasonForbidden
	meta := metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{
		"pvguard.io/rule": string(rl.ID) + " " + rl.Name,
	}}
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: meta,
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			// An expression that cannot be evaluated refuses the write: the expressions test every
			// field they read, so an error means a broken policy, not an unusual object.
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: ops,
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: resources},
					},
				}},
			},
			MatchConditions: exemptionConditions(c, rl, form),
			Variables: []admissionregistrationv1.Variable{
				{Name: "confirmKey", Expression: celQuote(c.reclaimConfirmAnnotation())},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression:        "!(" + form.Refuses + ")",
				MessageExpression: form.Message,
				Reason:            &forbidden,
			}},
		},
	}
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	if o.Params != nil {
		p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
		p.Spec.MatchConditions = paramConditions(rl, form)
		p.Spec.Variables = []admissionregistrationv1.Variable{{Name: "confirmKey", Expression: paramConfirmKey}}
		// A missing parameter object skips the policies rather than refusing every matched
		// write: with Deny the apiserver would refuse the controllers' writes of every volume and
		// claim too (a missing parameter is a configuration error, which failurePolicy Fail turns
		// into a refusal before any matchCondition runs), and whoever can delete the object would
		// stop the cluster's storage. pvguard's leader re-creates it, and reports it missing
		// (pvguard_admission_policy_params_in_sync) until it exists again (docs/reliability.md).
		allow := admissionregistrationv1.AllowAction
		b.Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: o.Params.Name, Namespace: o.Params.Namespace, ParameterNotFoundAction: &allow}
	}
	return AdmissionPolicy{Rule: rl.ID, Form: form, Policy: p, Binding: b}
}

// exemptionConditions are the policy's matchConditions: a write goes to the validations only
// when the config exempts neither its requester nor its namespaces from the rule (Config.Exempt),
// and, for a form that leaves them to the Go form, when the requester is not a controller
// (Config.IsController).
func exemptionConditions(c *Config, rl *Rule, form CELForm) []admissionregistrationv1.MatchCondition {
	ids := []Identities{c.Exemptions.Identities}
	nsLists := [][]string{c.Exemptions.Namespaces}
	if rc, ok := c.ruleConfig(rl); ok {
		ids = append(ids, rc.Exemptions.Identities)
		nsLists = append(nsLists, rc.Exemptions.Namespaces)
	}
	if form.ExemptControllers {
		ids = append(ids, builtinControllers, c.Controllers)
	}
	var users, groups []string
	for _, id := range ids {
		users = append(users, identityUsernames(id)...)
		groups = append(groups, id.Groups...)
	}
	var out []admissionregistrationv1.MatchCondition
	if users = sortedUnique(users); len(users) > 0 {
		out = append(out, admissionregistrationv1.MatchCondition{Name: "not-an-exempt-user", Expression: usersCondition(celList(users))})
	}
	if groups = sortedUnique(groups); len(groups) > 0 {
		out = append(out, admissionregistrationv1.MatchCondition{Name: "not-an-exempt-group", Expression: groupsCondition(celList(groups))})
	}
	for i, list := range nsLists {
		if len(list) == 0 {
			continue
		}
		var res []string
		for _, pattern := range list {
			res = append(res, globRegexp(pattern))
		}
		out = append(out, admissionregistrationv1.MatchCondition{
			Name:       fmt.Sprintf("not-in-exempt-namespaces-%d", i),
			Expression: "!(" + namespacesExempt(form.Kind, celList(res)) + ")",
		})
	}
	return out
}

// The matchConditions' expressions, over a CEL list literal of names or patterns.
func usersCondition(list string) string { return "!(request.userInfo.username in " + list + ")" }
func groupsCondition(list string) string {
	return "!(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in " + list + "))"
}

// AdmissionPolicyForm is what the chart renders a rule's policy from
// (charts/pvguard/files/admission-policies.json, written by `make generate`):
// the policy as AdmissionPolicies makes it to read the parameter object, which is the same for
// every config (the chart renders the parameter object from the values' policy, and the binding
// that names it).
type AdmissionPolicyForm struct {
	Rule     RuleID `json:"rule"`
	RuleName string `json:"ruleName"`
	Default  Action `json:"default"`
	// Suffix ends the policy's name (after the release's name).
	Suffix string                                                `json:"suffix"`
	Spec   admissionregistrationv1.ValidatingAdmissionPolicySpec `json:"spec"`
}

// AdmissionPolicyForms lists the forms of every rule that has a CEL form.
func AdmissionPolicyForms() []AdmissionPolicyForm {
	var out []AdmissionPolicyForm
	for _, ap := range AdmissionPolicies(nil, AdmissionPolicyOptions{Prefix: "x", Params: &ParamObject{}}) {
		rl, _ := LookupRule(string(ap.Rule))
		out = append(out, AdmissionPolicyForm{
			Rule: rl.ID, RuleName: rl.Name, Default: rl.Default, Suffix: strings.TrimPrefix(ap.Policy.Name, "x-"), Spec: ap.Policy.Spec,
		})
	}
	return out
}

// identityUsernames are the usernames of the identities' users and service accounts.
func identityUsernames(ids Identities) []string {
	out := slices.Clone(ids.Users)
	for _, sa := range ids.ServiceAccounts {
		ns, n, _ := strings.Cut(sa, "/")
		out = append(out, "system:serviceaccount:"+ns+":"+n)
	}
	return sortedUnique(out)
}

// namespacesExempt is Exemptions.match's namespace test: a claim's namespace, or for a volume the
// namespaces its old and new claimRef name, every one of them matching one of the patterns.
func namespacesExempt(k Kind, patterns string) string {
	matches := func(ns string) string { return fmt.Sprintf("%s.exists(p, %s.matches(p))", patterns, ns) }
	if k == KindPersistentVolumeClaim {
		return matches("object.metadata.namespace")
	}
	cur, old := celRefField("object", "namespace"), "(oldObject != null ? "+celRefField("oldObject", "namespace")+" : '')"
	return fmt.Sprintf("(%[1]s != '' || %[2]s != '') && (%[1]s == '' || %[3]s) && (%[2]s == '' || %[4]s)", cur, old, matches(cur), matches(old))
}

// globRegexp turns a path.Match pattern (namespaces have no '/') into an anchored RE2 pattern.
func globRegexp(glob string) string {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(glob); i++ {
		switch ch := glob[i]; ch {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '\\':
			if i+1 < len(glob) {
				i++
				b.WriteString(regexp.QuoteMeta(glob[i : i+1]))
			}
		case '[':
			end := strings.IndexByte(glob[i+1:], ']')
			if end < 0 {
				b.WriteString(regexp.QuoteMeta(glob[i:]))
				i = len(glob)
				continue
			}
			class := glob[i+1 : i+1+end]
			if strings.HasPrefix(class, "^") {
				class = "^" + strings.ReplaceAll(class[1:], `\`, `\\`)
			}
			b.WriteString("[" + class + "]")
			i += end + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(ch)))
		}
	}
	b.WriteString("$")
	return b.String()
}

// celList is a CEL list literal of strings (a JSON array of strings is one).
func celList(xs []string) string {
	out, _ := json.Marshal(xs)
	return string(out)
}

func sortedUnique(xs []string) []string {
	slices.Sort(xs)
	return slices.Compact(xs)
}
