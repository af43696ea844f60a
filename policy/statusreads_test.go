package policy_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/sequence"
)

// statusVariants are the values the status-reads check gives the status fields a rule does not
// declare, per kind and field (as the API spells it): two different values each, beside the
// field's zero value. A status field of the API with no entry here fails the check, so a field
// added to the API is perturbed too once it is listed.
var statusVariants = map[policy.Kind]map[string][2]any{
	policy.KindPersistentVolume: {
		"phase":                   {corev1.VolumeFailed, corev1.VolumePending},
		"message":                 {"the disk is on fire", "still on fire"},
		"reason":                  {"Fire", "Smoke"},
		"lastPhaseTransitionTime": {&metav1.Time{Time: time.Unix(1e9, 0)}, &metav1.Time{Time: time.Unix(2e9, 0)}},
	},
	policy.KindPersistentVolumeClaim: {
		"phase":       {corev1.ClaimLost, corev1.ClaimPending},
		"accessModes": {[]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}, []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadWriteMany}},
		"capacity":    {corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Ti")}, corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		"conditions": {
			[]corev1.PersistentVolumeClaimCondition{{Type: "Unused", Status: corev1.ConditionTrue, Reason: "NoPodsUsingPVC", LastTransitionTime: metav1.Time{Time: time.Unix(1e9, 0)}}},
			[]corev1.PersistentVolumeClaimCondition{{Type: "Unused", Status: corev1.ConditionFalse, Reason: "PodUsingPVC"}, {Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue}},
		},
		"allocatedResources":               {corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Ti")}, corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("3Mi")}},
		"allocatedResourceStatuses":        {map[corev1.ResourceName]corev1.ClaimResourceStatus{corev1.ResourceStorage: corev1.PersistentVolumeClaimControllerResizeInProgress}, map[corev1.ResourceName]corev1.ClaimResourceStatus{corev1.ResourceStorage: corev1.PersistentVolumeClaimNodeResizeInfeasible}},
		"currentVolumeAttributesClassName": {new("gold"), new("tin")},
		"modifyVolumeStatus": {
			&corev1.ModifyVolumeStatus{TargetVolumeAttributesClassName: "gold", Status: corev1.PersistentVolumeClaimModifyVolumeInProgress},
			&corev1.ModifyVolumeStatus{TargetVolumeAttributesClassName: "tin", Status: corev1.PersistentVolumeClaimModifyVolumeInfeasible},
		},
		"healthStatus": {
			&corev1.VolumeHealthStatus{HealthConditions: []corev1.VolumeHealthCondition{{Status: "Abnormal", Reason: "Fire"}}},
			&corev1.VolumeHealthStatus{LastTransitionTime: metav1.Time{Time: time.Unix(2e9, 0)}},
		},
	},
}

// perturbStatus sets every field of the status st points to that the kind's undeclared set holds:
// to its zero value (variant < 0) or to statusVariants' value number variant.
func perturbStatus(t *testing.T, k policy.Kind, st reflect.Value, declared []string, variant int) {
	t.Helper()
	st = st.Elem()
	for i := 0; i < st.NumField(); i++ {
		name, _, _ := strings.Cut(st.Type().Field(i).Tag.Get("json"), ",")
		if slices.Contains(declared, name) {
			continue
		}
		f := st.Field(i)
		if variant < 0 {
			f.Set(reflect.Zero(f.Type()))
			continue
		}
		vals, ok := statusVariants[k][name]
		if !ok {
			t.Fatalf("status field %s of a %s has no values in statusVariants: add two", name, k)
		}
		f.Set(reflect.ValueOf(vals[variant]).Convert(f.Type()))
	}
}

// statusPerturber gives copies of volumes and claims whose status fields the rule does not
// declare hold other values.
type statusPerturber struct {
	t        *testing.T
	declared map[policy.Kind][]string
	variant  int
}

func (p statusPerturber) pv(pv *corev1.PersistentVolume, variant int) *corev1.PersistentVolume {
	if pv == nil {
		return nil
	}
	pv = pv.DeepCopy()
	perturbStatus(p.t, policy.KindPersistentVolume, reflect.ValueOf(&pv.Status), p.declared[policy.KindPersistentVolume], variant)
	return pv
}

func (p statusPerturber) pvc(pvc *corev1.PersistentVolumeClaim, variant int) *corev1.PersistentVolumeClaim {
	if pvc == nil {
		return nil
	}
	pvc = pvc.DeepCopy()
	perturbStatus(p.t, policy.KindPersistentVolumeClaim, reflect.ValueOf(&pvc.Status), p.declared[policy.KindPersistentVolumeClaim], variant)
	return pvc
}

// other is the variant the old object of a review gets: not the new object's, so that a write
// that changes an undeclared field is tried too.
func (p statusPerturber) other() int {
	if p.variant < 0 {
		return p.variant
	}
	return 1 - p.variant
}

func (p statusPerturber) review(r *policy.Review) *policy.Review {
	cp := *r
	cp.PV, cp.OldPV = p.pv(r.PV, p.variant), p.pv(r.OldPV, p.other())
	cp.PVC, cp.OldPVC = p.pvc(r.PVC, p.variant), p.pvc(r.OldPVC, p.other())
	return &cp
}

func (p statusPerturber) object(obj any) any {
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		return p.pv(o, p.variant)
	case *corev1.PersistentVolumeClaim:
		return p.pvc(o, p.variant)
	}
	return obj
}

// perturbedView is a View whose volumes and claims have their undeclared status fields changed.
type perturbedView struct {
	policy.View
	p statusPerturber
}

func (v perturbedView) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	pv, err := v.View.PersistentVolume(name)
	return v.p.pv(pv, v.p.variant), err
}

func (v perturbedView) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	pvc, err := v.View.PersistentVolumeClaim(namespace, name)
	return v.p.pvc(pvc, v.p.variant), err
}

func (v perturbedView) claims(list []*corev1.PersistentVolumeClaim, err error) ([]*corev1.PersistentVolumeClaim, error) {
	out := make([]*corev1.PersistentVolumeClaim, 0, len(list))
	for _, pvc := range list {
		out = append(out, v.p.pvc(pvc, v.p.variant))
	}
	return out, err
}

func (v perturbedView) ClaimsNamingVolume(volumeName string) ([]*corev1.PersistentVolumeClaim, error) {
	return v.claims(v.View.ClaimsNamingVolume(volumeName))
}

func (v perturbedView) VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error) {
	list, err := v.View.VolumesClaiming(namespace, name)
	out := make([]*corev1.PersistentVolume, 0, len(list))
	for _, pv := range list {
		out = append(out, v.p.pv(pv, v.p.variant))
	}
	return out, err
}

func (v perturbedView) ClaimWaitingForData(uid types.UID) (*corev1.PersistentVolumeClaim, error) {
	pvc, err := v.View.ClaimWaitingForData(uid)
	return v.p.pvc(pvc, v.p.variant), err
}

// findingsText is what a rule's findings say, for comparing two runs.
func findingsText(found []policy.Finding, err error) string {
	var b strings.Builder
	for _, f := range found {
		fmt.Fprintf(&b, "%s %s %s %s\n", f.Action, f.Object, f.Field, f.String())
	}
	if err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
	}
	return b.String()
}

// checkStatusReads holds a rule to its StatusReads: run alone on an admission review (admit) or
// an audited object (audit), it finds the same whatever the status fields it does not declare
// hold, on the object, its old version and every volume and claim it reads through the view. The
// webhooks' matchConditions skip the status writes that change only such fields, which is sound
// only while this holds.
func checkStatusReads(t *testing.T, rule policy.Rule, cfg *policy.Config, v policy.View, admit *policy.Review, audit any, now time.Time) {
	t.Helper()
	e := policy.NewEngineWith(cfg, []policy.Rule{rule})
	run := func(p *statusPerturber) string {
		view, r, obj := v, admit, audit
		if p != nil {
			view = perturbedView{View: v, p: *p}
			if r != nil {
				r = p.review(r)
			}
			obj = p.object(obj)
		}
		if r != nil {
			d, err := e.Admit(r, view)
			return findingsText(slices.Concat(d.Deny, d.Warn, d.Audit), err)
		}
		return findingsText(e.AuditObject(obj, view, now))
	}
	want := run(nil)
	for _, variant := range []int{-1, 0, 1} {
		got := run(&statusPerturber{t: t, declared: rule.StatusReads, variant: variant})
		if got != want {
			t.Errorf("%s %s reads a status field it does not declare (StatusReads %v): with the others changed (variant %d) it finds\n%s\ninstead of\n%s",
				rule.ID, rule.Name, rule.StatusReads, variant, got, want)
		}
	}
}

// webhookMatches evaluates the matchConditions the chart gives the validating webhook of the
// review's kind (policy.WebhookMatchConditions over the catalogue) with the apiserver's CEL
// environment: whether the apiserver would send the review to pvguard.
func webhookMatches(r *policy.Review) (bool, error) {
	env, err := celEnv()
	if err != nil {
		return false, err
	}
	vars, err := celVars(r)
	if err != nil {
		return false, err
	}
	if r.SubResource != "" { // the apiserver's request omits an empty subResource, as its JSON does
		vars["request"].(map[string]any)["subResource"] = r.SubResource
	}
	for _, mc := range policy.WebhookMatchConditions(policy.Catalogue(), r.Kind) {
		prg, err := celProgram(env, mc.Expression)
		if err != nil {
			return false, err
		}
		out, _, err := prg.Eval(vars)
		if err != nil {
			return false, fmt.Errorf("evaluating matchCondition %s: %w", mc.Name, err)
		}
		if out.Value() != true {
			return false, nil
		}
	}
	return true, nil
}

// checkNoOpWrite holds the webhooks' generated matchConditions to the engine on a review's
// objects. The review itself: the conditions evaluate without error, and a write they keep from
// pvguard is one the whole catalogue admits without a word. And a status write of each object
// (before the review's write and after it) that changes only status fields no rule judging its
// kind declares (every undeclared field given other values): the conditions keep it from
// pvguard, and the catalogue admits it without a word.
func checkNoOpWrite(t *testing.T, cfg *policy.Config, v policy.View, r *policy.Review) {
	t.Helper()
	e := policy.NewEngine(cfg)
	if r.Kind == policy.KindPersistentVolume || r.Kind == policy.KindPersistentVolumeClaim {
		sent, err := webhookMatches(r)
		if err != nil {
			t.Fatalf("the webhook's matchConditions on %s: %v", r.Object(), err)
		}
		if !sent {
			d, err := e.Admit(r, v)
			if err != nil || len(d.Deny)+len(d.Warn) > 0 {
				t.Errorf("the webhook's matchConditions keep from pvguard a write it answers with denials %v, warnings %v, error %v", d.Deny, d.Warn, err)
			}
		}
	}
	declared := map[policy.Kind][]string{
		policy.KindPersistentVolume:      policy.StatusReadsOf(policy.Catalogue(), policy.KindPersistentVolume),
		policy.KindPersistentVolumeClaim: policy.StatusReadsOf(policy.Catalogue(), policy.KindPersistentVolumeClaim),
	}
	p := statusPerturber{t: t, declared: declared}
	for _, obj := range []any{r.OldPV, r.PV, r.OldPVC, r.PVC} {
		noop := &policy.Review{Operation: policy.OperationUpdate, SubResource: "status", User: r.User}
		switch o := obj.(type) {
		case *corev1.PersistentVolume:
			if o == nil {
				continue
			}
			noop.Kind, noop.OldPV, noop.PV = policy.KindPersistentVolume, o, p.pv(o, 0)
		case *corev1.PersistentVolumeClaim:
			if o == nil {
				continue
			}
			noop.Kind, noop.OldPVC, noop.PVC = policy.KindPersistentVolumeClaim, o, p.pvc(o, 0)
		}
		sent, err := webhookMatches(noop)
		if err != nil || sent {
			t.Errorf("a status write of %s that changes only fields no rule reads: sent to pvguard %v, error %v", noop.Object(), sent, err)
		}
		d, err := e.Admit(noop, v)
		if err != nil || len(d.Deny)+len(d.Warn) > 0 {
			t.Errorf("a status write of %s that changes only fields no rule reads: denials %v, warnings %v, error %v", noop.Object(), d.Deny, d.Warn, err)
		}
	}
}

// TestMatchConditionsOnExploredWrites: every write of the sequence explorer (pvguard's binder's
// and upstream's bind sequences, the components' and the people's writes it interleaves) that
// the webhooks' generated matchConditions would keep from pvguard is one the engine admits
// without a word, and each of them evaluates without error; and a status write of any object of
// the states it reaches that changes only undeclared status fields is kept from pvguard.
func TestMatchConditionsOnExploredWrites(t *testing.T) {
	cfg := policy.DefaultConfig()
	e := policy.NewEngine(cfg)
	var writes, kept int
	for seed := range uint64(*seqRuns) {
		for _, tr := range []sequence.Trace{sequence.Explore(e, *seqSeed+seed), sequence.ExploreUpstream(e, *seqSeed+seed)} {
			for _, o := range tr.Outcomes {
				if o.Review == nil || (o.Review.Kind != policy.KindPersistentVolume && o.Review.Kind != policy.KindPersistentVolumeClaim) {
					continue
				}
				writes++
				sent, err := webhookMatches(o.Review)
				if err != nil {
					t.Fatalf("the webhook's matchConditions on %s: %v", o.Review.Object(), err)
				}
				if !sent {
					kept++
				}
				checkNoOpWrite(t, cfg, o.Before.View(), o.Review)
			}
		}
	}
	if writes == 0 {
		t.Fatal("the explorer made no write of a volume or a claim")
	}
	t.Logf("%d explored writes of volumes and claims, %d of them kept from pvguard by the matchConditions", writes, kept)
}
