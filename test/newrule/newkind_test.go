package newrule

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/clusterview"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

// attributesClassExists is the throwaway rule that reads a kind no typed read of the View offers:
// VolumeAttributesClasses, which it lists with policy.ListOf. Nothing but this function and the
// kind's line in clusterstate's table of readable kinds makes pvguard read them.
func attributesClassExists() policy.Rule {
	return policy.Rule{
		ID:          "PVG098",
		Name:        "attributes-class-exists",
		Default:     policy.ActionDeny,
		Judges:      policy.JudgesState,
		Kinds:       []policy.Kind{policy.KindPersistentVolumeClaim},
		Reads:       []policy.Kind{"VolumeAttributesClass"},
		ConfirmLive: []string{"spec.volumeAttributesClassName"},
		Summary:     "a claim names a VolumeAttributesClass that exists",
		Check: func(r *policy.Review, v policy.View, _ *policy.Config) ([]policy.Finding, error) {
			name := r.PVC.Spec.VolumeAttributesClassName
			if name == nil || *name == "" {
				return nil, nil
			}
			classes, err := policy.ListOf[*storagev1.VolumeAttributesClass](v, "VolumeAttributesClass")
			if err != nil {
				return nil, err
			}
			for _, c := range classes {
				if c.Name == *name {
					return nil, nil
				}
			}
			return []policy.Finding{{Field: "spec.volumeAttributesClassName",
				Message: policy.Textf("%s names VolumeAttributesClass %s, which does not exist", r.Object(), policy.Word(*name)),
				Hint:    policy.Plain("create the class or name one that exists")}}, nil
		},
	}
}

func attributesClass(name string) *storagev1.VolumeAttributesClass {
	return &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: name}, DriverName: "csi.example.com"}
}

func TestARuleReadingANewKindIsPickedUpEverywhere(t *testing.T) {
	rules := append(policy.Catalogue(), attributesClassExists())
	engine := policy.NewEngineWith(nil, rules)
	gold, late := attributesClass("gold"), attributesClass("late") // late: in the apiserver, not yet in the cache
	silverClaim := testobj.PVC("team-a", "silver", testobj.ClaimVolumeAttributesClass("silver"))
	lateClaim := testobj.PVC("team-a", "late", testobj.ClaimVolumeAttributesClass("late"))
	goldClaim := testobj.PVC("team-a", "gold", testobj.ClaimVolumeAttributesClass("gold"))

	t.Run("the cache starts an informer for the kind", func(t *testing.T) {
		started := func(rules []policy.Rule) bool {
			c := &informers{started: map[reflect.Type]toolscache.SharedIndexInformer{}}
			if err := clusterview.SetupIndexes(context.Background(), c, policy.ReadKinds(rules)); err != nil {
				t.Fatal(err)
			}
			_, ok := c.started[reflect.TypeOf(&storagev1.VolumeAttributesClass{})]
			return ok
		}
		if !started(rules) {
			t.Error("no informer for VolumeAttributesClasses, which the rule reads")
		}
		if started(policy.Catalogue()) {
			t.Error("an informer for VolumeAttributesClasses, which no shipped rule reads (pvguard may not list them)")
		}
	})

	t.Run("admission and its metrics", func(t *testing.T) {
		h, reg := admissionServer(engine, gold)
		if resp := admit(t, h, silverClaim); resp.Allowed || !strings.Contains(resp.Result.Message, "[PVG098 attributes-class-exists] PersistentVolumeClaim team-a/silver names VolumeAttributesClass silver") {
			t.Errorf("creating claim silver: allowed %v, %+v", resp.Allowed, resp.Result)
		}
		if resp := admit(t, h, goldClaim); !resp.Allowed {
			t.Errorf("creating claim gold: refused: %+v", resp.Result)
		}
		if n := metric(t, reg, "pvguard_admission_findings_total", "PVG098"); n != 1 {
			t.Errorf("pvguard_admission_findings_total{rule=PVG098} = %v, want 1", n)
		}
	})

	t.Run("audit, confirmed live", func(t *testing.T) {
		claims := []client.Object{silverClaim.DeepCopy(), lateClaim.DeepCopy(), goldClaim.DeepCopy()}
		cached := fake.NewClientBuilder().WithObjects(append(claims, gold.DeepCopy())...).Build()
		live := fake.NewClientBuilder().WithObjects(append(claims, gold.DeepCopy(), late.DeepCopy())...).Build()
		reg := prometheus.NewRegistry()
		now := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
		r := audit.NewRunner(audit.RunnerOptions{Cache: cached, Live: clusterview.New(cached, live).LiveView,
			Engine: func() *policy.Engine { return engine }, Registry: reg, Log: logr.Discard(), Now: func() time.Time { return now }})
		if err := r.RunOnce(context.Background()); err != nil {
			t.Fatalf("RunOnce: %v", err)
		}
		// Claim late's class is missing only from the cache: the live list the rule asks for clears it.
		if got := claimsFound(r.Latest().Findings); got != "team-a/silver" {
			t.Errorf("PVG098 findings on %q, want on team-a/silver only", got)
		}
		if n := metric(t, reg, "pvguard_audit_findings", "PVG098"); n != 1 {
			t.Errorf("pvguard_audit_findings{rule=PVG098} = %v, want 1", n)
		}

		// An incremental audit lists the kind through its view too.
		r.Changed(lateClaim)
		if err := r.RunPending(context.Background()); err != nil {
			t.Fatalf("incremental audit: %v", err)
		}
		if got := claimsFound(r.Latest().Findings); got != "team-a/silver" {
			t.Errorf("after an incremental audit, PVG098 findings on %q, want on team-a/silver only", got)
		}

		// The offline audit has no live reads: the manifests are the whole truth.
		st := clusterstate.New([]*corev1.PersistentVolumeClaim{silverClaim, lateClaim, goldClaim}, nil, nil, nil).
			WithKind("VolumeAttributesClass", clusterstate.Runtime([]*storagev1.VolumeAttributesClass{gold}))
		offline, err := engine.Audit(st, now, nil)
		if err != nil || claimsFound(offline) != "team-a/late team-a/silver" {
			t.Errorf("offline audit: PVG098 on %q (%v), want team-a/late and team-a/silver", claimsFound(offline), err)
		}
	})
}

// claimsFound lists the claims of the PVG098 findings, sorted.
func claimsFound(found any) string {
	var out []string
	switch list := found.(type) {
	case []policy.Finding:
		for _, f := range list {
			if f.Rule == "PVG098" {
				out = append(out, f.Object.Namespace+"/"+f.Object.Name)
			}
		}
	case []audit.Finding:
		for _, f := range list {
			if f.Rule == "PVG098" {
				out = append(out, f.Namespace+"/"+f.Object)
			}
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// informers is an informer cache that records the informers asked for, never starting them: all
// that clusterview.SetupIndexes uses.
type informers struct {
	cache.Cache
	started map[reflect.Type]toolscache.SharedIndexInformer
}

func (c *informers) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	t := reflect.TypeOf(obj)
	if _, ok := c.started[t]; !ok {
		c.started[t] = toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, obj, 0, toolscache.Indexers{})
	}
	return c.started[t], nil
}
