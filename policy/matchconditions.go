package policy

import (
	"fmt"
	"slices"
	"strings"
)

// MatchCondition is a CEL matchCondition of a webhook: the apiserver calls the webhook only for
// a request on which every one of its conditions is true.
type MatchCondition struct {
	Name       string `json:"name"`
	Expression string `json:"expression"`
}

// mutableMeta are the fields of metadata a write of the status subresource may change (the
// apiserver resets spec on such a write, not metadata) and a rule may read; managedFields and
// resourceVersion change on every write and no rule reads them. name, namespace, uid and
// creationTimestamp cannot change, nor can deletionTimestamp on an update.
var mutableMeta = []string{"labels", "annotations", "finalizers", "ownerReferences"}

// StatusReadsOf lists, sorted, the status fields of kind k that the rules admission runs on
// writes of k declare they read (Rule.StatusReads).
func StatusReadsOf(rules []Rule, k Kind) []string {
	var out []string
	for i := range rules {
		rl := &rules[i]
		if !rl.Judges.AtAdmission() || !rl.appliesTo(k) {
			continue
		}
		for _, f := range rl.StatusReads[k] {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	slices.Sort(out)
	return out
}

// WebhookMatchConditions is the matchCondition of the validating webhook for kind k (a kind with
// a status subresource: PersistentVolume or PersistentVolumeClaim) that keeps from pvguard the
// writes of the status subresource which change nothing the rules judging k read: no status
// field of StatusReadsOf(rules, k) and no field of metadata a rule may read. Such a write leaves
// everything the rules read as it was, and the engine admits it without a word (the rule tests
// hold each rule to its StatusReads and check both): the pvc-protection controller's Unused
// condition, the resizer's allocatedResources, a health monitor's healthStatus no longer wait on
// pvguard. The apiserver resets spec on a status write before validating admission, so spec need
// not be compared.
//
// Each field is tested with has() before it is read, so the expression evaluates without error
// on any object (an error would fail the request under failurePolicy Fail).
func WebhookMatchConditions(rules []Rule, k Kind) []MatchCondition {
	// The request leaves out an empty subResource (a write of the object itself).
	terms := []string{"!has(request.subResource) || request.subResource != 'status'"}
	for _, f := range mutableMeta {
		terms = append(terms, celFieldChanged("metadata", f))
	}
	for _, f := range StatusReadsOf(rules, k) {
		terms = append(terms, celFieldChanged("status", f))
	}
	return []MatchCondition{{Name: "changes-what-rules-read", Expression: strings.Join(terms, " || ")}}
}

// celFieldChanged is true when parent.field differs between object and oldObject: set on one
// and not the other, or set on both to different values. It reads a field only where has() says
// it is set on both.
func celFieldChanged(parent, field string) string {
	present := func(obj string) string {
		if parent == "metadata" { // metadata is always set
			return fmt.Sprintf("has(%s.metadata.%s)", obj, field)
		}
		return fmt.Sprintf("(has(%[1]s.%[2]s) && has(%[1]s.%[2]s.%[3]s))", obj, parent, field)
	}
	return fmt.Sprintf("%s != %s || (%s && object.%s.%s != oldObject.%s.%s)",
		present("object"), present("oldObject"), present("object"), parent, field, parent, field)
}
