package e2eexplain

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// want is what every surface must say of a claim kept Pending by one reason.
type want struct {
	claim      string
	waitingFor string
	// state holds substrings of the state sentence.
	state []string
	// pageWaitingFor and pageState replace waitingFor and state for the dashboard's page and
	// API, where they differ by design: the server reads no pods or events (docs/explain.md).
	pageWaitingFor string
	pageState      []string
	// volume is the volume whose row is checked ("": the claim has no candidate at all); failing
	// maps each check it fails to a substring of the failing value, and every other check must
	// pass (none failing: the volume fits).
	volume  string
	failing map[explain.Check]string
	// verdict holds substrings of the verdict.
	verdict []string
	// noVolumeFits: the claim gets exactly one NoVolumeFits event, naming volume and its failing
	// checks (or, with no volume, saying the verdict); otherwise none, although the binder
	// explained it after the delay.
	noVolumeFits bool
	// event is another event the claim must carry: its reason and substrings of its message.
	event []string
	// args are more flags for `pvguard explain` and the plugin.
	args []string
	// fields are JSON fields of the explanation and their values, for the CLI and the API.
	fields map[string]string
	// refused is the enforcement point and rule of a refusal the claim's events report
	// ("pvguard binder PVG010"); the CLI only, which reads events.
	refused string
	// docs: docs/explain.md shows the plugin's output for this case, after this command line.
	docs string
}

// reasonCase keeps a claim Pending for one reason: setup creates the objects in the scene,
// waits until the real components have made of them what they make, and says what is expected.
type reasonCase struct {
	name  string
	setup func(s *scene) want
}

const (
	noProvisioner = "kubernetes.io/no-provisioner"
	// absentProvisioner is an external provisioner that nothing runs.
	absentProvisioner = "example.com/absent"
)

var immediate, wffc = storagev1.VolumeBindingImmediate, storagev1.VolumeBindingWaitForFirstConsumer

// reasons are the reasons a claim can stay Pending, each kept up by exactly
// the objects it names. Volumes are hostPath ones (nothing mounts them) unless said otherwise;
// the claims ask for 1Gi ReadWriteOnce Filesystem unless said otherwise, as testobj builds them.
var reasons = []reasonCase{
	{"no-class-no-volume", func(s *scene) want {
		s.noDefaultClassNorVolume()
		s.claim("data", testobj.ClaimNoClass)
		return want{claim: "data", waitingFor: explain.WaitingForNothing,
			state:        []string{"no persistent volumes available for this claim and no storage class is set"},
			verdict:      []string{"no volume fits, and there are no volumes to consider"},
			noVolumeFits: true}
	}},
	{"class", func(s *scene) want {
		class := s.class("", noProvisioner, immediate)
		other := s.class("-other", noProvisioner, immediate)
		pv := s.volume("pv", testobj.Class(other))
		s.waitVolumePhase(pv, corev1.VolumeAvailable)
		s.claim("data", testobj.ClaimClass(class))
		return want{claim: "data", waitingFor: explain.WaitingForNothing,
			state:  []string{"no persistent volumes available for this claim"},
			volume: pv, failing: map[explain.Check]string{explain.CheckClass: other + " != " + class},
			verdict: []string{"no volume fits; " + pv + " fits if the claim asks for class " + other}, noVolumeFits: true}
	}},
	{"volume-attributes-class", func(s *scene) want {
		class := s.class("", noProvisioner, immediate)
		// A volume may name a VolumeAttributesClass only with a CSI source (API validation).
		pv := s.volume("pv", testobj.Class(class), testobj.CSI("static.example.com", s.ns, nil), testobj.VolumeAttributesClass("silver"))
		s.waitVolumePhase(pv, corev1.VolumeAvailable)
		s.claim("data", testobj.ClaimClass(class), testobj.ClaimVolumeAttributesClass("gold"))
		return want{claim: "data", waitingFor: explain.WaitingForNothing,
			volume: pv, failing: map[explain.Check]string{explain.CheckAttributesClass: "silver != gold"},
			verdict: []string{pv + " fits if the claim asks for VolumeAttributesClass silver"}, noVolumeFits: true}
	}},
	{"access-modes", func(s *scene) want {
		class := s.class("", noProvisioner, immediate)
		pv := s.volume("pv", testobj.Class(class), testobj.AccessModes(corev1.ReadWriteOnce))
		s.waitVolumePhase(pv, corev1.VolumeAvailable)
		s.claim("data", testobj.ClaimClass(class), testobj.ClaimAccessModes(corev1.ReadWriteMany))
		return want{claim: "data", waitingFor: explain.WaitingForNothing,
			volume: pv, failing: map[explain.Check]string{explain.CheckAccessModes: "ReadWriteOnce lacks ReadWriteMany"},
			verdict: []string{pv + " fits if the claim does not ask for ReadWriteMany"}, noVolumeFits: true}
	}},
	{"volume-mode", func(s *scene) want {
		class := s.class("", noProvisioner, immediate)
		pv := s.volume("pv", testobj.Class(class), testobj.VolumeMode(corev1.PersistentVolumeFilesystem))
		s.waitVolumePhase(pv, corev1.VolumeAvailable)
		s.claim("data", testobj.ClaimClass(class), testobj.ClaimVolumeMode(corev1.PersistentVolumeBlock))
		return want{claim: "data", waitingFor: explain.WaitingForNothing,
			volume: pv, failing: map[explain.Check]string{explain.CheckVolumeMode: "Filesystem != Block"},
			verdict: []string{pv + " fits if the claim asks for volumeMode Filesystem"}, noVolumeFits: true}
	}},
	{"capacity", func(s *scene) want {
		class := s.class("", noProvisioner, immediate)
		pv := s.volume("pv", testobj.Class(class), testobj.Capacity("1Gi"))
		s.waitVolumePhase(pv, corev1.VolumeAvailable)
		s.claim("data", testobj.ClaimClass(class), testobj.Request("2Gi"))
		return want{claim: "data", waitingFor: explain.WaitingForNothing,
			volume: pv, failing: map[explain.Check]string{explain.CheckCapacity: "1Gi < 2Gi"},
			verdict: []string{pv + " fits if the claim asks for at most 1Gi"}, noVolumeFits: true}
	}},
	{"selector", func(s *scene) want {
		class := s.class("", noProvisioner, immediate)
		pv := s.volume("pv", testobj.Class(class), testobj.PVMeta(testobj.Label("tier", "web")))
		s.waitVolumePhase(pv, corev1.VolumeAvailable)
		s.claim("data", testobj.ClaimClass(class), testobj.Selector(map[string]string{"tier": "db"}))
		return want{claim: "data", waitingFor: explain.WaitingForNothing,
			volume: pv, failing: map[explain.Check]string{explain.CheckSelector: "labels do not match tier=db"},
			verdict: []string{pv + " fits if the claim's selector matches the volume's labels"}, noVolumeFits: true}
	}},
	{"node-affinity", func(s *scene) want {
		// The real scheduler places the pod on node-a (its nodeSelector) and, since the class
		// has a provisioner, selects node-a for the claim; the only volume reaches node-b.
		class := s.class("", absentProvisioner, wffc)
		pv := s.volume("pv", testobj.Class(class), testobj.NodeAffinity(corev1.LabelHostname, "node-b"))
		s.waitVolumePhase(pv, corev1.VolumeAvailable)
		s.claim("data", testobj.ClaimClass(class))
		s.pod("web", "data", "node-a")
		harness.WaitFor(s.t, time.Minute, "the scheduler to select node-a for claim data", func(context.Context) (bool, error) {
			pvc, err := s.getClaim("data")
			if err != nil {
				return false, err
			}
			return pvc.Annotations["volume.kubernetes.io/selected-node"] == "node-a", nil
		})
		return want{claim: "data", waitingFor: explain.WaitingForProvisioner,
			state:  []string{"waiting for the external provisioner " + absentProvisioner + " to create a volume on node node-a"},
			volume: pv, failing: map[explain.Check]string{explain.CheckNodeAffinity: "does not reach node node-a"},
			verdict: []string{pv + " fits if the claim's pod is scheduled to a node the volume reaches"},
			fields:  map[string]string{"provisioner": absentProvisioner, "provisionerRunning": "unknown"}}
	}},
	{"scheduler", func(s *scene) want {
		// Without a provisioner, the scheduler finds no node for the pod: node-a (its
		// nodeSelector) has no volume, the only one reaches node-b.
		class := s.class("", noProvisioner, wffc)
		pv := s.volume("pv", testobj.Class(class), testobj.NodeAffinity(corev1.LabelHostname, "node-b"))
		s.waitVolumePhase(pv, corev1.VolumeAvailable)
		s.claim("data", testobj.ClaimClass(class))
		s.pod("web", "data", "node-a")
		s.waitEvent("Pod", "web", "FailedScheduling")
		return want{claim: "data", waitingFor: explain.WaitingForScheduler,
			state: []string{"waiting for the scheduler: pod web uses the claim and is not scheduled yet; it said: ",
				"didn't find available persistent volumes to bind"},
			pageWaitingFor: explain.WaitingForConsumer, pageState: []string{"waiting for its first consumer"},
			volume: pv, verdict: []string{"the scheduler may bind " + pv + " once a pod that uses the claim is scheduled"},
			docs: "$ kubectl pvguard explain pvc -n " + s.ns + " data"}
	}},
	{"phase-released", func(s *scene) want {
		// The classic: a claim deleted and created again under its name; its volume, reclaim
		// policy Retain, stays Released with the old claim's uid.
		class := s.class("", noProvisioner, immediate)
		pv := s.volume("pv", testobj.Class(class), testobj.Reclaim(corev1.PersistentVolumeReclaimRetain))
		s.claim("data", testobj.ClaimClass(class))
		s.waitClaimBound("data")
		if err := s.client().Delete(s.ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "data"}}); err != nil {
			s.t.Fatalf("deleting claim data: %v", err)
		}
		s.waitVolumePhase(pv, corev1.VolumeReleased)
		harness.WaitFor(s.t, 30*time.Second, "claim data gone", func(context.Context) (bool, error) {
			_, err := s.getClaim("data")
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
		s.claim("data", testobj.ClaimClass(class))
		return want{claim: "data", waitingFor: explain.WaitingForNothing,
			volume: pv, failing: map[explain.Check]string{explain.CheckPhase: "Released",
				explain.CheckClaimRef: "bound to " + s.ns + "/data (uid "},
			verdict: []string{pv + " fits if the volume is freed (it is Released, bound to ", "an earlier claim of that name"}, noVolumeFits: true}
	}},
	{"pre-bound-elsewhere", func(s *scene) want {
		class := s.class("", noProvisioner, immediate)
		pv := s.volume("pv", testobj.Class(class), testobj.ClaimRef(s.ns, "other", ""))
		s.waitVolumePhase(pv, corev1.VolumeAvailable)
		s.claim("data", testobj.ClaimClass(class))
		return want{claim: "data", waitingFor: explain.WaitingForNothing,
			volume: pv, failing: map[explain.Check]string{explain.CheckClaimRef: "pre-bound to " + s.ns + "/other"},
			verdict: []string{pv + " fits if the volume is freed (it is pre-bound to " + s.ns + "/other)"}, noVolumeFits: true}
	}},
	{"all-fitting-taken", func(s *scene) want {
		// Two claims, one volume: one binds, the other stays Pending.
		class := s.class("", noProvisioner, immediate)
		pv := s.volume("pv", testobj.Class(class))
		s.waitVolumePhase(pv, corev1.VolumeAvailable)
		s.claim("first", testobj.ClaimClass(class))
		s.claim("second", testobj.ClaimClass(class))
		s.waitVolumePhase(pv, corev1.VolumeBound)
		vol, err := s.getVolume(pv)
		if err != nil || vol.Spec.ClaimRef == nil {
			s.t.Fatalf("volume %s Bound to nothing: %v", pv, err)
		}
		winner := vol.Spec.ClaimRef.Name
		loser := map[string]string{"first": "second", "second": "first"}[winner]
		s.waitClaimBound(winner)
		return want{claim: loser, waitingFor: explain.WaitingForNothing,
			volume: pv, failing: map[explain.Check]string{explain.CheckPhase: "Bound", explain.CheckClaimRef: "bound to " + s.ns + "/" + winner},
			verdict: []string{"no volume fits; " + pv + " fits if", "bound to " + s.ns + "/" + winner}, noVolumeFits: true}
	}},
	{"named-volume", func(s *scene) want {
		// The claim names its volume before the volume exists, then the administrator (exempt
		// from volume-grab, set to deny here) creates the volume, Filesystem.
		class := s.class("", noProvisioner, immediate)
		pv := s.ns + "-pv"
		s.claim("data", testobj.ClaimClass(class), testobj.VolumeName(pv), testobj.ClaimVolumeMode(corev1.PersistentVolumeBlock))
		s.volume("pv", testobj.Class(class), testobj.VolumeMode(corev1.PersistentVolumeFilesystem))
		s.waitVolumePhase(pv, corev1.VolumeAvailable)
		return want{claim: "data", waitingFor: explain.WaitingForNothing,
			volume: pv, failing: map[explain.Check]string{explain.CheckVolumeMode: "Filesystem != Block"},
			verdict: []string{"the claim names volume " + pv + ", which fits if the claim asks for volumeMode Filesystem"}, noVolumeFits: true}
	}},
	{"consumer", func(s *scene) want {
		class := s.class("", noProvisioner, wffc)
		pv := s.volume("pv", testobj.Class(class))
		s.waitVolumePhase(pv, corev1.VolumeAvailable)
		s.claim("data", testobj.ClaimClass(class))
		s.waitEvent("PersistentVolumeClaim", "data", "WaitForFirstConsumer")
		return want{claim: "data", waitingFor: explain.WaitingForConsumer,
			state:  []string{"waiting for its first consumer: class " + class + " binds once a pod that uses the claim is scheduled"},
			volume: pv, verdict: []string{"the scheduler may bind " + pv + " once a pod that uses the claim is scheduled"}}
	}},
	{"provisioner", func(s *scene) want {
		class := s.class("", absentProvisioner, immediate)
		pv := s.volume("pv", testobj.Class(class), testobj.Capacity("1Gi"))
		s.waitVolumePhase(pv, corev1.VolumeAvailable)
		s.claim("data", testobj.ClaimClass(class), testobj.Request("2Gi"))
		s.waitEvent("PersistentVolumeClaim", "data", "ExternalProvisioning")
		return want{claim: "data", waitingFor: explain.WaitingForProvisioner,
			state:     []string{"waiting for the external provisioner " + absentProvisioner + " to create a volume (asked since "},
			pageState: []string{"waiting for the external provisioner " + absentProvisioner + " to create a volume"},
			volume:    pv, failing: map[explain.Check]string{explain.CheckCapacity: "1Gi < 2Gi"},
			verdict: []string{pv + " fits if the claim asks for at most 1Gi"},
			fields:  map[string]string{"provisioner": absentProvisioner, "provisionerRunning": "unknown"}}
	}},
	{"policy", func(s *scene) want {
		// The claim names a volume that does not grant its namespace; volume-grab (PVG010),
		// set to deny in this suite's policy, lets the claim be created while the volume does
		// not exist yet and the administrator (exempt) create the volume, then forbids the
		// binding: the binder meets the denial.
		class := s.class("", noProvisioner, immediate)
		pv := s.ns + "-pv"
		s.claim("data", testobj.ClaimClass(class), testobj.VolumeName(pv))
		s.volume("pv", testobj.Class(class))
		s.waitEvent("PersistentVolumeClaim", "data", "PolicyForbidsBinding")
		return want{claim: "data", waitingFor: explain.WaitingForBinder,
			volume: pv, failing: map[explain.Check]string{explain.CheckPolicy: "PVG010"},
			verdict: []string{"policy denies the binding"},
			event:   []string{"PolicyForbidsBinding", `pvguard did not bind volume "` + pv + `"`, "PVG010"},
			refused: explain.PointBinder + " PVG010",
			// The CLI judges the pairs under the policy config the cluster's pvguard runs with.
			args: []string{"--config", s.e.cl.PVGuard().ConfigFile}}
	}},
}

// TestEveryReasonIsExplained keeps a claim Pending for each reason in reasons, one at a time on
// the suite's cluster, and checks what the user is told of it by the CLI (`pvguard explain pvc
// -o json`, the real binary), the kubectl plugin (the real kubectl running it from PATH), the
// binder's NoVolumeFits event and the dashboard's API and page.
func TestEveryReasonIsExplained(t *testing.T) {
	e := suite(t)
	for _, rc := range reasons {
		t.Run(rc.name, func(t *testing.T) {
			s := newScene(t, e, "why-"+rc.name)
			w := rc.setup(s)
			s.checkAll(w)
		})
	}
}

// checkAll checks every surface against w, once the claim has been explained for NoVolumeFits.
func (s *scene) checkAll(w want) {
	t := s.t
	started := time.Now()
	if w.noVolumeFits {
		s.waitEvent("PersistentVolumeClaim", w.claim, "NoVolumeFits")
	} else {
		// A witness claim that gets NoVolumeFits (its class does not exist): once it has its
		// event, the binder has explained every older pending claim after the delay, ours too.
		s.claim("witness", testobj.ClaimClass(s.ns+"-witness"))
		s.waitEvent("PersistentVolumeClaim", "witness", "NoVolumeFits")
	}
	var text string
	defer func() { t.Logf("kubectl pvguard explain pvc -n %s %s:\n%s", s.ns, w.claim, text) }()

	// (1) The CLI: the explanation settles within seconds of what the components did.
	var cli *explain.Explanation
	var last []string
	// Each try runs the CLI, a process of its own: tried less often than a read.
	err := harness.Poll(s.ctx, 200*time.Millisecond, 15*time.Second, func(context.Context) (bool, error) {
		e, raw, _, err := s.cli(w.claim, w.args...)
		if err != nil {
			return false, err
		}
		cli = e
		last = check(e, raw, w, false)
		return len(last) == 0, nil
	})
	switch {
	case cli == nil:
		t.Errorf("pvguard explain pvc %s/%s -o json: %v", s.ns, w.claim, err)
	case len(last) > 0:
		t.Errorf("pvguard explain pvc %s/%s -o json (%s: %s; verdict: %s):\n  %s", s.ns, w.claim, cli.WaitingFor, cli.State, cli.Verdict.Text.String(), strings.Join(last, "\n  "))
	}

	// (2) The plugin, through the real kubectl: the same state, failing values and verdict.
	r := s.plugin(w.claim, w.args...)
	text = r.stdout + r.stderr
	if r.code != 0 {
		t.Errorf("kubectl pvguard explain pvc -n %s %s: %s", s.ns, w.claim, r)
	} else {
		for _, p := range checkText(r.stdout, cli, w) {
			t.Errorf("kubectl pvguard explain pvc -n %s %s: %s", s.ns, w.claim, p)
		}
		if w.docs != "" {
			page, err := os.ReadFile("../../docs/explain.md")
			if err != nil {
				t.Fatal(err)
			}
			if want := w.docs + "\n" + r.stdout + "```"; !strings.Contains(string(page), want) {
				t.Errorf("docs/explain.md does not show the plugin's real output:\n%s", want)
			}
		}
	}

	// (3) The dashboard's API and page, from pvguard's informer cache.
	for _, p := range s.checkServed(w) {
		t.Error(p)
	}

	// (4) The events: NoVolumeFits once, or not at all; any other event the reason brings.
	evs, err := s.events("PersistentVolumeClaim", w.claim, "NoVolumeFits")
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case !w.noVolumeFits && len(evs) > 0:
		t.Errorf("NoVolumeFits on %s/%s, which waits for %s: %s", s.ns, w.claim, w.waitingFor, evs[0].Message)
	case w.noVolumeFits && len(evs) != 1:
		t.Errorf("%d NoVolumeFits events on %s/%s, want one: %v", len(evs), s.ns, w.claim, harness.DescribeEvents(evs))
	case w.noVolumeFits:
		for _, p := range checkNoVolumeFits(evs[0], cli, w, s.namespaces(w)) {
			t.Errorf("NoVolumeFits on %s/%s: %s", s.ns, w.claim, p)
		}
	}
	if len(w.event) > 0 {
		evs, err := s.events("PersistentVolumeClaim", w.claim, w.event[0])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(evs, func(e corev1.Event) bool { return containsAll(e.Message, w.event[1:]) }) {
			t.Errorf("no %s event on %s/%s saying %q: %v", w.event[0], s.ns, w.claim, w.event[1:], harness.DescribeEvents(evs))
		}
	}
	if !s.t.Failed() {
		pvc, err := s.getClaim(w.claim)
		if err == nil && pvc.Status.Phase != corev1.ClaimPending {
			t.Errorf("claim %s/%s is %s by now, not Pending: the case kept it Pending for too short a time", s.ns, w.claim, pvc.Status.Phase)
		}
	}
	t.Logf("checked in %v", time.Since(started).Round(100*time.Millisecond))
}

// check compares an explanation (the CLI's, or with page set the API's) with w; it returns the
// differences.
func check(e *explain.Explanation, raw map[string]any, w want, page bool) []string {
	var out []string
	waitingFor, state := w.waitingFor, w.state
	if page && w.pageWaitingFor != "" {
		waitingFor = w.pageWaitingFor
	}
	if page && w.pageState != nil {
		state = w.pageState
	}
	if e.WaitingFor != waitingFor {
		out = append(out, fmt.Sprintf("waitingFor %q, want %q", e.WaitingFor, waitingFor))
	}
	if e.Phase != string(corev1.ClaimPending) {
		out = append(out, fmt.Sprintf("phase %q, want Pending", e.Phase))
	}
	if !containsAll(e.State.String(), state) {
		out = append(out, fmt.Sprintf("state %q, want it to say %q", e.State.String(), state))
	}
	if !containsAll(e.Verdict.Text.String(), w.verdict) {
		out = append(out, fmt.Sprintf("verdict %q, want it to say %q", e.Verdict.Text.String(), w.verdict))
	}
	for k, v := range w.fields {
		if got := fmt.Sprint(raw[k]); got != v {
			out = append(out, fmt.Sprintf("%s %q, want %q", k, got, v))
		}
	}
	if w.refused != "" && !page {
		var seen []string
		for _, r := range e.Refused {
			seen = append(seen, r.Point+" "+r.Rule)
		}
		if !slices.Contains(seen, w.refused) {
			out = append(out, fmt.Sprintf("refused %q, want %q", seen, w.refused))
		}
	}
	if w.volume == "" {
		if len(e.Candidates) > 0 {
			out = append(out, fmt.Sprintf("%d candidates, want none", len(e.Candidates)))
		}
		return out
	}
	cand := candidateOf(e, w.volume)
	if cand == nil {
		return append(out, fmt.Sprintf("no row for volume %s", w.volume))
	}
	for _, r := range cand.Checks {
		want, fails := w.failing[r.Check]
		switch {
		case fails && r.Pass:
			out = append(out, fmt.Sprintf("%s: check %s passes, want it to fail with %q", w.volume, r.Check, want))
		case fails && !strings.Contains(r.Value.String(), want):
			out = append(out, fmt.Sprintf("%s: check %s fails with %q, want %q", w.volume, r.Check, r.Value.String(), want))
		case !fails && !r.Pass:
			out = append(out, fmt.Sprintf("%s: check %s fails with %q, want it to pass", w.volume, r.Check, r.Value.String()))
		}
	}
	if cand.Fits != (len(w.failing) == 0) {
		out = append(out, fmt.Sprintf("%s fits: %v", w.volume, cand.Fits))
	}
	return out
}

// checkText checks the plugin's table: the state and verdict as the CLI's (w's, without it), and
// the volume's failing values in its row, or, for a volume of another class, in the line that
// sums those up.
func checkText(out string, cli *explain.Explanation, w want) []string {
	var problems []string
	if !strings.Contains(out, "State: ") || !containsAll(out, w.state) {
		problems = append(problems, fmt.Sprintf("no State line saying %q", w.state))
	}
	if cli != nil && !strings.Contains(out, "\nVerdict: "+cli.Verdict.Text.String()+"\n") {
		problems = append(problems, fmt.Sprintf("no verdict %q (the CLI's)", cli.Verdict.Text.String()))
	}
	if !containsAll(out, w.verdict) {
		problems = append(problems, fmt.Sprintf("the verdict does not say %q", w.verdict))
	}
	if w.volume == "" {
		return problems
	}
	if _, ok := w.failing[explain.CheckClass]; ok {
		if !strings.Contains(out, "1 volume(s) of other classes") {
			problems = append(problems, "no line for the volume of another class")
		}
		return problems
	}
	row := tableRow(out, w.volume)
	if row == "" {
		return append(problems, "no row for volume "+w.volume)
	}
	for _, c := range slices.Sorted(maps.Keys(w.failing)) {
		if !strings.Contains(row, w.failing[c]) {
			problems = append(problems, fmt.Sprintf("%s's row lacks %s's failing value %q: %s", w.volume, c, w.failing[c], row))
		}
	}
	if len(w.failing) == 0 && strings.Count(row, " ok") != len(explain.Checks) {
		problems = append(problems, fmt.Sprintf("%s's row is not all ok: %s", w.volume, row))
	}
	return problems
}

// checkServed checks the API's explanation against w and the page against the API, polling while
// pvguard's cache catches up.
func (s *scene) checkServed(w want) []string {
	api := "/api/v1/explain/pvc/" + s.ns + "/" + w.claim
	htmlPath := "/explain/pvc/" + s.ns + "/" + w.claim
	var problems []string
	_ = harness.Poll(s.ctx, harness.PollInterval, 15*time.Second, func(context.Context) (bool, error) {
		problems = nil
		code, body, err := s.get(api)
		if err != nil || code != 200 {
			problems = []string{fmt.Sprintf("GET %s: HTTP %d %v: %s", api, code, err, body)}
			return false, nil
		}
		e, raw, err := decode(body)
		if err != nil {
			problems = []string{err.Error()}
			return false, nil
		}
		for _, p := range check(e, raw, w, true) {
			problems = append(problems, fmt.Sprintf("GET %s (%s: %s; verdict: %s): %s", api, e.WaitingFor, e.State.String(), e.Verdict.Text.String(), p))
		}
		code, body, err = s.get(htmlPath)
		if err != nil || code != 200 {
			problems = append(problems, fmt.Sprintf("GET %s: HTTP %d %v: %s", htmlPath, code, err, body))
			return false, nil
		}
		pg, err := parsePage(body)
		if err != nil {
			problems = append(problems, fmt.Sprintf("GET %s: %v", htmlPath, err))
			return false, nil
		}
		for _, p := range checkPage(pg, e, w) {
			problems = append(problems, fmt.Sprintf("GET %s: %s", htmlPath, p))
		}
		return len(problems) == 0, nil
	})
	return problems
}

// checkPage holds the page to the API's explanation read just before it.
func checkPage(pg *page, api *explain.Explanation, w want) []string {
	var out []string
	if pg.state != api.State.String() {
		out = append(out, fmt.Sprintf("state %q, the API's %q", pg.state, api.State.String()))
	}
	if pg.verdict != api.Verdict.Text.String() {
		out = append(out, fmt.Sprintf("verdict %q, the API's %q", pg.verdict, api.Verdict.Text.String()))
	}
	cand := candidateOf(api, w.volume)
	if cand == nil {
		return out
	}
	if cand.Class != api.Class {
		if !strings.Contains(pg.others, "1 volume(s) of other classes") {
			out = append(out, fmt.Sprintf("volumes of other classes: %q", pg.others))
		}
		return out
	}
	row, ok := pg.rows[w.volume]
	if !ok {
		return append(out, "no row for volume "+w.volume)
	}
	for _, r := range cand.Checks {
		if c := row[r.Check]; c.pass != r.Pass || c.value != r.Cell() {
			out = append(out, fmt.Sprintf("%s's %s cell %q (pass %v), the API's %q", w.volume, r.Check, c.value, c.pass, r.Cell()))
		}
	}
	return out
}

// checkNoVolumeFits checks the event's message: the closest volume and each failing check with
// its value (the CLI's, else w's), and what would make it fit; with no volume, the verdict.
// namespaces reports whether the case's volume is the namespace's, which the readers of its
// events may be told: linked (claimRef) to one of its claims, or named by the claim.
func (s *scene) namespaces(w want) bool {
	if w.volume == "" {
		return false
	}
	pv, err := s.getVolume(w.volume)
	if err == nil && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == s.ns {
		return true
	}
	pvc, err := s.getClaim(w.claim)
	return err == nil && pvc.Spec.VolumeName == w.volume
}

func checkNoVolumeFits(ev corev1.Event, cli *explain.Explanation, w want, namespaces bool) []string {
	var out []string
	msg := ev.Message
	if ev.Type != corev1.EventTypeWarning || ev.Source.Component != "pvguard-binder" {
		out = append(out, fmt.Sprintf("%s from %q, want a Warning from pvguard-binder", ev.Type, ev.Source.Component))
	}
	if w.volume == "" {
		if !containsAll(msg, w.verdict) {
			out = append(out, fmt.Sprintf("%q does not say %q", msg, w.verdict))
		}
		return out
	}
	// The event is read by whoever may read the namespace's events: the closest volume is named
	// there only when it is the namespace's (linked to or named by its claims); otherwise it is
	// a volume they cannot read.
	switch {
	case namespaces && !strings.Contains(msg, " "+w.volume+": ") && !strings.Contains(msg, " "+w.volume+", "):
		out = append(out, fmt.Sprintf("%q does not name volume %s, which is the namespace's", msg, w.volume))
	case !namespaces && (strings.Contains(msg, w.volume) || !strings.Contains(msg, policy.HiddenVolume)):
		out = append(out, fmt.Sprintf("%q names volume %s, not the namespace's, or does not say it is %q", msg, w.volume, policy.HiddenVolume))
	}
	for _, c := range slices.Sorted(maps.Keys(w.failing)) {
		value := w.failing[c]
		if cli != nil {
			if cand := candidateOf(cli, w.volume); cand != nil {
				for _, r := range cand.Checks {
					if r.Check == c && !r.Pass {
						value = r.Value.String()
					}
				}
			}
		}
		if !strings.Contains(msg, string(c)+" "+value) {
			out = append(out, fmt.Sprintf("%q does not say %s %q", msg, c, value))
		}
	}
	if cli != nil && len(cli.Verdict.Changes) > 0 {
		var changes []string
		for _, c := range cli.Verdict.Changes {
			changes = append(changes, c.String())
		}
		if fix := "it fits if " + strings.Join(changes, " and "); !strings.Contains(msg, fix) {
			out = append(out, fmt.Sprintf("%q does not say %q (the CLI's verdict)", msg, fix))
		}
	}
	return out
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// pod creates a pod that uses the claim, kept to a node by its nodeSelector, for the real
// scheduler to place (no kubelet runs: it is only scheduled).
func (s *scene) pod(name, claim, node string) {
	s.t.Helper()
	s.create(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: node},
			Containers:   []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		},
	})
}

// noDefaultClassNorVolume checks what "no class and no volume" needs of the cluster: no default
// StorageClass (the claim would get it) and no volume at all (the earlier cases' are gone).
func (s *scene) noDefaultClassNorVolume() {
	s.t.Helper()
	var classes storagev1.StorageClassList
	var volumes corev1.PersistentVolumeList
	if err := s.client().List(s.ctx, &classes); err != nil {
		s.t.Fatal(err)
	}
	for _, sc := range classes.Items {
		if sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
			s.t.Fatalf("class %s is the default class", sc.Name)
		}
	}
	if err := s.client().List(s.ctx, &volumes); err != nil {
		s.t.Fatal(err)
	}
	for _, pv := range volumes.Items {
		s.t.Fatalf("volume %s exists (%s)", pv.Name, pv.Status.Phase)
	}
}
