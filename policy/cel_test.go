package policy_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/sequence"
)

// The CEL forms of the rules, as AdmissionPolicies makes them into ValidatingAdmissionPolicies,
// are held to the Go rules' answers: over every rule's table cases (runRuleCases calls
// checkCELForms) and over the writes the sequence explorer makes. They are evaluated here with
// the apiserver's own CEL environment (k8s.io/apiserver/pkg/cel/environment, its libraries and
// cost rules); test/e2ecel runs them in a real kube-apiserver.

// celEnv is the apiserver's base environment with the variables of a validating policy.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	set, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions: []cel.EnvOption{
			cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType),
			cel.Variable("request", cel.DynType), cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)),
		},
	})
	if err != nil {
		return nil, err
	}
	return set.Env(environment.NewExpressions)
})

// celRefuses evaluates a generated policy on a review: whether it matches (its matchConditions
// hold) and whether its validation then refuses the write, with the message.
func celRefuses(p *admissionregistrationv1.ValidatingAdmissionPolicy, r *policy.Review) (refused bool, message string, err error) {
	env, err := celEnv()
	if err != nil {
		return false, "", err
	}
	eval := func(expr string, vars map[string]any) (any, error) {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			return nil, fmt.Errorf("compiling %q: %w", expr, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			return nil, err
		}
		out, _, err := prg.Eval(vars)
		if err != nil {
			return nil, fmt.Errorf("evaluating %q: %w", expr, err)
		}
		return out.Value(), nil
	}
	var obj, old runtime.Object
	switch r.Kind {
	case policy.KindPersistentVolume:
		obj, old = ptrOrNil(r.PV), ptrOrNil(r.OldPV)
	case policy.KindPersistentVolumeClaim:
		obj, old = ptrOrNil(r.PVC), ptrOrNil(r.OldPVC)
	}
	toMap := func(o runtime.Object) (any, error) {
		if o == nil {
			return nil, nil
		}
		return runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	}
	vars := map[string]any{"request": map[string]any{
		"operation": string(r.Operation),
		"userInfo":  map[string]any{"username": r.User.Username, "groups": r.User.Groups},
	}}
	if vars["object"], err = toMap(obj); err != nil {
		return false, "", err
	}
	if vars["oldObject"], err = toMap(old); err != nil {
		return false, "", err
	}
	variables := map[string]any{}
	for _, v := range p.Spec.Variables {
		val, err := eval(v.Expression, vars)
		if err != nil {
			return false, "", err
		}
		variables[v.Name] = val
	}
	vars["variables"] = variables
	for _, mc := range p.Spec.MatchConditions {
		ok, err := eval(mc.Expression, vars)
		if err != nil {
			return false, "", err
		}
		if ok != true {
			return false, "", nil
		}
	}
	for _, v := range p.Spec.Validations {
		ok, err := eval(v.Expression, vars)
		if err != nil {
			return false, "", err
		}
		if ok != true {
			msg, err := eval(v.MessageExpression, vars)
			if err != nil {
				return true, "", err
			}
			return true, fmt.Sprint(msg), nil
		}
	}
	return false, "", nil
}

func ptrOrNil[T any, P interface {
	*T
	runtime.Object
}](p P) runtime.Object {
	if p == nil {
		return nil
	}
	return p
}

// celDivergence says why a CEL form may answer a review differently from its Go rule (refused
// by one, admitted by the other), or "" when it may not. It is the test's reading of each form's
// Weaker, from the review and the objects around it.
func celDivergence(id policy.RuleID, r *policy.Review, v policy.View, cfg *policy.Config, celRefused bool) string {
	switch id {
	case "PVG002":
		if !celRefused {
			return "the CEL form judges only a Bound volume's link, leaves the controllers to the Go form, and takes a hand-off by the name alone"
		}
		// The CEL form refuses everyone but the controllers; the Go form admits a link change of
		// a volume whose claim is gone or went to another volume.
		if ref := r.OldPV.Spec.ClaimRef; ref != nil {
			c, _ := v.PersistentVolumeClaim(ref.Namespace, ref.Name)
			if c == nil || c.UID != ref.UID || c.Spec.VolumeName != "" && c.Spec.VolumeName != r.OldPV.Name {
				return "the Bound volume's claim is gone or went elsewhere, which only a read tells"
			}
		}
		// Or it is a populator's hand-off the Go form admits and the CEL form too; anything else
		// must agree.
	case "PVG012":
		if !celRefused && r.Kind == policy.KindPersistentVolume && r.OldPV.DeletionTimestamp != nil {
			return "a volume being deleted is not judged by the CEL form"
		}
		if !celRefused && cfg.IsController(r.User) {
			return "the controllers are left to the Go form"
		}
	}
	return ""
}

// checkCELForms holds the CEL forms of the rule id to its Go answer on one review (goRefused:
// whether the Go rule refused it).
func checkCELForms(t *testing.T, id policy.RuleID, cfg *policy.Config, r *policy.Review, v policy.View, goRefused bool) {
	t.Helper()
	for _, ap := range policy.AdmissionPolicies(cfg, policy.AdmissionPolicyOptions{}) {
		if ap.Rule != id || !celMatches(ap.Policy, r) {
			continue
		}
		refused, msg, err := celRefuses(ap.Policy, r)
		if err != nil {
			t.Errorf("%s: %v", ap.Policy.Name, err)
			continue
		}
		if refused && !strings.HasPrefix(msg, "["+string(id)+" ") {
			t.Errorf("%s refuses with %q, which does not name the rule", ap.Policy.Name, msg)
		}
		if refused != goRefused {
			if why := celDivergence(id, r, v, cfg, refused); why == "" {
				t.Errorf("%s: the CEL form refuses=%v (%s) where the Go rule refuses=%v", ap.Policy.Name, refused, msg, goRefused)
			}
		}
	}
}

// celMatches reports whether the policy's resource rules take the review's kind and operation.
func celMatches(p *admissionregistrationv1.ValidatingAdmissionPolicy, r *policy.Review) bool {
	resource := map[policy.Kind]string{policy.KindPersistentVolume: "persistentvolumes", policy.KindPersistentVolumeClaim: "persistentvolumeclaims"}[r.Kind]
	if r.SubResource != "" {
		resource += "/" + r.SubResource
	}
	for _, rr := range p.Spec.MatchConstraints.ResourceRules {
		for _, res := range rr.Resources {
			for _, op := range rr.Operations {
				if res == resource && string(op) == string(r.Operation) {
					return true
				}
			}
		}
	}
	return false
}

// TestCELFormsAgreeOnExploredWrites: every write of the sequence explorer that reaches the engine
// is judged by each rule's CEL form too, with the same answer but where the form says it differs.
func TestCELFormsAgreeOnExploredWrites(t *testing.T) {
	cfg := policy.DefaultConfig()
	e := policy.NewEngine(cfg)
	checked := map[policy.RuleID]int{}
	for seed := range uint64(*seqRuns) {
		for _, tr := range []sequence.Trace{sequence.Explore(e, *seqSeed+seed), sequence.ExploreUpstream(e, *seqSeed+seed)} {
			for _, o := range tr.Outcomes {
				if o.Review == nil {
					continue
				}
				for _, rl := range policy.Catalogue() {
					if len(rl.CEL) == 0 {
						continue
					}
					refused := false
					for _, f := range o.Decision.Deny {
						refused = refused || f.Rule == rl.ID
					}
					checkCELForms(t, rl.ID, cfg, o.Review, o.Before.View(), refused)
					if refused {
						checked[rl.ID]++
					}
				}
			}
		}
	}
	for _, rl := range policy.Catalogue() {
		if len(rl.CEL) > 0 && checked[rl.ID] == 0 {
			t.Errorf("the explorer made no write %s refuses: its CEL form was not held to a refusal", rl.ID)
		}
	}
	t.Logf("writes refused by each rule with a CEL form: %v", checked)
}

var _ = corev1.VolumeBound
