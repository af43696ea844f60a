package binder

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

// mapFacts are ClaimFacts held in maps. A volume named in failVolume, the classes with
// failClasses and the pre-bound volumes with failClaiming fail to read; reads records the
// volumes read by name.
type mapFacts struct {
	volumes      []*corev1.PersistentVolume
	classes      []*storagev1.StorageClass
	plan         map[types.UID]string
	denied       map[string]bool
	pendingFree  bool
	confirmed    bool
	failVolume   string
	failClasses  bool
	failClaiming bool
	reads        *[]string
}

var errRead = errors.New("the read failed")

func (f mapFacts) Volume(name string) (*corev1.PersistentVolume, bool, error) {
	if f.reads != nil {
		*f.reads = append(*f.reads, name)
	}
	if name == f.failVolume {
		return nil, false, errRead
	}
	for _, v := range f.volumes {
		if v.Name == name {
			return v, true, nil
		}
	}
	return nil, false, nil
}

func (f mapFacts) Classes() ([]*storagev1.StorageClass, error) {
	if f.failClasses {
		return nil, errRead
	}
	return f.classes, nil
}

func (f mapFacts) VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error) {
	if f.failClaiming {
		return nil, errRead
	}
	var out []*corev1.PersistentVolume
	for _, v := range f.volumes {
		if ref := v.Spec.ClaimRef; ref != nil && ref.Namespace == namespace && ref.Name == name {
			out = append(out, v)
		}
	}
	return out, nil
}

func (f mapFacts) Plan(claim types.UID) (string, bool) {
	v, ok := f.plan[claim]
	return v, ok
}

func (f mapFacts) Denied(types.UID) map[string]bool { return f.denied }
func (f mapFacts) PendingFree() bool                { return f.pendingFree }
func (f mapFacts) Confirmed() bool                  { return f.confirmed }

// stateSummary names what a ClaimState holds, volumes and classes by name.
func stateSummary(s ClaimState) string {
	name := func(v *corev1.PersistentVolume) string {
		if v == nil {
			return "-"
		}
		return v.Name
	}
	className := func(sc *storagev1.StorageClass) string {
		if sc == nil {
			return "-"
		}
		return sc.Name
	}
	var pre []string
	for _, v := range s.PreBound {
		pre = append(pre, v.Name)
	}
	return fmt.Sprintf("volume=%s confirmed=%v class=%s default=%s planned=%v assigned=%s prebound=%v denied=%v",
		name(s.Volume), s.VolumeConfirmed, className(s.Class), className(s.DefaultClass), s.Planned, name(s.Assigned),
		pre, slices.Sorted(maps.Keys(s.Denied)))
}

// actionSummary names what DecideClaim decides, the volume by name and the event by reason.
func actionSummary(a ClaimAction) string {
	var parts []string
	if a.Bind != nil {
		parts = append(parts, "bind "+a.Bind.Name)
	}
	if a.Phase != "" {
		parts = append(parts, "phase "+string(a.Phase))
	}
	if a.Event != nil {
		parts = append(parts, "event "+a.Event.Reason)
	}
	if a.SetClass != "" {
		parts = append(parts, "class "+a.SetClass)
	}
	if a.Provisioner != "" {
		parts = append(parts, "provisioner "+a.Provisioner)
	}
	if a.NeedPlan {
		parts = append(parts, "plan")
	}
	if a.NeedLiveVolume {
		parts = append(parts, "live")
	}
	return strings.Join(parts, ", ")
}

// TestClaimStateOf: the state the binder's sync and the explanations decide on, for each kind of
// claim situation: what of the facts it reads, what it leaves out, and the decision it leads to.
func TestClaimStateOf(t *testing.T) {
	fast := class("fast", "csi.example.com", storagev1.VolumeBindingImmediate)
	local := class("local", storage.NoProvisioner, storagev1.VolumeBindingWaitForFirstConsumer)
	def := testobj.StorageClass("standard", "csi.example.com", testobj.DefaultClass)
	classes := []*storagev1.StorageClass{fast, local, def}
	free := testobj.PV("pv-1", testobj.Class("fast"), testobj.Phase(corev1.VolumeAvailable))
	pending := testobj.PV("pv-1", testobj.Class("fast"), testobj.Phase(corev1.VolumePending))
	taken := testobj.PV("pv-1", testobj.Class("fast"), testobj.ClaimRef("ns", "other", "uid-other"), testobj.Phase(corev1.VolumeBound))
	claim := testobj.PVC("ns", "c", testobj.ClaimClass("fast"))
	bound := testobj.PVC("ns", "c", testobj.ClaimClass("fast"), testobj.ClaimBoundTo("pv-1"))
	named := testobj.PVC("ns", "c", testobj.ClaimClass("fast"), testobj.VolumeName("pv-1"))
	wffc := testobj.PVC("ns", "c", testobj.ClaimClass("local"))
	localPre := testobj.PV("pv-local", testobj.Class("local"), testobj.ClaimRef("ns", "c", ""), testobj.Phase(corev1.VolumeAvailable))
	plan := func(v string) map[types.UID]string { return map[types.UID]string{claim.UID: v} }

	for _, tc := range []struct {
		name       string
		claim      *corev1.PersistentVolumeClaim
		facts      mapFacts
		wantState  string
		wantAction string
		wantErr    string
		wantReads  []string
	}{
		{name: "bound claim, its volume bound to it", claim: bound,
			facts:      mapFacts{volumes: []*corev1.PersistentVolume{testobj.PV("pv-1", testobj.Class("fast"), testobj.BoundTo(bound))}, classes: classes},
			wantState:  "volume=pv-1 confirmed=false class=fast default=standard planned=false assigned=- prebound=[] denied=[]",
			wantAction: "bind pv-1", wantReads: []string{"pv-1"}},
		{name: "bound claim, volume missing from a cache: a live read first", claim: bound,
			facts:      mapFacts{classes: classes},
			wantState:  "volume=- confirmed=false class=fast default=standard planned=false assigned=- prebound=[] denied=[]",
			wantAction: "live"},
		{name: "bound claim, volume missing from the truth: Lost", claim: bound,
			facts:      mapFacts{classes: classes, confirmed: true},
			wantState:  "volume=- confirmed=true class=fast default=standard planned=false assigned=- prebound=[] denied=[]",
			wantAction: "phase Lost, event ClaimLost"},
		{name: "claim naming a free volume: the plan is not read", claim: named,
			facts:      mapFacts{volumes: []*corev1.PersistentVolume{free}, classes: classes, plan: map[types.UID]string{named.UID: "pv-2"}},
			wantState:  "volume=pv-1 confirmed=false class=fast default=standard planned=false assigned=- prebound=[] denied=[]",
			wantAction: "bind pv-1", wantReads: []string{"pv-1"}},
		{name: "claim naming a volume that does not exist", claim: named,
			facts:      mapFacts{classes: classes, confirmed: true},
			wantState:  "volume=- confirmed=true class=fast default=standard planned=false assigned=- prebound=[] denied=[]",
			wantAction: "phase Pending"},
		{name: "claim naming a volume policy denied it", claim: named,
			facts:      mapFacts{volumes: []*corev1.PersistentVolume{free}, classes: classes, denied: map[string]bool{"pv-1": true}},
			wantState:  "volume=pv-1 confirmed=false class=fast default=standard planned=false assigned=- prebound=[] denied=[pv-1]",
			wantAction: "phase Pending"},
		{name: "delay binding, a volume pre-bound to the claim", claim: wffc,
			facts:      mapFacts{volumes: []*corev1.PersistentVolume{localPre, free}, classes: classes, plan: map[types.UID]string{wffc.UID: "pv-1"}},
			wantState:  "volume=- confirmed=false class=local default=standard planned=false assigned=- prebound=[pv-local] denied=[]",
			wantAction: "bind pv-local"},
		{name: "delay binding, no volume pre-bound", claim: wffc,
			facts:      mapFacts{volumes: []*corev1.PersistentVolume{free}, classes: classes},
			wantState:  "volume=- confirmed=false class=local default=standard planned=false assigned=- prebound=[] denied=[]",
			wantAction: "phase Pending, event WaitForFirstConsumer"},
		{name: "delay binding, the pre-bound volume denied", claim: wffc,
			facts:      mapFacts{volumes: []*corev1.PersistentVolume{localPre}, classes: classes, denied: map[string]bool{"pv-local": true}},
			wantState:  "volume=- confirmed=false class=local default=standard planned=false assigned=- prebound=[pv-local] denied=[pv-local]",
			wantAction: "phase Pending, event WaitForFirstConsumer"},
		{name: "unplanned claim asks for a plan", claim: claim,
			facts:      mapFacts{volumes: []*corev1.PersistentVolume{free}, classes: classes},
			wantState:  "volume=- confirmed=false class=fast default=standard planned=false assigned=- prebound=[] denied=[]",
			wantAction: "plan"},
		{name: "planned assignment that fits", claim: claim,
			facts:      mapFacts{volumes: []*corev1.PersistentVolume{free}, classes: classes, plan: plan("pv-1")},
			wantState:  "volume=- confirmed=false class=fast default=standard planned=true assigned=pv-1 prebound=[] denied=[]",
			wantAction: "bind pv-1", wantReads: []string{"pv-1"}},
		{name: "planned assignment taken since: stale, plan again", claim: claim,
			facts:      mapFacts{volumes: []*corev1.PersistentVolume{taken}, classes: classes, plan: plan("pv-1")},
			wantState:  "volume=- confirmed=false class=fast default=standard planned=false assigned=- prebound=[] denied=[]",
			wantAction: "plan"},
		{name: "planned assignment deleted since: stale, plan again", claim: claim,
			facts:      mapFacts{classes: classes, plan: plan("pv-1")},
			wantState:  "volume=- confirmed=false class=fast default=standard planned=false assigned=- prebound=[] denied=[]",
			wantAction: "plan"},
		{name: "planned Pending volume, Pending volumes free", claim: claim,
			facts:      mapFacts{volumes: []*corev1.PersistentVolume{pending}, classes: classes, plan: plan("pv-1"), pendingFree: true},
			wantState:  "volume=- confirmed=false class=fast default=standard planned=true assigned=pv-1 prebound=[] denied=[]",
			wantAction: "bind pv-1"},
		{name: "planned Pending volume, only Available volumes free", claim: claim,
			facts:      mapFacts{volumes: []*corev1.PersistentVolume{pending}, classes: classes, plan: plan("pv-1")},
			wantState:  "volume=- confirmed=false class=fast default=standard planned=false assigned=- prebound=[] denied=[]",
			wantAction: "plan"},
		{name: "planned, no volume, external provisioner", claim: claim,
			facts:      mapFacts{classes: classes, plan: plan("")},
			wantState:  "volume=- confirmed=false class=fast default=standard planned=true assigned=- prebound=[] denied=[]",
			wantAction: "phase Pending, event ExternalProvisioning, provisioner csi.example.com"},
		{name: "claim without a class gets the default class", claim: testobj.PVC("ns", "c", testobj.ClaimNoClass),
			facts:      mapFacts{classes: classes, plan: plan("")},
			wantState:  "volume=- confirmed=false class=- default=standard planned=true assigned=- prebound=[] denied=[]",
			wantAction: "class standard"},
		{name: "claim whose class does not exist", claim: testobj.PVC("ns", "c", testobj.ClaimClass("gone")),
			facts:      mapFacts{classes: classes, plan: plan("")},
			wantState:  "volume=- confirmed=false class=- default=standard planned=true assigned=- prebound=[] denied=[]",
			wantAction: "phase Pending, event ProvisioningFailed"},
		{name: "reading the named volume fails", claim: named,
			facts: mapFacts{classes: classes, failVolume: "pv-1"}, wantErr: "reading volume pv-1: the read failed"},
		{name: "listing the classes fails", claim: claim,
			facts: mapFacts{failClasses: true}, wantErr: "listing storage classes: the read failed"},
		{name: "listing the pre-bound volumes fails", claim: wffc,
			facts: mapFacts{classes: classes, failClaiming: true}, wantErr: "listing volumes pre-bound to claim ns/c: the read failed"},
		{name: "reading the planned volume fails", claim: claim,
			facts: mapFacts{classes: classes, plan: plan("pv-1"), failVolume: "pv-1"}, wantErr: "reading planned volume pv-1: the read failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reads []string
			tc.facts.reads = &reads
			s, err := ClaimStateOf(tc.claim, tc.facts)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || !errors.Is(err, errRead) {
					t.Fatalf("error %v, want %q wrapping the read's", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Claim != tc.claim {
				t.Errorf("state of claim %v, want the claim asked about", s.Claim)
			}
			if got := stateSummary(s); got != tc.wantState {
				t.Errorf("state\n%s\nwant\n%s", got, tc.wantState)
			}
			if got := actionSummary(DecideClaim(s)); got != tc.wantAction {
				t.Errorf("decided %q, want %q", got, tc.wantAction)
			}
			if tc.wantReads != nil && !slices.Equal(reads, tc.wantReads) {
				t.Errorf("volumes read %v, want %v", reads, tc.wantReads)
			}
		})
	}
}
