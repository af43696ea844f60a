package policytest

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
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

// writeKinds are the kinds pvguard's webhooks judge.
var writeKinds = map[header]func() metav1.Object{
	{"v1", "PersistentVolume"}:            func() metav1.Object { return &corev1.PersistentVolume{} },
	{"v1", "PersistentVolumeClaim"}:       func() metav1.Object { return &corev1.PersistentVolumeClaim{} },
	{"storage.k8s.io/v1", "StorageClass"}: func() metav1.Object { return &storagev1.StorageClass{} },
}

const writeKindList = "v1 PersistentVolume or PersistentVolumeClaim, or storage.k8s.io/v1 StorageClass"

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

// Write is a write as the apiserver hands it to pvguard's webhooks, and the answer expected.
// compileWrite checks what a case says; resolve finds what it names in a state of the fixtures.
func compileWrite(w writeDoc, e expectDoc, at string) (*Write, error) {
	wat := at + ".write"
	out := &Write{Operation: admissionv1.Operation(w.Operation), SubResource: w.SubResource, DryRun: w.DryRun}
	switch out.Operation {
	case admissionv1.Create, admissionv1.Update, admissionv1.Delete:
	default:
		return nil, fmt.Errorf("%s.operation: %q: want CREATE, UPDATE or DELETE", wat, w.Operation)
	}
	switch {
	case w.SubResource == "":
	case w.SubResource != "status":
		return nil, fmt.Errorf("%s.subResource: %q: want status, or none", wat, w.SubResource)
	case out.Operation != admissionv1.Update:
		return nil, fmt.Errorf("%s.subResource: a status write is an UPDATE", wat)
	}
	var err error
	if out.User, err = requester(w, wat); err != nil {
		return nil, err
	}
	src := &out.src
	switch {
	case !absent(w.OldObject) && w.OldFixture != "":
		return nil, fmt.Errorf("%s: oldObject and oldFixture: give the old object one way, not both", wat)
	case !absent(w.OldObject):
		if src.old, err = decodeWriteObject(w.OldObject, wat+".oldObject"); err != nil {
			return nil, err
		}
	}
	switch {
	case !absent(w.Object) && !absent(w.Patch):
		return nil, fmt.Errorf("%s: object and patch: give the object written one way, not both", wat)
	case !absent(w.Object):
		if src.object, err = decodeWriteObject(w.Object, wat+".object"); err != nil {
			return nil, err
		}
	case !absent(w.Patch):
		src.patch = w.Patch
	}
	// What is written: the kind, namespace and name, from the object or the old object.
	var ref objectRef
	switch {
	case src.object != nil:
		ref = refOf(src.object)
	case src.old != nil:
		ref = refOf(src.old)
	}
	if w.OldFixture != "" {
		fref, err := parseRef(w.OldFixture, ref.kind)
		if err != nil {
			return nil, fmt.Errorf("%s.oldFixture: %w", wat, err)
		}
		if ref.kind != "" && fref != ref {
			return nil, fmt.Errorf("%s: the old object is %s, the object %s: a write changes one object", wat, fref, ref)
		}
		ref, src.oldRef = fref, fref
	}
	switch out.Operation {
	case admissionv1.Create:
		if src.old != nil || w.OldFixture != "" || src.patch != nil {
			return nil, fmt.Errorf("%s: a CREATE has no old object (and no patch)", wat)
		}
		if src.object == nil {
			return nil, fmt.Errorf("%s.object: a CREATE writes an object", wat)
		}
	case admissionv1.Update:
		if src.object == nil && src.patch == nil {
			return nil, fmt.Errorf("%s: an UPDATE writes an object (object or patch)", wat)
		}
		if src.patch != nil && src.old == nil && src.oldRef.kind == "" {
			return nil, fmt.Errorf("%s.patch: a patch needs the old object it applies to (oldObject, or oldFixture with its kind)", wat)
		}
		if src.old == nil && src.oldRef.kind == "" {
			src.oldRef = ref // the fixture the object names
		}
	case admissionv1.Delete:
		if src.object != nil || src.patch != nil {
			return nil, fmt.Errorf("%s: a DELETE writes no object; name what it deletes with oldFixture or oldObject", wat)
		}
		if src.old == nil && src.oldRef.kind == "" {
			return nil, fmt.Errorf("%s: a DELETE needs the object it deletes (oldFixture or oldObject)", wat)
		}
	}
	if src.old != nil && src.object != nil && refOf(src.old) != ref {
		return nil, fmt.Errorf("%s: the old object is %s, the object %s: a write changes one object", wat, refOf(src.old), ref)
	}
	out.Kind, out.Namespace, out.Name = policy.Kind(ref.kind), ref.namespace, ref.name
	if out.Expect, err = compileExpect(e, at+".expect"); err != nil {
		return nil, err
	}
	return out, nil
}

// writeSource is what a write case gives, before it is resolved in a state of the fixtures.
type writeSource struct {
	object metav1.Object // the object written, inline
	patch  []byte        // or a merge patch of the old object
	old    metav1.Object // the old object, inline
	oldRef objectRef     // or the fixture that is the old object
}

// objectRef names an object of a kind pvguard's webhooks judge.
type objectRef struct{ kind, namespace, name string }

func (r objectRef) String() string { return objectKey(r.kind, r.namespace, r.name) }

func refOf(obj metav1.Object) objectRef {
	return objectRef{kind: string(kindOf(obj)), namespace: obj.GetNamespace(), name: obj.GetName()}
}

// Resolve is the write in the state fx holds (a sequential suite's write is resolved when it
// runs, in the state the writes before it made); a write already resolved is returned as it is.
func (w *Write) Resolve(fx *Fixtures) (*Write, error) {
	if w.resolved {
		return w, nil
	}
	return w.resolve(fx)
}

// resolve is the write in a state of the fixtures: its old object found (an inline one, or the
// fixture it names), its object made (inline, or the patch applied to the old object), then what
// the apiserver does before its mutating webhooks are called (admissionPlugins). The write
// itself is not changed.
func (w *Write) resolve(fx *Fixtures) (*Write, error) {
	out := *w
	out.resolved = true
	src := w.src
	old := src.old
	if old == nil && src.oldRef.kind != "" {
		var err error
		if old, err = lookup(fx, src.oldRef); err != nil {
			if w.Operation == admissionv1.Update && src.object != nil {
				return nil, fmt.Errorf("no old object given (oldObject or oldFixture), and %w", err)
			}
			return nil, err
		}
		out.OldFixture = src.oldRef.String()
	}
	var (
		obj   metav1.Object
		oldJS []byte
		err   error
	)
	if old != nil {
		if oldJS, err = json.Marshal(old); err != nil {
			return nil, err
		}
	}
	switch {
	case src.object != nil:
		obj = deepCopy(src.object)
	case src.patch != nil:
		patched, err := jsonpatch.MergePatch(oldJS, src.patch)
		if err != nil {
			return nil, fmt.Errorf("patch: %w", err)
		}
		if obj, err = decodeWriteObject(patched, "patch"); err != nil {
			return nil, err
		}
		if refOf(obj) != refOf(old) {
			return nil, fmt.Errorf("patch: it makes %s of %s: a write changes one object", refOf(obj), refOf(old))
		}
	}
	if w.Operation == admissionv1.Create {
		admissionPlugins(obj, fx)
	}
	if obj != nil {
		if out.Object, err = json.Marshal(obj); err != nil {
			return nil, err
		}
	}
	out.OldObject = oldJS
	return &out, nil
}

// admissionPlugins does to a new object what the apiserver's default admission plugins do before
// its mutating webhooks are called: a claim that names no class is given the default class
// (DefaultStorageClass), and a volume or claim gets its protection finalizer
// (StorageObjectInUseProtection).
func admissionPlugins(obj metav1.Object, fx *Fixtures) {
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		addFinalizer(o, finPV)
	case *corev1.PersistentVolumeClaim:
		if o.Spec.StorageClassName == nil {
			if def := defaultClass(fx.Classes); def != "" {
				o.Spec.StorageClassName = &def
			}
		}
		addFinalizer(o, finPVC)
	}
}

// The finalizers the StorageObjectInUseProtection admission plugin adds.
const (
	finPV  = "kubernetes.io/pv-protection"
	finPVC = "kubernetes.io/pvc-protection"
)

func addFinalizer(obj metav1.Object, f string) {
	if !slices.Contains(obj.GetFinalizers(), f) {
		obj.SetFinalizers(append(obj.GetFinalizers(), f))
	}
}

// defaultClass is the class DefaultStorageClass gives a claim without one: the newest of those
// marked default (by creation time, then name, as the plugin orders them), "" for none.
func defaultClass(classes []*storagev1.StorageClass) string {
	var best *storagev1.StorageClass
	for _, sc := range classes {
		if !storage.IsDefaultClass(sc) {
			continue
		}
		if best == nil || sc.CreationTimestamp.After(best.CreationTimestamp.Time) ||
			(sc.CreationTimestamp.Equal(&best.CreationTimestamp) && sc.Name > best.Name) {
			best = sc
		}
	}
	if best == nil {
		return ""
	}
	return best.Name
}

// withType fills in the apiVersion and kind of an object that lacks them (one read through a
// typed client), as the apiserver sends every object to webhooks.
func withType(obj metav1.Object) metav1.Object {
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		o.APIVersion, o.Kind = "v1", "PersistentVolume"
	case *corev1.PersistentVolumeClaim:
		o.APIVersion, o.Kind = "v1", "PersistentVolumeClaim"
	case *storagev1.StorageClass:
		o.APIVersion, o.Kind = "storage.k8s.io/v1", "StorageClass"
	}
	return obj
}

func deepCopy(obj metav1.Object) metav1.Object {
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		return o.DeepCopy()
	case *corev1.PersistentVolumeClaim:
		return o.DeepCopy()
	case *storagev1.StorageClass:
		return o.DeepCopy()
	}
	panic(fmt.Sprintf("policytest: %T is not written", obj))
}

// requester is the identity a write is made as: a user with groups, or a ServiceAccount with the
// groups the apiserver gives it. Every authenticated requester is in system:authenticated.
func requester(w writeDoc, at string) (authenticationv1.UserInfo, error) {
	switch {
	case w.User != "" && w.ServiceAccount != "":
		return authenticationv1.UserInfo{}, fmt.Errorf("%s: user and serviceAccount: the requester is one of them", at)
	case w.ServiceAccount != "":
		if len(w.Groups) > 0 {
			return authenticationv1.UserInfo{}, fmt.Errorf("%s.groups: a ServiceAccount's groups are the ones the apiserver gives it", at)
		}
		ns, name, ok := strings.Cut(w.ServiceAccount, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return authenticationv1.UserInfo{}, fmt.Errorf("%s.serviceAccount: %q: want namespace/name", at, w.ServiceAccount)
		}
		return authenticationv1.UserInfo{Username: serviceaccount.MakeUsername(ns, name),
			Groups: append(serviceaccount.MakeGroupNames(ns), user.AllAuthenticated)}, nil
	case w.User != "":
		groups := slices.Clone(w.Groups)
		if !slices.Contains(groups, user.AllAuthenticated) {
			groups = append(groups, user.AllAuthenticated)
		}
		return authenticationv1.UserInfo{Username: w.User, Groups: groups}, nil
	}
	return authenticationv1.UserInfo{}, fmt.Errorf("%s: who writes: user (with groups) or serviceAccount namespace/name", at)
}

// decodeWriteObject decodes an object a write carries, strictly.
func decodeWriteObject(js []byte, at string) (metav1.Object, error) {
	h, err := readHeader(js)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", at, fieldError(err, ""))
	}
	// The path is named once, before the object; field paths are the object's own, as in a
	// fixture's errors.
	obj, err := decodeObject(js, h, writeKinds, writeKindList, "")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	return obj, nil
}

// kindOf is the policy kind of a decoded write object.
func kindOf(obj metav1.Object) policy.Kind {
	switch obj.(type) {
	case *corev1.PersistentVolume:
		return policy.KindPersistentVolume
	case *corev1.PersistentVolumeClaim:
		return policy.KindPersistentVolumeClaim
	}
	return policy.KindStorageClass
}

// parseRef reads a reference to a volume, claim or class: Kind/[namespace/]name, or
// [namespace/]name of defaultKind.
func parseRef(ref, defaultKind string) (objectRef, error) {
	kind, rest := defaultKind, ref
	if k, r, ok := strings.Cut(ref, "/"); ok {
		switch k {
		case string(policy.KindPersistentVolume), string(policy.KindPersistentVolumeClaim), string(policy.KindStorageClass):
			kind, rest = k, r
		}
	}
	parts := strings.Split(rest, "/")
	bad := fmt.Errorf("%q: want PersistentVolume/NAME, PersistentVolumeClaim/NAMESPACE/NAME or StorageClass/NAME", ref)
	if slices.Contains(parts, "") {
		return objectRef{}, bad
	}
	switch {
	case kind == "":
		return objectRef{}, fmt.Errorf("%q: name its kind: PersistentVolume/NAME, PersistentVolumeClaim/NAMESPACE/NAME or StorageClass/NAME", ref)
	case kind == string(policy.KindPersistentVolumeClaim) && len(parts) == 2:
		return objectRef{kind: kind, namespace: parts[0], name: parts[1]}, nil
	case kind != string(policy.KindPersistentVolumeClaim) && len(parts) == 1:
		return objectRef{kind: kind, name: parts[0]}, nil
	}
	return objectRef{}, bad
}

// lookup finds the fixture a reference names, as a copy.
func lookup(fx *Fixtures, r objectRef) (metav1.Object, error) {
	if obj, ok := fx.index()[r]; ok {
		return withType(deepCopy(obj)), nil
	}
	return nil, fmt.Errorf("there is no fixture %s", r)
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
