package policytest

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/policy"
)

// Case is one case of a suite: exactly one of Write, Audit and Explain is set.
type Case struct {
	Name    string
	Write   *Write
	Audit   *AuditCase
	Explain *ExplainCase
}

// Kind is "write", "audit" or "explain".
func (c *Case) Kind() string {
	switch {
	case c.Write != nil:
		return "write"
	case c.Audit != nil:
		return "audit"
	}
	return "explain"
}

// Write is a write as the apiserver hands it to pvguard's webhooks, and the answer expected.
type Write struct {
	Kind        policy.Kind
	Operation   admissionv1.Operation
	SubResource string
	// Namespace and Name name the object written.
	Namespace, Name string
	// Object and OldObject are JSON, as an AdmissionReview carries them: Object is nil for a
	// DELETE, OldObject for a CREATE. A CREATE's object without a uid is given one, as the
	// apiserver gives it before the validating webhooks see it.
	Object, OldObject []byte
	// OldFixture is the fixture that is the old object (Kind/[namespace/]name), "" when the old
	// object was given inline.
	OldFixture string
	User       authenticationv1.UserInfo
	DryRun     bool
	Expect     Expectation

	src      writeSource
	resolved bool
}

// Expectation is the answer a write must get: exactly the rules that deny it and exactly those
// that warn (none for either: admitted quietly); the rules whose findings become audit annotations
// when CheckAudit; and a message the denial or a warning matches.
type Expectation struct {
	Deny, Warn []string
	Audit      []string
	CheckAudit bool
	Message    *regexp.Regexp
}

// AuditCase is what the audit of the fixtures must report.
type AuditCase struct {
	Findings []FindingExpectation
	// Exact: no finding beyond those listed.
	Exact bool
}

// FindingExpectation is one finding the audit must report.
type FindingExpectation struct {
	Rule string
	// Object is Kind/name or Kind/namespace/name; "" for any.
	Object  string
	Action  policy.Action
	Message *regexp.Regexp
}

// ExplainCase is what `pvguard explain pvc` must say of a claim.
type ExplainCase struct {
	Namespace, Name string
	Identity        policy.UserInfo
	WaitingFor      string
	// ProvisionerRunning is yes, no or unknown ("": not checked).
	ProvisionerRunning string
	State, Verdict     *regexp.Regexp
	Volume, Closest    *string
	Candidates         []CandidateExpectation
}

// CandidateExpectation is a row of the candidate table.
type CandidateExpectation struct {
	Volume  string
	Fits    *bool
	Failing *[]string
	TakenBy *string
}

// compileCase checks a case and resolves what it names in the fixtures; in a sequential suite
// (fx nil) what it names is found when it runs, in the state the cases before it left.
func compileCase(c caseDoc, at string, fx *Fixtures) (*Case, error) {
	kinds := 0
	for _, set := range []bool{c.Write != nil, c.Audit != nil, c.Explain != nil} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		return nil, fmt.Errorf("%s: a case is exactly one of write (with expect), audit and explain", at)
	}
	out := &Case{Name: c.Name}
	var err error
	switch {
	case c.Write != nil:
		if c.Expect == nil {
			return nil, fmt.Errorf("%s.expect: a write case says what pvguard answers: allowed, denied or warned", at)
		}
		if out.Write, err = compileWrite(*c.Write, *c.Expect, at); err == nil && fx != nil {
			if out.Write, err = out.Write.resolve(fx); err != nil {
				err = fmt.Errorf("%s.write: %w", at, err)
			}
		}
	case c.Expect != nil:
		return nil, fmt.Errorf("%s.expect: only a write case has expect; an audit or explain case says what it expects in its own block", at)
	case c.Audit != nil:
		out.Audit, err = compileAudit(*c.Audit, at+".audit")
	default:
		out.Explain, err = compileExplain(*c.Explain, at+".explain", fx)
	}
	return out, err
}

// ruleIDs are the IDs of the catalogue's rules.
var ruleIDs = func() map[string]bool {
	ids := map[string]bool{}
	for _, rl := range policy.Catalogue() {
		ids[string(rl.ID)] = true
	}
	return ids
}()

// checkRules checks a list of rule IDs and returns it sorted.
func checkRules(ids []string, at string) ([]string, error) {
	for i, id := range ids {
		if !ruleIDs[id] {
			return nil, fmt.Errorf("%s[%d]: %q is not a rule ID (PVG001 ... PVG024, docs/rules.md)", at, i, id)
		}
	}
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out), nil
}

func compileExpect(e expectDoc, at string) (Expectation, error) {
	var out Expectation
	var err error
	switch {
	case e.Allowed && (len(e.Denied) > 0 || len(e.Warned) > 0):
		return out, fmt.Errorf("%s: allowed and denied or warned: allowed means admitted with no warning", at)
	case !e.Allowed && len(e.Denied) == 0 && len(e.Warned) == 0:
		return out, fmt.Errorf("%s: say what pvguard answers: allowed: true, denied: [RULE...] or warned: [RULE...]", at)
	}
	if out.Deny, err = checkRules(e.Denied, at+".denied"); err != nil {
		return out, err
	}
	if out.Warn, err = checkRules(e.Warned, at+".warned"); err != nil {
		return out, err
	}
	if e.Audited != nil {
		out.CheckAudit = true
		if out.Audit, err = checkRules(*e.Audited, at+".audited"); err != nil {
			return out, err
		}
	}
	out.Message, err = optionalRegexp(e.Message, at+".message")
	return out, err
}

func compileAudit(a auditDoc, at string) (*AuditCase, error) {
	if len(a.Findings) == 0 && !a.Exact {
		return nil, fmt.Errorf("%s: list the findings the audit reports, or say exact: true for none", at)
	}
	out := &AuditCase{Exact: a.Exact}
	for i, f := range a.Findings {
		fat := fmt.Sprintf("%s.findings[%d]", at, i)
		if !ruleIDs[f.Rule] {
			return nil, fmt.Errorf("%s.rule: %q is not a rule ID (PVG001 ... PVG024, docs/rules.md)", fat, f.Rule)
		}
		fe := FindingExpectation{Rule: f.Rule, Object: f.Object, Action: policy.Action(f.Action)}
		if f.Object != "" {
			if err := checkObjectRef(f.Object); err != nil {
				return nil, fmt.Errorf("%s.object: %w", fat, err)
			}
		}
		switch fe.Action {
		case "", policy.ActionDeny, policy.ActionWarn, policy.ActionAudit:
		default:
			return nil, fmt.Errorf("%s.action: %q: want deny, warn or audit", fat, f.Action)
		}
		var err error
		if fe.Message, err = optionalRegexp(f.Message, fat+".message"); err != nil {
			return nil, err
		}
		out.Findings = append(out.Findings, fe)
	}
	return out, nil
}

// checkObjectRef checks Kind/name or Kind/namespace/name of a kind the audit judges.
func checkObjectRef(ref string) error {
	_, err := parseRef(ref, "")
	return err
}

// waitingFor are the values of explain.Explanation.WaitingFor.
var waitingFor = []string{explain.WaitingForNothing, explain.WaitingForConsumer, explain.WaitingForProvisioner,
	explain.WaitingForBinder, explain.WaitingForVolume, explain.WaitingForScheduler}

func compileExplain(e explainDoc, at string, fx *Fixtures) (*ExplainCase, error) {
	out := &ExplainCase{WaitingFor: e.WaitingFor, ProvisionerRunning: e.ProvisionerRunning, Volume: e.Volume, Closest: e.Closest}
	ns, name, ok := strings.Cut(e.Claim, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("%s.claim: %q: want namespace/name", at, e.Claim)
	}
	if fx != nil {
		if _, err := lookup(fx, objectRef{kind: string(policy.KindPersistentVolumeClaim), namespace: ns, name: name}); err != nil {
			return nil, fmt.Errorf("%s.claim: %w", at, err)
		}
	}
	out.Namespace, out.Name = ns, name
	var err error
	if out.Identity, err = binderIdentity(e.BinderIdentity); err != nil {
		return nil, fmt.Errorf("%s.binderIdentity: %w", at, err)
	}
	if e.WaitingFor != "" && !slices.Contains(waitingFor, e.WaitingFor) {
		return nil, fmt.Errorf("%s.waitingFor: %q: want one of %s", at, e.WaitingFor, strings.Join(waitingFor, ", "))
	}
	switch e.ProvisionerRunning {
	case "", explain.ProvisionerRunningYes, explain.ProvisionerRunningNo, explain.ProvisionerRunningUnknown:
	default:
		return nil, fmt.Errorf("%s.provisionerRunning: %q: want yes, no or unknown", at, e.ProvisionerRunning)
	}
	if out.State, err = optionalRegexp(e.State, at+".state"); err != nil {
		return nil, err
	}
	if out.Verdict, err = optionalRegexp(e.Verdict, at+".verdict"); err != nil {
		return nil, err
	}
	for i, c := range e.Candidates {
		cat := fmt.Sprintf("%s.candidates[%d]", at, i)
		if c.Volume == "" || strings.Contains(c.Volume, "/") {
			return nil, fmt.Errorf("%s.volume: %q: want the name of a PersistentVolume", cat, c.Volume)
		}
		if c.Failing != nil {
			for j, check := range *c.Failing {
				if !slices.Contains(explain.Checks, explain.Check(check)) {
					names := make([]string, len(explain.Checks))
					for k, ch := range explain.Checks {
						names[k] = string(ch)
					}
					return nil, fmt.Errorf("%s.failing[%d]: %q is not a check; the checks are %s", cat, j, check, strings.Join(names, ", "))
				}
			}
		}
		if c.Fits == nil && c.Failing == nil && c.TakenBy == nil {
			return nil, fmt.Errorf("%s: say what the row shows: fits, failing or takenBy", cat)
		}
		out.Candidates = append(out.Candidates, CandidateExpectation{Volume: c.Volume, Fits: c.Fits, Failing: c.Failing, TakenBy: c.TakenBy})
	}
	if out.WaitingFor == "" && out.ProvisionerRunning == "" && out.State == nil && out.Verdict == nil && out.Volume == nil && out.Closest == nil && len(out.Candidates) == 0 {
		return nil, fmt.Errorf("%s: say what the explanation shows: waitingFor, provisionerRunning, state, verdict, volume, closest or candidates", at)
	}
	return out, nil
}

// DefaultBinderIdentity is the user pvguard's binder writes as when the chart is installed as the
// README installs it, as `pvguard explain --binder-identity` defaults it.
const DefaultBinderIdentity = "system:serviceaccount:pvguard-system:pvguard"

// binderIdentity is the user a binder identity names, with the groups the apiserver gives it.
func binderIdentity(name string) (policy.UserInfo, error) {
	if name == "" {
		name = DefaultBinderIdentity
	}
	u := policy.UserInfo{Username: name, Groups: []string{user.AllAuthenticated}}
	if strings.HasPrefix(name, serviceaccount.ServiceAccountUsernamePrefix) {
		ns, _, err := serviceaccount.SplitUsername(name)
		if err != nil {
			return policy.UserInfo{}, errors.New("want system:serviceaccount:NAMESPACE:NAME")
		}
		u.Groups = append(serviceaccount.MakeGroupNames(ns), user.AllAuthenticated)
	}
	return u, nil
}

// optionalRegexp compiles a regular expression, nil for "".
func optionalRegexp(src, at string) (*regexp.Regexp, error) {
	if src == "" {
		return nil, nil
	}
	re, err := regexp.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	return re, nil
}
