package policy_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

// Fuzz targets for the policy entry points: Admit, AuditObject and Audit, ParseConfig and the
// mutations. Objects arrive as JSON and are decoded into the typed API objects the webhook and
// the audit hand to the engine; input that does not decode is skipped, as the webhook refuses it
// before the engine sees it. The seeds are objects from the rule tables; inputs the fuzzer found
// are kept under testdata/fuzz/<target>/ and run with the seeds on every `go test`.
//
//	go test ./policy/ -run '^$' -fuzz '^FuzzAdmit$' -fuzztime 2m -parallel 1

var fuzzNow = time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)

// fuzzWorld is the JSON shape of the related objects a fuzzed review is judged against, and of
// the cluster state a fuzzed audit judges.
type fuzzWorld struct {
	PVs     []*corev1.PersistentVolume      `json:"pvs,omitempty"`
	PVCs    []*corev1.PersistentVolumeClaim `json:"pvcs,omitempty"`
	Classes []*storagev1.StorageClass       `json:"classes,omitempty"`
	Nodes   []*corev1.Node                  `json:"nodes,omitempty"`
}

// state turns decoded world JSON into a State. JSON nulls in the lists are dropped: a
// cache or a manifest directory never yields a nil object.
func (w fuzzWorld) state() *clusterstate.State {
	return clusterstate.New(nonNil(w.PVCs), nonNil(w.PVs), nonNil(w.Classes), nonNil(w.Nodes))
}

func nonNil[T any](in []*T) []*T {
	var out []*T
	for _, o := range in {
		if o != nil {
			out = append(out, o)
		}
	}
	return out
}

func (w fuzzWorld) deepCopy() fuzzWorld {
	return fuzzWorld{PVs: copyAll(w.PVs), PVCs: copyAll(w.PVCs), Classes: copyAll(w.Classes), Nodes: copyAll(w.Nodes)}
}

func copyAll[T interface{ DeepCopy() T }](in []T) []T {
	if in == nil {
		return nil
	}
	out := make([]T, len(in))
	for i, o := range in {
		out[i] = o.DeepCopy()
	}
	return out
}

func decodeWorld(data []byte) (fuzzWorld, bool) {
	var w fuzzWorld
	if len(data) == 0 {
		return w, true
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return w, false
	}
	return w, true
}

// decodeObject decodes JSON into a T; empty input is an absent object (nil, true).
func decodeObject[T any](data []byte) (*T, bool) {
	if len(data) == 0 {
		return nil, true
	}
	obj := new(T)
	if err := json.Unmarshal(data, obj); err != nil {
		return nil, false
	}
	return obj, true
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

// Flags of a fuzzed review, packed into one byte so the fuzzer can flip them.
const (
	fuzzOpMask    = 0x03 // CREATE, UPDATE, DELETE, or an operation the apiserver never sends
	fuzzStatus    = 0x04 // the status subresource
	fuzzDryRun    = 0x08
	fuzzAltConfig = 0x10 // fuzzConfig instead of the default config
)

var fuzzOps = [...]policy.Operation{policy.OperationCreate, policy.OperationUpdate, policy.OperationDelete, "CONNECT"}

var fuzzKinds = [...]policy.Kind{policy.KindPersistentVolume, policy.KindPersistentVolumeClaim, policy.KindStorageClass}

// fuzzConfig names controllers and renames the pvguard annotations, so the branches that read
// the config are reached too.
const fuzzConfig = `controllers:
  serviceAccounts: [csi/csi-provisioner]
  groups: [provisioners]
grantAnnotation: example.com/grant
reclaimConfirmAnnotation: example.com/confirm
mutation:
  alignPreboundClaimClass: true
rules:
  PVG015: {action: deny}
  storage-class-match: {action: audit}
  PVG017: {action: off}
  PVG010: {exemptions: {namespaces: [ci-*]}}
`

// admitSeed is one review from the rule tables, in the fuzz target's encoding.
type admitSeed struct {
	kind     policy.Kind
	flags    uint8
	user     string
	old, cur any
	world    fuzzWorld
}

func (s admitSeed) add(f *testing.F) {
	kind := uint8(slices.Index(fuzzKinds[:], s.kind))
	enc := func(o any) []byte {
		if o == nil || reflect.ValueOf(o).IsNil() {
			return nil
		}
		return mustJSON(o)
	}
	f.Add(kind, s.flags, s.user, enc(s.old), enc(s.cur), mustJSON(s.world))
}

// admitSeeds are reviews from the rule tables: the binder's four writes, and a write that each
// rule refuses or reports.
func admitSeeds() []admitSeed {
	const create, update, del = 0, 1, 2
	tenantUser := "alice|team-a"
	binderUser := "system:serviceaccount:kube-system:persistent-volume-binder"
	block := corev1.PersistentVolumeBlock

	claim := testobj.PVC("team-a", "data", testobj.ClaimMeta(testobj.Finalizers("kubernetes.io/pvc-protection")))
	free := testobj.PV("pv-7", testobj.Phase(corev1.VolumeAvailable), testobj.PVMeta(testobj.Finalizers("kubernetes.io/pv-protection")))
	b := testobj.BindSteps(free, claim)
	pair := fuzzWorld{PVs: []*corev1.PersistentVolume{b.PVStatus}, PVCs: []*corev1.PersistentVolumeClaim{b.PVCStatus}}

	node := testobj.Node("node-1", map[string]string{"topology.kubernetes.io/zone": "zone-a"})
	selected := testobj.ClaimMeta(testobj.Annotation(storage.AnnSelectedNode, "node-1"))
	otherZone := testobj.PV("pv-z", testobj.NodeAffinity("topology.kubernetes.io/zone", "zone-b"))
	badSelector := testobj.PV("pv-bad", testobj.NodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "k", Operator: "Sideways", Values: []string{"v"}}},
	}}}))

	bound := testobj.PV("pv-b", testobj.BoundTo(claim), testobj.Capacity("10Gi"),
		testobj.PVMeta(testobj.Finalizers("kubernetes.io/pv-protection")))
	boundClaim := testobj.PVCWith(claim, testobj.ClaimBoundTo("pv-b"), testobj.ClaimStatusCapacity("10Gi"))
	boundWorld := fuzzWorld{PVs: []*corev1.PersistentVolume{bound}, PVCs: []*corev1.PersistentVolumeClaim{boundClaim}}

	fast := testobj.StorageClass("fast", "csi.example.com", testobj.DefaultClass)
	slow := testobj.StorageClass("slow", "csi.example.com")

	return []admitSeed{
		{kind: policy.KindPersistentVolume, flags: update, user: binderUser, old: b.PV, cur: b.PVSpec, world: pair},
		{kind: policy.KindPersistentVolume, flags: update | fuzzStatus, user: binderUser, old: b.PVSpec, cur: b.PVStatus, world: pair},
		{kind: policy.KindPersistentVolumeClaim, flags: update, user: binderUser, old: b.PVC, cur: b.PVCSpec, world: pair},
		{kind: policy.KindPersistentVolumeClaim, flags: update | fuzzStatus, user: binderUser, old: b.PVCSpec, cur: b.PVCStatus, world: pair},
		// PVG001 and PVG010: a Block claim naming a Filesystem volume it was not offered.
		{kind: policy.KindPersistentVolumeClaim, flags: create, user: tenantUser,
			cur:   testobj.PVC("team-b", "blk", testobj.ClaimVolumeMode(block), testobj.VolumeName("pv-7")),
			world: fuzzWorld{PVs: []*corev1.PersistentVolume{free}}},
		// PVG002: a claimRef uid that is not the live claim's.
		{kind: policy.KindPersistentVolume, flags: update, user: tenantUser,
			old: bound, cur: testobj.PVWith(bound, testobj.ClaimRefUID("other-uid")), world: boundWorld},
		// PVG003: volumeName cleared after bind-completed.
		{kind: policy.KindPersistentVolumeClaim, flags: update | fuzzDryRun, user: tenantUser,
			old: boundClaim, cur: testobj.PVCWith(boundClaim, testobj.VolumeName("")), world: boundWorld},
		// PVG004: a second claim naming a bound volume.
		{kind: policy.KindPersistentVolumeClaim, flags: create, user: tenantUser,
			cur: testobj.PVC("team-a", "second", testobj.VolumeName("pv-b")), world: boundWorld},
		// PVG005 and PVG006: a bound volume shrunk and losing the claim's access mode.
		{kind: policy.KindPersistentVolume, flags: update | fuzzAltConfig, user: "kubernetes-admin|system:masters",
			old: bound, cur: testobj.PVWith(bound, testobj.Capacity("1Mi"), testobj.AccessModes(corev1.ReadOnlyMany)), world: boundWorld},
		// PVG007 and PVG008: class and selector mismatch at bind, with an invalid selector.
		{kind: policy.KindPersistentVolumeClaim, flags: create | fuzzAltConfig, user: tenantUser,
			cur: testobj.PVC("team-a", "sel", testobj.ClaimClass("slow"), testobj.VolumeName("pv-fast"),
				testobj.SelectorExpression("tier", "Sideways", "gold")),
			world: fuzzWorld{PVs: []*corev1.PersistentVolume{testobj.PV("pv-fast", testobj.Class("fast"),
				testobj.PVMeta(testobj.Label("tier", "silver"), testobj.Annotation(policy.DefaultGrantAnnotation, "team-*, ci-1")))},
				Classes: []*storagev1.StorageClass{fast, slow}}},
		// PVG009: a scheduled claim naming a volume out of reach, and one with an invalid affinity.
		{kind: policy.KindPersistentVolumeClaim, flags: create, user: tenantUser,
			cur:   testobj.PVC("team-a", "zoned", selected, testobj.VolumeName("pv-z")),
			world: fuzzWorld{PVs: []*corev1.PersistentVolume{otherZone}, Nodes: []*corev1.Node{node}}},
		{kind: policy.KindPersistentVolume, flags: create, user: "system:serviceaccount:csi:csi-provisioner",
			cur: testobj.PVWith(badSelector, testobj.ClaimRef("team-a", "zoned", "uid-team-a-zoned")),
			world: fuzzWorld{PVCs: []*corev1.PersistentVolumeClaim{testobj.PVC("team-a", "zoned", selected, testobj.VolumeName("pv-bad"))},
				Nodes: []*corev1.Node{node}}},
		// PVG011: Retain to Delete on a bound volume without confirmation.
		{kind: policy.KindPersistentVolume, flags: update, user: tenantUser,
			old: bound, cur: testobj.PVWith(bound, testobj.Reclaim(corev1.PersistentVolumeReclaimDelete)), world: boundWorld},
		// PVG012 and PVG013: a user removing protection and binder annotations.
		{kind: policy.KindPersistentVolumeClaim, flags: update, user: tenantUser,
			old: boundClaim, cur: testobj.PVCWith(boundClaim, testobj.ClaimMeta(testobj.Finalizers(), testobj.NoAnnotation(storage.AnnBindCompleted))),
			world: boundWorld},
		// PVG014 and PVG015: a claimRef without namespace or kind, and Bound without a uid.
		{kind: policy.KindPersistentVolume, flags: create, user: tenantUser,
			cur: testobj.PV("pv-shape", testobj.Phase(corev1.VolumeBound), testobj.ClaimRef("", "c", ""),
				testobj.EditClaimRef(func(r *corev1.ObjectReference) { r.Kind, r.APIVersion = "Pod", "v2" }))},
		// PVG016: credentials in CSI volume attributes.
		{kind: policy.KindPersistentVolume, flags: create, user: tenantUser,
			cur: testobj.PV("pv-csi", testobj.CSI("csi.example.com", "h-1", map[string]string{
				"keyring": "AQBxyz==", "secretName": "ok", "adminPassword": "hunter2", "pool": "rbd"}))},
		// PVG017: a second default class; and a class update.
		{kind: policy.KindStorageClass, flags: create, user: tenantUser,
			cur: testobj.SCWith(slow, testobj.DefaultClass), world: fuzzWorld{Classes: []*storagev1.StorageClass{fast}}},
		{kind: policy.KindStorageClass, flags: update, user: tenantUser,
			old: slow, cur: testobj.SCWith(slow, testobj.SCMeta(testobj.Annotation(storage.AnnBetaDefaultClass, "true"))),
			world: fuzzWorld{Classes: []*storagev1.StorageClass{fast, slow}}},
		// PVG018: a claim naming a volume of another VolumeAttributesClass.
		{kind: policy.KindPersistentVolumeClaim, flags: create, user: tenantUser,
			cur:   testobj.PVC("team-b", "gold", testobj.ClaimVolumeAttributesClass("gold"), testobj.VolumeName("pv-silver")),
			world: fuzzWorld{PVs: []*corev1.PersistentVolume{testobj.PV("pv-silver", testobj.VolumeAttributesClass("silver"))}}},
		// Deletes are never judged.
		{kind: policy.KindPersistentVolume, flags: del, user: tenantUser, old: bound, world: boundWorld},
	}
}

// FuzzAdmit evaluates a fuzzed write (kind, operation, subresource, dry run, requester, old and
// new object) against a fuzzed set of related objects.
func FuzzAdmit(f *testing.F) {
	for _, s := range admitSeeds() {
		s.add(f)
	}
	engines := fuzzEngines(f)
	f.Fuzz(func(t *testing.T, kind, flags uint8, user string, oldJSON, curJSON, worldJSON []byte) {
		r, ok := decodeReview(fuzzKinds[int(kind)%len(fuzzKinds)], fuzzOps[flags&fuzzOpMask], oldJSON, curJSON)
		if !ok {
			t.Skip("object does not decode")
		}
		world, ok := decodeWorld(worldJSON)
		if !ok {
			t.Skip("related objects do not decode")
		}
		name, groups, _ := strings.Cut(user, "|")
		r.User = policy.UserInfo{Username: name}
		if groups != "" {
			r.User.Groups = strings.Split(groups, "|")
		}
		if flags&fuzzStatus != 0 {
			r.SubResource = "status"
		}
		r.DryRun = flags&fuzzDryRun != 0
		engine := engines[0]
		if flags&fuzzAltConfig != 0 {
			engine = engines[1]
		}
		checkAdmit(t, engine, r, world)
	})
}

func fuzzEngines(tb testing.TB) [2]*policy.Engine {
	cfg, err := policy.ParseConfig([]byte(fuzzConfig))
	if err != nil {
		tb.Fatal(err)
	}
	return [2]*policy.Engine{policy.NewEngine(nil), policy.NewEngine(cfg)}
}

// decodeReview builds a review of a kind from old and new object JSON, as the webhook does.
func decodeReview(kind policy.Kind, op policy.Operation, oldJSON, curJSON []byte) (*policy.Review, bool) {
	r := &policy.Review{Kind: kind, Operation: op}
	var okOld, okCur bool
	switch kind {
	case policy.KindPersistentVolume:
		r.OldPV, okOld = decodeObject[corev1.PersistentVolume](oldJSON)
		r.PV, okCur = decodeObject[corev1.PersistentVolume](curJSON)
	case policy.KindPersistentVolumeClaim:
		r.OldPVC, okOld = decodeObject[corev1.PersistentVolumeClaim](oldJSON)
		r.PVC, okCur = decodeObject[corev1.PersistentVolumeClaim](curJSON)
	case policy.KindStorageClass:
		r.OldSC, okOld = decodeObject[storagev1.StorageClass](oldJSON)
		r.SC, okCur = decodeObject[storagev1.StorageClass](curJSON)
	}
	return r, okOld && okCur
}

func copyReview(r *policy.Review) *policy.Review {
	c := *r
	c.User.Groups = slices.Clone(r.User.Groups)
	c.PV, c.OldPV = r.PV.DeepCopy(), r.OldPV.DeepCopy()
	c.PVC, c.OldPVC = r.PVC.DeepCopy(), r.OldPVC.DeepCopy()
	c.SC, c.OldSC = r.SC.DeepCopy(), r.OldSC.DeepCopy()
	return &c
}

// hasObject reports whether a review carries the new object, or the old one.
func hasObject(r *policy.Review, old bool) bool {
	switch r.Kind {
	case policy.KindPersistentVolume:
		return pick(old, r.OldPV, r.PV) != nil
	case policy.KindPersistentVolumeClaim:
		return pick(old, r.OldPVC, r.PVC) != nil
	case policy.KindStorageClass:
		return pick(old, r.OldSC, r.SC) != nil
	}
	return false
}

func pick[T any](first bool, a, b *T) *T {
	if first {
		return a
	}
	return b
}

// checkAdmit asserts what holds for every review: the engine neither panics nor fails on a view
// that cannot fail; a review it cannot judge is an error, never an allowed write; every finding
// names its rule, field and object and sits under its rule's action; the decision does not depend
// on dry run, on a second evaluation, or on anything but the inputs, which it leaves alone; and a
// credential in CSI volume attributes never appears in a finding.
func checkAdmit(t *testing.T, engine *policy.Engine, r *policy.Review, w fuzzWorld) {
	t.Helper()
	before, worldBefore := copyReview(r), w.deepCopy()
	d, err := engine.Admit(r, w.state())
	switch {
	case r.Operation == policy.OperationDelete:
		if err != nil || !reflect.DeepEqual(d, policy.Decision{}) {
			t.Fatalf("a delete was judged: %+v, %v", d, err)
		}
		return
	case r.Operation != policy.OperationCreate && r.Operation != policy.OperationUpdate:
		if err == nil {
			t.Fatalf("operation %q is not a write pvguard judges, but Admit decided %+v", r.Operation, d)
		}
		return
	case !hasObject(r, false) || r.Operation == policy.OperationUpdate && !hasObject(r, true):
		if err == nil {
			t.Fatalf("%s of a %s without the object or the old object was decided %+v, want an error", r.Operation, r.Kind, d)
		}
		return
	case err != nil:
		t.Fatalf("Admit over a state failed: %v", err)
	}
	checkDecision(t, engine.Config(), d)
	checkRedaction(t, engine, copyReview(r), &testobj.View{State: w.deepCopy().state()})
	if !reflect.DeepEqual(r, before) || !reflect.DeepEqual(w, worldBefore) {
		t.Fatalf("Admit modified its inputs")
	}
	again, err := engine.Admit(copyReview(r), w.deepCopy().state())
	if err != nil || !reflect.DeepEqual(again, d) {
		t.Fatalf("Admit is not deterministic:\n first %+v\nsecond %+v (%v)", d, again, err)
	}
	// No rule reads an object by an empty name or namespace (a claimRef without them names no
	// claim): the webhook's live reads refuse those, and the error would stand in for PVG014's
	// finding and stop nothing else.
	strict := &testobj.View{State: w.state(), StrictNames: true}
	if other, err := engine.Admit(copyReview(r), strict); err != nil || !reflect.DeepEqual(other, d) {
		t.Fatalf("a view that refuses empty names changed the decision:\n%+v\n%+v (%v)", d, other, err)
	}
	dry := copyReview(r)
	dry.DryRun = !dry.DryRun
	if other, err := engine.Admit(dry, w.state()); err != nil || !reflect.DeepEqual(other, d) {
		t.Fatalf("dry run changed the decision:\n%+v\n%+v (%v)", d, other, err)
	}
	if r.Kind == policy.KindPersistentVolume && r.PV.Spec.CSI != nil && len(r.PV.Spec.CSI.VolumeAttributes) > 0 {
		secret := copyReview(r)
		const sentinel = "pvguard-fuzz-credential-value"
		for k := range secret.PV.Spec.CSI.VolumeAttributes {
			secret.PV.Spec.CSI.VolumeAttributes[k] = sentinel
		}
		ds, err := engine.Admit(secret, w.state())
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range allFindings(ds) {
			if strings.Contains(f.String()+f.Field, sentinel) {
				t.Fatalf("a CSI volume attribute value is reported: %s (%s)", f, f.Field)
			}
		}
	}
}

func allFindings(d policy.Decision) []policy.Finding {
	return slices.Concat(d.Deny, d.Warn, d.Audit)
}

// checkDecision asserts that each finding is filled in and filed under its rule's action.
func checkDecision(t *testing.T, cfg *policy.Config, d policy.Decision) {
	t.Helper()
	for _, group := range []struct {
		action   policy.Action
		findings []policy.Finding
	}{{policy.ActionDeny, d.Deny}, {policy.ActionWarn, d.Warn}, {policy.ActionAudit, d.Audit}} {
		for _, f := range group.findings {
			checkFinding(t, cfg, f)
			if rl, _ := policy.LookupRule(string(f.Rule)); !rl.Judges.AtAdmission() {
				t.Fatalf("rule %s judges a %s, yet is at admission: %s", f.Rule, rl.Judges, f)
			}
			if f.Action != group.action {
				t.Fatalf("%s finding filed under %s: %+v", f.Action, group.action, f)
			}
		}
	}
}

// checkFinding asserts that a finding names a rule of the catalogue with its configured action,
// the object, the field and what is wrong.
func checkFinding(t *testing.T, cfg *policy.Config, f policy.Finding) {
	t.Helper()
	rl, ok := policy.LookupRule(string(f.Rule))
	if !ok {
		t.Fatalf("finding for unknown rule %q: %+v", f.Rule, f)
	}
	if f.Name != rl.Name || f.Message.IsZero() || f.Field == "" || f.Object.Kind == "" {
		t.Fatalf("finding not filled in: %+v", f)
	}
	if want := cfg.ActionFor(&rl); f.Action != want || f.Action == policy.ActionOff {
		t.Fatalf("finding with action %q, rule %s is configured %q: %+v", f.Action, f.Rule, want, f)
	}
	if !strings.HasPrefix(f.String(), "["+string(f.Rule)+" "+f.Name+"] ") {
		t.Fatalf("finding renders as %q", f.String())
	}
}

// FuzzAudit audits a fuzzed cluster state at a fuzzed time, through Audit and through AuditObject.
func FuzzAudit(f *testing.F) {
	for _, s := range admitSeeds() {
		w := s.world.deepCopy()
		switch o := s.cur.(type) {
		case *corev1.PersistentVolume:
			w.PVs = append(w.PVs, o)
		case *corev1.PersistentVolumeClaim:
			w.PVCs = append(w.PVCs, o)
		case *storagev1.StorageClass:
			w.Classes = append(w.Classes, o)
		}
		f.Add(mustJSON(w), int32(0), s.flags&fuzzAltConfig != 0)
	}
	// The audit-only rules: a dangling claimRef, a lost claim, a misbound pair, an aging
	// Released volume and a Failed one.
	good := testobj.PVC("team-a", "good", testobj.ClaimBoundTo("pv-good"), testobj.ClaimPhase(corev1.ClaimBound))
	released := testobj.PV("pv-old", testobj.ClaimRef("team-a", "x", "u2"), testobj.Phase(corev1.VolumeReleased))
	at := metav1.NewTime(fuzzNow.Add(-8 * 24 * time.Hour))
	released.Status.LastPhaseTransitionTime = &at
	f.Add(mustJSON(fuzzWorld{
		PVs: []*corev1.PersistentVolume{testobj.PV("pv-good", testobj.BoundTo(good)), released,
			testobj.PV("pv-d", testobj.ClaimRef("team-a", "gone", "u1"), testobj.Phase(corev1.VolumeBound)),
			testobj.PV("pv-failed", testobj.Phase(corev1.VolumeFailed))},
		PVCs: []*corev1.PersistentVolumeClaim{good,
			testobj.PVC("team-b", "thief", testobj.ClaimBoundTo("pv-good")),
			testobj.PVC("team-a", "lost", testobj.ClaimPhase(corev1.ClaimLost)),
			testobj.PVC("team-a", "orphan", testobj.ClaimBoundTo("pv-missing"))},
	}), int32(-200), false)

	engines := fuzzEngines(f)
	f.Fuzz(func(t *testing.T, worldJSON []byte, hours int32, altConfig bool) {
		w, ok := decodeWorld(worldJSON)
		if !ok {
			t.Skip("state does not decode")
		}
		engine := engines[0]
		if altConfig {
			engine = engines[1]
		}
		checkAudit(t, engine, w, fuzzNow.Add(time.Duration(hours)*time.Hour))
	})
}

// checkAudit asserts what holds for every state: no error from a state; findings filled in,
// sorted by rule then object, with no rule and message twice, and no transition rule; progress
// counts every object once; Audit is Merge over AuditObject in the state's order; and both are
// deterministic and leave the state alone.
func checkAudit(t *testing.T, engine *policy.Engine, w fuzzWorld, now time.Time) {
	t.Helper()
	st, before := w.state(), w.deepCopy()
	var calls []string
	found, err := engine.Audit(st, now, func(done, total int) { calls = append(calls, fmt.Sprintf("%d/%d", done, total)) })
	if err != nil {
		t.Fatalf("Audit of a state failed: %v", err)
	}
	objs := st.Objects()
	var want []string
	for i := range objs {
		want = append(want, fmt.Sprintf("%d/%d", i+1, len(objs)))
	}
	if !slices.Equal(calls, want) {
		t.Fatalf("progress %v, want %v", calls, want)
	}
	seen := map[string]bool{}
	for i, f := range found {
		checkAuditFinding(t, engine.Config(), f)
		if key := string(f.Rule) + "\x00" + f.Message.String(); seen[key] {
			t.Fatalf("finding reported twice: %s", f)
		} else {
			seen[key] = true
		}
		if i > 0 {
			p := found[i-1]
			if p.Rule > f.Rule || p.Rule == f.Rule && p.Object.String() > f.Object.String() {
				t.Fatalf("findings out of order: %s (%s) before %s (%s)", p.Rule, p.Object, f.Rule, f.Object)
			}
		}
	}
	perObject := make([][]policy.Finding, 0, len(objs))
	for _, o := range objs {
		one, err := engine.AuditObject(o, st, now)
		if err != nil {
			t.Fatalf("AuditObject(%T) failed: %v", o, err)
		}
		perObject = append(perObject, one)
	}
	// As for Admit, no rule reads by an empty name.
	strict := &testobj.View{State: st, StrictNames: true}
	for _, o := range objs {
		want, _ := engine.AuditObject(o, st, now)
		if one, err := engine.AuditObject(o, strict, now); err != nil || !sameFindings(one, want) {
			t.Fatalf("AuditObject(%T) over a view that refuses empty names: %v (%v), want %v", o, one, err, want)
		}
	}
	if merged := policy.Merge(perObject); !sameFindings(merged, found) {
		t.Fatalf("Audit and Merge(AuditObject) disagree:\n  Audit %v\n  Merge %v", found, merged)
	}
	again, err := engine.Audit(w.deepCopy().state(), now, nil)
	if err != nil || !sameFindings(again, found) {
		t.Fatalf("Audit is not deterministic:\n %v\n %v (%v)", found, again, err)
	}
	if !reflect.DeepEqual(w, before) {
		t.Fatalf("Audit modified the objects it judged")
	}
}

func sameFindings(a, b []policy.Finding) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

// checkAuditFinding is checkFinding for the audit, whose findings come from the rules that judge
// a state: never from one that judges a change (docs/rules.md).
func checkAuditFinding(t *testing.T, cfg *policy.Config, f policy.Finding) {
	t.Helper()
	if rl, ok := policy.LookupRule(string(f.Rule)); ok && !rl.Judges.InAudit() {
		t.Fatalf("rule %s judges a %s, yet is in an audit: %s", f.Rule, rl.Judges, f)
	}
	checkFinding(t, cfg, f)
}

// FuzzParseConfig parses fuzzed configuration files.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		"", fuzzConfig,
		"rules:\n  PVG001: {action: off}\n",
		"rules:\n  volume-grab: {action: deny}\n",
		"rules:\n  PVG999: {action: deny}\n",
		"rules:\n  PVG001: {action: block}\n",
		"rules:\n  PVG001: {action: true}\n",
		"rules:\n  PVG010: {action: deny}\n  volume-grab: {action: warn}\n",
		"rulez: {}\n",
		"controllers:\n  serviceAccounts: [just-a-name]\n",
		"exemptions:\n  namespaces: ['[']\n",
		"rules: [",
		"controllers:\n  serviceAccounts: [pvguard-system/pvguard]\n  groups: [provisioners]\nexemptions:\n  users: [break-glass]\n",
		"releasedMaxAge: 72h\n",
		`{"rules":{"PVG016":{"action":"audit","exemptions":{"namespaces":["kube-*"],"users":["x"]}}}}`,
	} {
		f.Add([]byte(seed))
	}
	seed := admitSeeds()[4]
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := policy.ParseConfig(data)
		if (c == nil) == (err == nil) {
			t.Fatalf("ParseConfig returned %v and %v", c, err)
		}
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "parsing policy config: ") && !strings.HasPrefix(msg, "invalid policy config: ") {
				t.Fatalf("error %q does not say what it is about", msg)
			}
			return
		}
		for _, rl := range policy.Catalogue() {
			switch a := c.ActionFor(&rl); a {
			case policy.ActionDeny, policy.ActionWarn, policy.ActionAudit, policy.ActionOff:
			default:
				t.Fatalf("parsed config gives rule %s action %q", rl.ID, a)
			}
		}
		// What was accepted survives a round trip through YAML.
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("marshalling a parsed config: %v", err)
		}
		c2, err := policy.ParseConfig(out)
		if err != nil {
			t.Fatalf("a parsed config does not parse again: %v\n%s", err, out)
		}
		if a, b := mustJSON(c), mustJSON(c2); string(a) != string(b) {
			t.Fatalf("round trip changed the config:\n%s\n%s", a, b)
		}
		// Any accepted config can judge a review.
		r, _ := decodeReview(seed.kind, policy.OperationCreate, nil, mustJSON(seed.cur))
		checkAdmit(t, policy.NewEngine(c), r, seed.world)
	})
}

// FuzzMutations applies the mutating webhook's mutations to fuzzed objects.
func FuzzMutations(f *testing.F) {
	fast := testobj.StorageClass("fast", "csi.example.com", testobj.DefaultClass)
	local := testobj.PV("pv-local", testobj.Class("local"))
	bare := testobj.PV("pv-1")
	bare.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "ns", Name: "c"}
	world := mustJSON(fuzzWorld{PVs: []*corev1.PersistentVolume{local}, Classes: []*storagev1.StorageClass{fast}})
	for _, s := range []struct {
		pv  *corev1.PersistentVolume
		pvc *corev1.PersistentVolumeClaim
	}{
		{bare, testobj.PVC("ns", "c", testobj.ClaimClass("fast"), testobj.VolumeName("pv-local"))},
		{testobj.PV("pv-1", testobj.ClaimRef("ns", "c", "")), testobj.PVC("ns", "c", testobj.ClaimClass("gold"), testobj.VolumeName("pv-local"))},
		{testobj.PV("pv-2"), testobj.PVC("ns", "c", testobj.ClaimClass("fast"), testobj.VolumeName("pv-local"),
			testobj.ClaimMeta(testobj.Annotation(storage.AnnBetaStorageClass, "fast")))},
		{testobj.PV("pv-3"), testobj.PVC("ns", "c", testobj.ClaimNoClass, testobj.VolumeName("pv-missing"))},
	} {
		f.Add(mustJSON(s.pv), mustJSON(s.pvc), world)
	}
	cfg, err := policy.ParseConfig([]byte(fuzzConfig))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, pvJSON, pvcJSON, worldJSON []byte) {
		pv, okPV := decodeObject[corev1.PersistentVolume](pvJSON)
		pvc, okPVC := decodeObject[corev1.PersistentVolumeClaim](pvcJSON)
		w, okWorld := decodeWorld(worldJSON)
		if !okPV || !okPVC || !okWorld || pv == nil || pvc == nil {
			t.Skip("input does not decode")
		}
		checkNormalizeClaimRef(t, pv)
		checkAlignClass(t, pvc, w, cfg)
	})
}

// checkNormalizeClaimRef: the claimRef ends up with kind and apiVersion, nothing else changes,
// the result says whether anything did, and a second pass changes nothing.
func checkNormalizeClaimRef(t *testing.T, pv *corev1.PersistentVolume) {
	t.Helper()
	before := pv.DeepCopy()
	changed := policy.NormalizeClaimRef(pv)
	if ref := pv.Spec.ClaimRef; ref != nil && (ref.Kind == "" || ref.APIVersion == "") {
		t.Fatalf("claimRef still incomplete: %+v", ref)
	}
	if changed == reflect.DeepEqual(pv, before) {
		t.Fatalf("NormalizeClaimRef reported changed=%v, but the volume changed=%v", changed, !changed)
	}
	if changed {
		undone := pv.DeepCopy()
		undone.Spec.ClaimRef.Kind, undone.Spec.ClaimRef.APIVersion = before.Spec.ClaimRef.Kind, before.Spec.ClaimRef.APIVersion
		if !reflect.DeepEqual(undone, before) {
			t.Fatalf("NormalizeClaimRef changed more than the claimRef's kind and apiVersion")
		}
	}
	if policy.NormalizeClaimRef(pv) {
		t.Fatalf("NormalizeClaimRef is not idempotent")
	}
}

// checkAlignClass: a claim is changed only in its class, only to the class of the volume it
// names, and a second pass changes nothing.
func checkAlignClass(t *testing.T, pvc *corev1.PersistentVolumeClaim, w fuzzWorld, cfg *policy.Config) {
	t.Helper()
	st := w.state()
	before := pvc.DeepCopy()
	changed, err := policy.AlignPreboundClaimClass(pvc, st, cfg)
	if err != nil {
		t.Fatalf("AlignPreboundClaimClass over a state failed: %v", err)
	}
	if changed == reflect.DeepEqual(pvc, before) {
		t.Fatalf("AlignPreboundClaimClass reported changed=%v, but the claim changed=%v", changed, !changed)
	}
	if changed {
		pv, _ := st.PersistentVolume(pvc.Spec.VolumeName)
		if pv == nil || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != storage.VolumeClass(pv) {
			t.Fatalf("claim class set to %v, not the class of volume %q", pvc.Spec.StorageClassName, pvc.Spec.VolumeName)
		}
		undone := pvc.DeepCopy()
		undone.Spec.StorageClassName = before.Spec.StorageClassName
		if !reflect.DeepEqual(undone, before) {
			t.Fatalf("AlignPreboundClaimClass changed more than the class")
		}
	}
	if again, err := policy.AlignPreboundClaimClass(pvc, st, cfg); err != nil || again {
		t.Fatalf("AlignPreboundClaimClass is not idempotent: %v, %v", again, err)
	}
	// Off by default.
	if changed, err := policy.AlignPreboundClaimClass(before.DeepCopy(), st, policy.DefaultConfig()); err != nil || changed {
		t.Fatalf("class alignment ran with the default config: %v, %v", changed, err)
	}
}

// TestAdmitRefusesReviewsItCannotJudge: a review without the object its operation writes, with
// an UPDATE's old object missing, or with an operation or kind pvguard does not judge is an error,
// not an allowed write (FuzzAdmit found an UPDATE without its object allowed). A DELETE is never
// judged.
func TestAdmitRefusesReviewsItCannotJudge(t *testing.T) {
	pv, pvc, sc := testobj.PV("pv-1"), testobj.PVC("ns", "c"), testobj.StorageClass("fast", "csi.example.com")
	for _, tc := range []struct {
		name    string
		review  *policy.Review
		wantErr string
	}{
		{"update without the object", &policy.Review{Kind: policy.KindPersistentVolume, Operation: policy.OperationUpdate, OldPV: pv},
			"UPDATE of a PersistentVolume without the object"},
		{"create without the object", &policy.Review{Kind: policy.KindPersistentVolumeClaim, Operation: policy.OperationCreate},
			"CREATE of a PersistentVolumeClaim without the object"},
		{"update without the old object", &policy.Review{Kind: policy.KindStorageClass, Operation: policy.OperationUpdate, SC: sc},
			"UPDATE of StorageClass fast without the old object"},
		{"unknown operation", &policy.Review{Kind: policy.KindPersistentVolume, Operation: "CONNECT", PV: pv},
			`cannot judge operation "CONNECT" on a PersistentVolume`},
		{"no operation", &policy.Review{Kind: policy.KindPersistentVolumeClaim, PVC: pvc},
			`cannot judge operation "" on a PersistentVolumeClaim`},
		{"unknown kind", &policy.Review{Kind: "Pod", Operation: policy.OperationCreate},
			`cannot judge a write of kind "Pod"`},
		{"delete without objects is not judged", &policy.Review{Kind: policy.KindPersistentVolume, Operation: policy.OperationDelete}, ""},
		{"create is judged", &policy.Review{Kind: policy.KindPersistentVolumeClaim, Operation: policy.OperationCreate, PVC: pvc}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := policy.NewEngine(nil).Admit(tc.review, testobj.NewView())
			if tc.wantErr == "" {
				if err != nil || !d.Allowed() {
					t.Fatalf("want allowed, got %+v, %v", d, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q (decision %+v)", err, tc.wantErr, d)
			}
		})
	}
}
