package policy_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

// Identities used across the rule tests.
var (
	admin     = policy.UserInfo{Username: "kubernetes-admin", Groups: []string{"system:masters"}}
	tenant    = policy.UserInfo{Username: "alice", Groups: []string{"team-a"}}
	binder    = policy.UserInfo{Username: "system:serviceaccount:kube-system:persistent-volume-binder"}
	scheduler = policy.UserInfo{Username: "system:kube-scheduler"}
	// unlistedProvisioner is an external provisioner on a default install: no config names it.
	unlistedProvisioner = policy.UserInfo{Username: "system:serviceaccount:csi-default:external-provisioner"}
	// provisioner is configured as a controller in provisionerConfig.
	provisioner = policy.UserInfo{Username: "system:serviceaccount:csi:csi-provisioner"}
)

// provisionerConfig names the external provisioner as a controller identity.
func provisionerConfig() *policy.Config {
	c, err := policy.ParseConfig([]byte("controllers:\n  serviceAccounts: [csi/csi-provisioner]\n"))
	if err != nil {
		panic(err)
	}
	return c
}

func pvCreate(u policy.UserInfo, pv *corev1.PersistentVolume) *policy.Review {
	return &policy.Review{Kind: policy.KindPersistentVolume, Operation: policy.OperationCreate, User: u, PV: pv}
}

func pvUpdate(u policy.UserInfo, old, pv *corev1.PersistentVolume) *policy.Review {
	return &policy.Review{Kind: policy.KindPersistentVolume, Operation: policy.OperationUpdate, User: u, PV: pv, OldPV: old}
}

// pvStatus is an update of the status subresource, as the binder's second and fourth writes.
func pvStatus(u policy.UserInfo, old, pv *corev1.PersistentVolume) *policy.Review {
	r := pvUpdate(u, old, pv)
	r.SubResource = "status"
	return r
}

func pvcCreate(u policy.UserInfo, pvc *corev1.PersistentVolumeClaim) *policy.Review {
	return &policy.Review{Kind: policy.KindPersistentVolumeClaim, Operation: policy.OperationCreate, User: u, PVC: pvc}
}

func pvcUpdate(u policy.UserInfo, old, pvc *corev1.PersistentVolumeClaim) *policy.Review {
	return &policy.Review{Kind: policy.KindPersistentVolumeClaim, Operation: policy.OperationUpdate, User: u, PVC: pvc, OldPVC: old}
}

func pvcStatus(u policy.UserInfo, old, pvc *corev1.PersistentVolumeClaim) *policy.Review {
	r := pvcUpdate(u, old, pvc)
	r.SubResource = "status"
	return r
}

func scCreate(u policy.UserInfo, sc *storagev1.StorageClass) *policy.Review {
	return &policy.Review{Kind: policy.KindStorageClass, Operation: policy.OperationCreate, User: u, SC: sc}
}

func scUpdate(u policy.UserInfo, old, sc *storagev1.StorageClass) *policy.Review {
	return &policy.Review{Kind: policy.KindStorageClass, Operation: policy.OperationUpdate, User: u, SC: sc, OldSC: old}
}

// ruleCase is one row of a rule's table test.
type ruleCase struct {
	name   string
	review *policy.Review
	view   *testobj.View
	// config defaults to policy.DefaultConfig().
	config *policy.Config
	// want lists the field of each expected finding, in order; empty means allowed.
	want []string
	// wantText, when set, must appear in the first finding's rendered message.
	wantText string
}

// runRuleCases checks one rule through the engine, so the rule's registration, action and
// exemptions are exercised exactly as admission uses them.
func runRuleCases(t *testing.T, id policy.RuleID, cases []ruleCase) {
	t.Helper()
	rule, ok := policy.LookupRule(string(id))
	if !ok {
		t.Fatalf("rule %s is not in the catalogue", id)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.config
			if cfg == nil {
				cfg = policy.DefaultConfig()
			}
			view := tc.view
			if view == nil {
				view = testobj.NewView()
			}
			d, err := policy.NewEngine(cfg).Admit(tc.review, view)
			if err != nil {
				t.Fatalf("Admit: %v", err)
			}
			var got []policy.Finding
			for _, f := range append(append(append([]policy.Finding{}, d.Deny...), d.Warn...), d.Audit...) {
				if f.Rule == id {
					got = append(got, f)
				}
			}
			var fields []string
			for _, f := range got {
				fields = append(fields, f.Field)
				if f.Name != rule.Name || f.Message.IsZero() || f.Object.Name == "" {
					t.Errorf("finding not filled in: %+v", f)
				}
			}
			if strings.Join(fields, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("findings on fields %q, want %q; findings: %v", fields, tc.want, got)
			}
			if tc.wantText != "" && !strings.Contains(got[0].String(), tc.wantText) {
				t.Errorf("message %q does not contain %q", got[0].String(), tc.wantText)
			}
			for _, f := range got {
				checkFixes(t, cfg, tc.review, view.State, f)
			}
			checkReads(t, rule, func(e *policy.Engine, v policy.View) { _, _ = e.Admit(tc.review, v) }, cfg, view)
			checkStatusReads(t, rule, cfg, view, tc.review, nil, time.Time{})
			checkCacheShape(t, rule, cfg, view, tc.review, nil, time.Time{})
			checkNoOpWrite(t, cfg, view, tc.review)
			checkRedaction(t, policy.NewEngine(cfg), tc.review, view)
			refused := false
			for _, f := range d.Deny {
				refused = refused || f.Rule == id
			}
			checkCELForms(t, id, cfg, tc.review, view, refused)
		})
	}
}

// checkReads runs one rule alone (an engine of that rule only) on a view that records what is
// read through it, and fails when the rule reads a kind of object it does not declare in Reads.
func checkReads(t *testing.T, rule policy.Rule, run func(*policy.Engine, policy.View), cfg *policy.Config, v policy.View) {
	t.Helper()
	rv := &readsView{View: v}
	run(policy.NewEngineWith(cfg, []policy.Rule{rule}), rv)
	for _, k := range rv.read {
		if !slices.Contains(rule.Reads, k) {
			t.Errorf("%s %s reads a %s, but its Reads are %v", rule.ID, rule.Name, k, rule.Reads)
		}
	}
}

// readsView records the kinds of object read through a View.
type readsView struct {
	policy.View
	read []policy.Kind
}

func (v *readsView) saw(k policy.Kind) {
	if !slices.Contains(v.read, k) {
		v.read = append(v.read, k)
	}
}

func (v *readsView) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	v.saw(policy.KindPersistentVolume)
	return v.View.PersistentVolume(name)
}

func (v *readsView) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	v.saw(policy.KindPersistentVolumeClaim)
	return v.View.PersistentVolumeClaim(namespace, name)
}

func (v *readsView) ClaimsNamingVolume(volumeName string) ([]*corev1.PersistentVolumeClaim, error) {
	v.saw(policy.KindPersistentVolumeClaim)
	return v.View.ClaimsNamingVolume(volumeName)
}

func (v *readsView) VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error) {
	v.saw(policy.KindPersistentVolume)
	return v.View.VolumesClaiming(namespace, name)
}

func (v *readsView) ClaimWaitingForData(uid types.UID) (*corev1.PersistentVolumeClaim, error) {
	v.saw(policy.KindPersistentVolumeClaim)
	return v.View.ClaimWaitingForData(uid)
}

func (v *readsView) Node(name string) (*corev1.Node, error) {
	v.saw(policy.KindNode)
	return v.View.Node(name)
}

func (v *readsView) ListNodes() ([]*corev1.Node, error) {
	v.saw(policy.KindNode)
	return v.View.ListNodes()
}

func (v *readsView) PodsUsingClaim(namespace, claim string) ([]*corev1.Pod, error) {
	v.saw(policy.KindPod)
	return v.View.PodsUsingClaim(namespace, claim)
}

func (v *readsView) StorageClasses() ([]*storagev1.StorageClass, error) {
	v.saw(policy.KindStorageClass)
	return v.View.StorageClasses()
}

func (v *readsView) ListKind(kind policy.Kind) ([]runtime.Object, error) {
	v.saw(kind)
	return v.View.ListKind(kind)
}

func mustConfig(t *testing.T, yaml string) *policy.Config {
	t.Helper()
	c, err := policy.ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	return c
}

// bindWriteCases are the upstream binder's four bind writes for a pair (testobj.BindSteps), each
// of which every rule must admit.
func bindWriteCases(b testobj.Bind, view *testobj.View) []ruleCase {
	return []ruleCase{
		{name: "binder write 1 (PV spec) is allowed", review: pvUpdate(binder, b.PV, b.PVSpec), view: view},
		{name: "binder write 2 (PV status) is allowed", review: pvStatus(binder, b.PVSpec, b.PVStatus), view: view},
		{name: "binder write 3 (PVC spec) is allowed", review: pvcUpdate(binder, b.PVC, b.PVCSpec), view: view},
		{name: "binder write 4 (PVC status) is allowed", review: pvcStatus(binder, b.PVCSpec, b.PVCStatus), view: view},
	}
}
