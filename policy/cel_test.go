package policy_test

import (
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
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
			cel.Variable("params", cel.DynType),
		},
	})
	if err != nil {
		return nil, err
	}
	return set.Env(environment.NewExpressions)
})

// celPrograms are the compiled expressions, by source: the agreement tests evaluate the same
// few expressions on many thousands of writes.
var celPrograms sync.Map

func celProgram(env *cel.Env, expr string) (cel.Program, error) {
	if p, ok := celPrograms.Load(expr); ok {
		return p.(cel.Program), nil
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("compiling %q: %w", expr, iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		return nil, err
	}
	celPrograms.Store(expr, prg)
	return prg, nil
}

// celRefuses evaluates a generated policy on a review, with the parameter object's data when
// the policy reads one: whether it matches (its matchConditions hold) and whether its
// validation then refuses the write, with the message.
func celRefuses(p *admissionregistrationv1.ValidatingAdmissionPolicy, r *policy.Review, params map[string]string) (refused bool, message string, err error) {
	base, err := celVars(r)
	if err != nil {
		return false, "", err
	}
	return celRefusesWith(p, base, params)
}

// celVars are the variables of a review that every policy sees: request, object, oldObject.
func celVars(r *policy.Review) (map[string]any, error) {
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
	var err error
	if vars["object"], err = toMap(obj); err != nil {
		return nil, err
	}
	if vars["oldObject"], err = toMap(old); err != nil {
		return nil, err
	}
	return vars, nil
}

func celRefusesWith(p *admissionregistrationv1.ValidatingAdmissionPolicy, base map[string]any, params map[string]string) (refused bool, message string, err error) {
	env, err := celEnv()
	if err != nil {
		return false, "", err
	}
	eval := func(expr string, vars map[string]any) (any, error) {
		prg, err := celProgram(env, expr)
		if err != nil {
			return nil, err
		}
		out, _, err := prg.Eval(vars)
		if err != nil {
			return nil, fmt.Errorf("evaluating %q: %w", expr, err)
		}
		return out.Value(), nil
	}
	vars := maps.Clone(base)
	if p.Spec.ParamKind != nil {
		data := map[string]any{}
		for k, v := range params {
			data[k] = v
		}
		vars["params"] = map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": data}
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

// celDifference is a reviewed difference between a rule's CEL form and its Go form: a kind of
// write one of them admits and the other refuses, and why that is right.
type celDifference struct {
	rule policy.RuleID
	// celAdmits: the CEL form admits what the Go form refuses (else the other way round).
	celAdmits bool
	why       string
	// applies tells the write apart from the review, the objects around it and the config.
	applies func(r *policy.Review, v policy.View, cfg *policy.Config) bool
}

// celDifferences are every difference the agreement tests accept, in both directions; any
// other disagreement fails them. A rule with none has CEL forms without Weaker, and one with
// some says them in Weaker (TestCELDifferencesAreTheFormsWeaker).
var celDifferences = []celDifference{
	{
		rule: "PVG002", celAdmits: true,
		why: "the CEL form judges only the link of a volume that was Bound with a claim uid (a link being made is judged from the claim, which it cannot read)",
		applies: func(r *policy.Review, _ policy.View, _ *policy.Config) bool {
			return r.OldPV == nil || r.OldPV.Status.Phase != corev1.VolumeBound || r.OldPV.Spec.ClaimRef == nil || r.OldPV.Spec.ClaimRef.UID == ""
		},
	},
	{
		rule: "PVG002", celAdmits: true,
		why: "the controllers' writes are left to the Go form: upstream unbinds a volume whose claim is gone or went elsewhere, which needs the claim to tell",
		applies: func(r *policy.Review, _ policy.View, cfg *policy.Config) bool {
			return cfg.IsController(r.User)
		},
	},
	{
		rule: "PVG002", celAdmits: true,
		why: "a hand-off is taken by the name alone (the volume leaves a claim named after the new claimRef's uid), without the reads that tell the target waits for the data",
		applies: func(r *policy.Review, _ policy.View, _ *policy.Config) bool {
			old, cur := r.OldPV.Spec.ClaimRef, r.PV.Spec.ClaimRef
			return old != nil && cur != nil && cur.UID != "" && strings.HasSuffix(old.Name, "-"+string(cur.UID))
		},
	},
	{
		rule: "PVG002", celAdmits: false,
		why: "the Bound volume's claim is gone or went to another volume, which only a read tells: the CEL form keeps the link against all but the controllers",
		applies: func(r *policy.Review, v policy.View, _ *policy.Config) bool {
			ref := r.OldPV.Spec.ClaimRef
			if ref == nil {
				return false
			}
			c, _ := v.PersistentVolumeClaim(ref.Namespace, ref.Name)
			return c == nil || c.UID != ref.UID || c.Spec.VolumeName != "" && c.Spec.VolumeName != r.OldPV.Name
		},
	},
	{
		rule: "PVG012", celAdmits: true,
		why: "a volume being deleted is not judged by the CEL form: whether a live claim still holds it needs that claim",
		applies: func(r *policy.Review, _ policy.View, _ *policy.Config) bool {
			return r.Kind == policy.KindPersistentVolume && r.OldPV.DeletionTimestamp != nil
		},
	},
}

// celDifference finds the listed difference that explains a disagreement, nil when none does.
func findCELDifference(id policy.RuleID, r *policy.Review, v policy.View, cfg *policy.Config, celRefused bool) *celDifference {
	for i, d := range celDifferences {
		if d.rule == id && d.celAdmits == !celRefused && d.applies(r, v, cfg) {
			return &celDifferences[i]
		}
	}
	return nil
}

// celMode is one way the policies are made: with the config as literals, or reading the
// parameter object (as the chart installs them), whose data is then the config's.
type celMode struct {
	name   string
	opts   policy.AdmissionPolicyOptions
	params map[string]string
}

func celModes(cfg *policy.Config) []celMode {
	return []celMode{
		{name: "literals"},
		{name: "params", opts: policy.AdmissionPolicyOptions{Params: &policy.ParamObject{Namespace: "pvguard", Name: "params"}}, params: policy.AdmissionPolicyParams(cfg)},
	}
}

// celPolicies are the policies made for a config in a mode, made once per config.
var celPolicies sync.Map

func celPoliciesFor(cfg *policy.Config, mode celMode) []policy.AdmissionPolicy {
	type key struct {
		cfg  *policy.Config
		mode string
	}
	k := key{cfg, mode.name}
	if aps, ok := celPolicies.Load(k); ok {
		return aps.([]policy.AdmissionPolicy)
	}
	aps := policy.AdmissionPolicies(cfg, mode.opts)
	celPolicies.Store(k, aps)
	return aps
}

// celDifferencesSeen counts the listed differences the agreement tests met, by reason.
var celDifferencesSeen sync.Map

// checkCELForms holds the CEL forms of the rule id to its Go answer on one review (goRefused:
// whether the Go rule refused it), in both ways of making the policies: where one admits what
// the other refuses, celDifferences must say why.
func checkCELForms(t *testing.T, id policy.RuleID, cfg *policy.Config, r *policy.Review, v policy.View, goRefused bool) {
	t.Helper()
	rl, _ := policy.LookupRule(string(id))
	if len(rl.CEL) == 0 {
		return
	}
	var base map[string]any
	for _, mode := range celModes(cfg) {
		// A write the Go rule refuses and no policy of the rule matches (another operation,
		// the status subresource) is a write the CEL forms admit.
		matched := false
		defer func() {
			if !matched && goRefused && findCELDifference(id, r, v, cfg, false) == nil {
				t.Errorf("%s (%s): the Go rule refuses a %s %s%s that no policy of the rule matches, and no listed difference says why",
					id, mode.name, r.Operation, r.Kind, map[bool]string{true: "/" + r.SubResource}[r.SubResource != ""])
			}
		}()
		for _, ap := range celPoliciesFor(cfg, mode) {
			if ap.Rule != id || !celMatches(ap.Policy, r) {
				continue
			}
			matched = true
			if base == nil {
				var err error
				if base, err = celVars(r); err != nil {
					t.Fatal(err)
				}
			}
			refused, msg, err := celRefusesWith(ap.Policy, base, mode.params)
			if err != nil {
				t.Errorf("%s (%s): %v", ap.Policy.Name, mode.name, err)
				continue
			}
			if refused && !strings.HasPrefix(msg, "["+string(id)+" ") {
				t.Errorf("%s (%s) refuses with %q, which does not name the rule", ap.Policy.Name, mode.name, msg)
			}
			if refused == goRefused {
				continue
			}
			d := findCELDifference(id, r, v, cfg, refused)
			if d == nil {
				t.Errorf("%s (%s): the CEL form refuses=%v (%s) where the Go rule refuses=%v, and no listed difference says why", ap.Policy.Name, mode.name, refused, msg, goRefused)
				continue
			}
			n, _ := celDifferencesSeen.LoadOrStore(d.why, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		}
	}
}

// TestCELDifferencesAreTheFormsWeaker: the rules with listed differences are those whose CEL
// forms say, in Weaker, that they differ; every difference has its reason.
func TestCELDifferencesAreTheFormsWeaker(t *testing.T) {
	listed := map[policy.RuleID]bool{}
	for _, d := range celDifferences {
		listed[d.rule] = true
		if d.why == "" || d.applies == nil {
			t.Errorf("a difference of %s has no reason or no test", d.rule)
		}
	}
	for _, rl := range policy.Catalogue() {
		weaker := false
		for _, f := range rl.CEL {
			weaker = weaker || f.Weaker != ""
		}
		if weaker != listed[rl.ID] {
			t.Errorf("%s: its CEL forms say they differ from the Go form: %v; the agreement tests list differences for it: %v", rl.ID, weaker, listed[rl.ID])
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

// celConfigs are the configs the explored writes are judged under: the defaults, and configs
// that exempt the explorer's own identities and namespaces, name controllers, change actions and
// rename the confirmation annotation.
var celConfigs = map[string]string{
	"defaults": "{}",
	"exemptions": `exemptions: {namespaces: ["team-b*"], groups: [system:nodes]}
rules:
  PVG012: {exemptions: {users: [alice]}}
  claimref-uid-consistent: {exemptions: {groups: [system:masters], serviceAccounts: [populators/populator]}}
  PVG003: {exemptions: {serviceAccounts: [csi/csi-resizer]}}
`,
	"controllers": "controllers: {serviceAccounts: [csi/csi-provisioner, csi/csi-resizer, populators/populator], users: [kubernetes-admin]}\n",
	"actions": `rules:
  PVG003: {action: warn}
  claimref-uid-consistent: {action: audit}
  PVG011: {action: "off"}
reclaimConfirmAnnotation: example.com/reclaim-ok
`,
}

// TestCELFormsAgreeOnExploredWrites: every write of the sequence explorer that reaches the engine
// is judged by each rule's CEL form too, in both ways of making the policies and under each of
// celConfigs, with the same answer but where a listed difference says why.
func TestCELFormsAgreeOnExploredWrites(t *testing.T) {
	for name, text := range celConfigs {
		t.Run(name, func(t *testing.T) {
			cfg, err := policy.ParseConfig([]byte(text))
			if err != nil {
				t.Fatal(err)
			}
			e := policy.NewEngine(cfg)
			checked := map[policy.RuleID]int{}
			// The defaults take the explorer's full run; each other config a quarter of it.
			runs := uint64(*seqRuns)
			if name != "defaults" {
				runs = max(runs/4, 1)
			}
			for seed := range runs {
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
				if len(rl.CEL) > 0 && cfg.ActionFor(&rl) == policy.ActionDeny && checked[rl.ID] == 0 {
					t.Errorf("the explorer made no write %s refuses: its CEL form was not held to a refusal", rl.ID)
				}
			}
			t.Logf("writes refused by each rule with a CEL form: %v", checked)
		})
	}
	celDifferencesSeen.Range(func(k, v any) bool {
		t.Logf("listed difference met %d times so far: %s", v.(*atomic.Int64).Load(), k)
		return true
	})
}
