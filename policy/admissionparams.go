package policy

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// The parameter object of the admission policies (AdmissionPolicyOptions.Params) is a ConfigMap
// whose data is AdmissionPolicyParams of the config: what the config says about the rules that
// have a CEL form, as strings, since a ConfigMap holds nothing else and CEL parses no YAML.
// A list is its items one per line ("" for none); namespace patterns are given as the anchored
// regular expressions the policies match with. Keys:
//
//	reclaimConfirmAnnotation            the annotation that confirms a reclaim policy downgrade
//	exemptions.users, .groups           the usernames (service accounts as system:serviceaccount:
//	                                    ns:name) and groups every rule exempts
//	exemptions.namespaces               the namespaces every rule exempts
//	controllers.users, .groups          the configured controllers (the built-in ones are in the
//	                                    policies themselves: no parameter can drop them)
//	<rule>.action                       the rule's action; its policies refuse only at deny
//	<rule>.exemptions.users, .groups, .namespaces   the rule's own exemptions
//
// A key that is missing reads as an empty list, or for an action as the rule's default, so that
// an object edited by hand fails towards the rules, not away from them.
const (
	paramConfirmAnnotation = "reclaimConfirmAnnotation"
	paramUsers             = "exemptions.users"
	paramGroups            = "exemptions.groups"
	paramNamespaces        = "exemptions.namespaces"
	paramControllerUsers   = "controllers.users"
	paramControllerGroups  = "controllers.groups"
)

// ruleParam is the key of one of a rule's parameters.
func ruleParam(id RuleID, what string) string { return string(id) + "." + what }

// AdmissionPolicyParams is the data of the admission policies' parameter object for the config
// (nil: the defaults).
func AdmissionPolicyParams(c *Config) map[string]string {
	if c == nil {
		c = DefaultConfig()
	}
	out := map[string]string{
		paramConfirmAnnotation: c.reclaimConfirmAnnotation(),
		paramUsers:             paramList(identityUsernames(c.Exemptions.Identities)),
		paramGroups:            paramList(sortedUnique(c.Exemptions.Groups)),
		paramNamespaces:        paramList(namespacePatterns(c.Exemptions.Namespaces)),
		paramControllerUsers:   paramList(identityUsernames(c.Controllers)),
		paramControllerGroups:  paramList(sortedUnique(c.Controllers.Groups)),
	}
	for _, rl := range Catalogue() {
		if len(rl.CEL) == 0 {
			continue
		}
		rc, _ := c.ruleConfig(&rl)
		out[ruleParam(rl.ID, "action")] = string(c.ActionFor(&rl))
		out[ruleParam(rl.ID, paramUsers)] = paramList(identityUsernames(rc.Exemptions.Identities))
		out[ruleParam(rl.ID, paramGroups)] = paramList(sortedUnique(rc.Exemptions.Groups))
		out[ruleParam(rl.ID, paramNamespaces)] = paramList(namespacePatterns(rc.Exemptions.Namespaces))
	}
	return out
}

func paramList(xs []string) string { return strings.Join(xs, "\n") }

func namespacePatterns(globs []string) []string {
	var out []string
	for _, g := range globs {
		out = append(out, globRegexp(g))
	}
	return out
}

// celParam is the parameter's value, or def when the object has no such key.
func celParam(key, def string) string {
	return fmt.Sprintf("(has(params.data) && %[1]s in params.data ? params.data[%[1]s] : %[2]s)", celQuote(key), def)
}

// celParamList is the list a parameter holds, one item per line; an empty or missing one is [].
func celParamList(key string) string {
	return fmt.Sprintf("(has(params.data) && %[1]s in params.data && params.data[%[1]s] != '' ? params.data[%[1]s].split('\\n') : [])", celQuote(key))
}

// paramConfirmKey is the confirmKey variable of a policy that reads the parameter object.
var paramConfirmKey = fmt.Sprintf("%s != '' ? %s : %s", celParam(paramConfirmAnnotation, "''"), celParam(paramConfirmAnnotation, "''"), celQuote(DefaultReclaimConfirmAnnotation))

// paramConditions are the matchConditions of a policy that reads the parameter object: the
// rule is at deny, and neither the requester nor the object's namespaces are exempt from it (nor,
// for a form that leaves them to the Go form, is the requester a controller), as
// exemptionConditions says for literals.
func paramConditions(rl *Rule, form CELForm) []admissionregistrationv1.MatchCondition {
	users := celParamList(paramUsers) + " + " + celParamList(ruleParam(rl.ID, paramUsers))
	groups := celParamList(paramGroups) + " + " + celParamList(ruleParam(rl.ID, paramGroups))
	if form.ExemptControllers {
		users += " + " + celList(identityUsernames(builtinControllers)) + " + " + celParamList(paramControllerUsers)
		groups += " + " + celParamList(paramControllerGroups)
		if bg := sortedUnique(builtinControllers.Groups); len(bg) > 0 {
			groups += " + " + celList(bg)
		}
	}
	return []admissionregistrationv1.MatchCondition{
		{Name: "rule-at-deny", Expression: celParam(ruleParam(rl.ID, "action"), celQuote(string(rl.Default))) + " == 'deny'"},
		{Name: "not-an-exempt-user", Expression: usersCondition("(" + users + ")")},
		{Name: "not-an-exempt-group", Expression: groupsCondition("(" + groups + ")")},
		{Name: "not-in-exempt-namespaces-0", Expression: "!(" + namespacesExempt(form.Kind, celParamList(paramNamespaces)) + ")"},
		{Name: "not-in-exempt-namespaces-1", Expression: "!(" + namespacesExempt(form.Kind, celParamList(ruleParam(rl.ID, paramNamespaces))) + ")"},
	}
}
