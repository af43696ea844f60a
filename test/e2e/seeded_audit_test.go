package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// seederUser writes the seeded violations. The suite's policy config exempts it, as an operator
// would exempt a migration tool: admission lets it through, while the audit (which has no
// requester to exempt) reports what it wrote.
const seederUser = "e2e-seeder"

// expected is one finding a seeded violation must produce.
type expected struct {
	rule, kind, namespace, object string
}

func (e expected) String() string {
	if e.namespace != "" {
		return e.rule + " " + e.kind + " " + e.namespace + "/" + e.object
	}
	return e.rule + " " + e.kind + " " + e.object
}

func (e expected) in(r audit.Report) bool {
	for _, f := range r.Findings {
		if f.Rule == e.rule && f.Kind == e.kind && f.Namespace == e.namespace && f.Object == e.object {
			return true
		}
	}
	return false
}

// seededCluster holds what seedViolations created, to check and then fix.
type seededCluster struct {
	ns       string
	want     []expected
	pvs      []string
	claims   []string
	classes  []string
	node     string
	canary   string
	failedPV string
	lost     string
	default2 string
}

// seedViolations creates, as the exempt seeder, one instance of every violation an audit can
// see: the admission rules that describe a state, and the audit-only rules PVG020-PVG025.
func seedViolations(t *testing.T) *seededCluster {
	t.Helper()
	ctx := context.Background()
	s := newActor(t, seederUser, "system:masters", "system:authenticated")
	ns := harness.PrefixedNamespace(t, admin(t), "seeded")
	sfx := strings.TrimPrefix(ns, "seeded-")
	sc := &seededCluster{ns: ns, node: "seed-node-" + sfx, canary: "canary-" + sfx}
	t.Cleanup(func() { sc.cleanup(t) })
	pvName := func(rule string) string { return "seed-" + strings.ToLower(rule) + "-" + sfx }

	claim := func(name string, mods ...testobj.PVCMod) *corev1.PersistentVolumeClaim {
		t.Helper()
		pvc := harness.FreshPVC(testobj.PVC(ns, name, mods...))
		phase := testobj.PVC(ns, name, mods...).Status.Phase
		harness.Must(t, s.Create(ctx, pvc), "seeding claim "+name)
		if phase != "" {
			pvc.Status.Phase = phase
			harness.Must(t, s.Status().Update(ctx, pvc), "seeding the phase of claim "+name)
		}
		sc.claims = append(sc.claims, name)
		return pvc
	}
	volume := func(name string, mods ...testobj.PVMod) *corev1.PersistentVolume {
		t.Helper()
		pv := testobj.PV(name, mods...)
		status := pv.Status
		harness.Must(t, s.Create(ctx, harness.FreshPV(pv)), "seeding volume "+name)
		if status.Phase != "" {
			pv.Status = status
			harness.Must(t, s.Status().Update(ctx, pv), "seeding the status of volume "+name)
		}
		sc.pvs = append(sc.pvs, name)
		return pv
	}
	// pair binds a claim and a volume to each other as the binder would, whatever they say.
	pair := func(rule string, pvcMods []testobj.PVCMod, pvMods ...testobj.PVMod) {
		t.Helper()
		name := "c-" + strings.ToLower(rule)
		c := claim(name, append([]testobj.PVCMod{testobj.ClaimBoundTo(pvName(rule))}, pvcMods...)...)
		volume(pvName(rule), append([]testobj.PVMod{testobj.BoundTo(c)}, pvMods...)...)
		sc.want = append(sc.want, expected{rule, "PersistentVolumeClaim", ns, name})
	}

	block := corev1.PersistentVolumeBlock
	pair("PVG001", []testobj.PVCMod{testobj.ClaimVolumeMode(block)})
	pair("PVG005", []testobj.PVCMod{testobj.Request("5Gi")})
	pair("PVG006", []testobj.PVCMod{testobj.ClaimAccessModes(corev1.ReadWriteMany)})
	pair("PVG007", []testobj.PVCMod{testobj.ClaimClass("gold")}, testobj.Class("silver"))
	pair("PVG008", []testobj.PVCMod{testobj.Selector(map[string]string{"tier": "fast"})})
	pair("PVG018", []testobj.PVCMod{testobj.ClaimVolumeAttributesClass("gold")}, testobj.VolumeAttributesClass("silver"),
		testobj.CSI("csi.example.com", "seed-vac", nil)) // the apiserver wants a CSI source beside a VolumeAttributesClass

	node := testobj.Node(sc.node, map[string]string{"topology.kubernetes.io/zone": "zone-a"})
	harness.Must(t, s.Create(ctx, node), "seeding node")
	pair("PVG009", []testobj.PVCMod{testobj.ClaimMeta(testobj.Annotation("volume.kubernetes.io/selected-node", sc.node))},
		testobj.NodeAffinity("topology.kubernetes.io/zone", "zone-b"))

	// Two claims name one volume: the second is double-bound.
	first := claim("c-pvg004-a", testobj.ClaimBoundTo(pvName("PVG004")))
	volume(pvName("PVG004"), testobj.BoundTo(first))
	claim("c-pvg004-b", testobj.VolumeName(pvName("PVG004")))
	sc.want = append(sc.want, expected{"PVG004", "PersistentVolumeClaim", ns, "c-pvg004-b"})

	// A claim takes a volume that was never offered to it by spec.volumeName.
	volume(pvName("PVG010"))
	claim("c-pvg010", testobj.VolumeName(pvName("PVG010")))
	sc.want = append(sc.want, expected{"PVG010", "PersistentVolumeClaim", ns, "c-pvg010"})

	// A claim says it is bound to a volume that points at another claim.
	volume(pvName("PVG022"), testobj.ClaimRef(ns, "someone-else", "u-someone-else"), testobj.Phase(corev1.VolumeBound))
	claim("c-pvg022", testobj.ClaimBoundTo(pvName("PVG022")))
	sc.want = append(sc.want, expected{"PVG022", "PersistentVolumeClaim", ns, "c-pvg022"})

	volume(pvName("PVG014"), testobj.ClaimRef(ns, "not-a-claim", ""), func(pv *corev1.PersistentVolume) {
		pv.Spec.ClaimRef.Kind = "Pod"
	})
	sc.want = append(sc.want, expected{"PVG014", "PersistentVolume", "", pvName("PVG014")})

	volume(pvName("PVG015"), testobj.Phase(corev1.VolumeBound))
	sc.want = append(sc.want, expected{"PVG015", "PersistentVolume", "", pvName("PVG015")})

	volume(pvName("PVG016"), testobj.CSI("csi.example.com", "h-"+sfx, map[string]string{"password": sc.canary}))
	sc.want = append(sc.want, expected{"PVG016", "PersistentVolume", "", pvName("PVG016")})

	volume(pvName("PVG020"), testobj.ClaimRef(ns, "gone", "u-gone"), testobj.Phase(corev1.VolumeBound))
	sc.want = append(sc.want, expected{"PVG020", "PersistentVolume", "", pvName("PVG020")})

	sc.lost = "c-pvg021"
	claim(sc.lost, testobj.ClaimPhase(corev1.ClaimLost))
	sc.want = append(sc.want, expected{"PVG021", "PersistentVolumeClaim", ns, sc.lost})

	longAgo := metav1.NewTime(time.Now().Add(-30 * 24 * time.Hour))
	volume(pvName("PVG023"), testobj.ClaimRef(ns, "was-here", "u-was-here"), func(pv *corev1.PersistentVolume) {
		pv.Status.Phase = corev1.VolumeReleased
		pv.Status.LastPhaseTransitionTime = &longAgo
	})
	sc.want = append(sc.want, expected{"PVG023", "PersistentVolume", "", pvName("PVG023")})

	sc.failedPV = pvName("PVG024")
	volume(sc.failedPV, testobj.Phase(corev1.VolumeFailed))
	sc.want = append(sc.want, expected{"PVG024", "PersistentVolume", "", sc.failedPV})

	// A local volume whose node is gone (the seeded node stands for the nodes that exist).
	volume(pvName("PVG025"), testobj.NodeAffinity(corev1.LabelHostname, "gone-node-"+sfx), testobj.Phase(corev1.VolumeAvailable))
	sc.want = append(sc.want, expected{"PVG025", "PersistentVolume", "", pvName("PVG025")})

	for _, c := range []string{"seed-default-a-" + sfx, "seed-default-b-" + sfx} {
		harness.Must(t, s.Create(ctx, testobj.StorageClass(c, "example.com/csi", testobj.DefaultClass)), "seeding default class "+c)
		sc.classes = append(sc.classes, c)
		sc.want = append(sc.want, expected{"PVG017", "StorageClass", "", c})
	}
	sc.default2 = sc.classes[1]
	return sc
}

// fix repairs or removes every seeded violation, as an operator would after reading the report.
func (sc *seededCluster) fix(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	s := newActor(t, seederUser, "system:masters", "system:authenticated")
	// Repaired in place: the failed volume is made Available, the second default class demoted.
	pv := &corev1.PersistentVolume{}
	harness.Must(t, s.Get(ctx, client.ObjectKey{Name: sc.failedPV}, pv), "reading the failed volume")
	pv.Status.Phase = corev1.VolumeAvailable
	harness.Must(t, s.Status().Update(ctx, pv), "making the failed volume Available")
	class := &storagev1.StorageClass{}
	harness.Must(t, s.Get(ctx, client.ObjectKey{Name: sc.default2}, class), "reading the second default class")
	delete(class.Annotations, "storageclass.kubernetes.io/is-default-class")
	harness.Must(t, s.Update(ctx, class), "demoting the second default class")
	// The rest is removed.
	for _, name := range sc.claims {
		harness.Must(t, patchPVC(ctx, s, sc.ns, name, func(c *corev1.PersistentVolumeClaim) { c.Finalizers = nil }), "releasing claim "+name)
		if err := s.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: sc.ns, Name: name}}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting claim %s: %v", name, err)
		}
	}
	for _, name := range sc.pvs {
		if name == sc.failedPV {
			continue
		}
		harness.Must(t, patchPV(ctx, s, name, func(v *corev1.PersistentVolume) { v.Finalizers = nil }), "releasing volume "+name)
		if err := s.Delete(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting volume %s: %v", name, err)
		}
	}
	harness.Must(t, s.Delete(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: sc.classes[0]}}), "deleting the first default class")
}

// cleanup removes whatever is left of the seeded objects, also after a failed test, so that
// later tests do not see them in their reports.
func (sc *seededCluster) cleanup(t *testing.T) {
	ctx := context.Background()
	a := newActor(t, seederUser, "system:masters", "system:authenticated")
	for _, name := range sc.claims {
		_ = patchPVC(ctx, a, sc.ns, name, func(c *corev1.PersistentVolumeClaim) { c.Finalizers = nil })
		_ = a.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: sc.ns, Name: name}})
	}
	for _, name := range sc.pvs {
		_ = patchPV(ctx, a, name, func(v *corev1.PersistentVolume) { v.Finalizers = nil })
		_ = a.Delete(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	for _, name := range sc.classes {
		_ = a.Delete(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	_ = a.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: sc.node}})
}

// clusterReportResults gathers the results of every report pvguard wrote, as "RULE kind ns/name".
func reportResults(t *testing.T, ns string) (map[string]openreports.ReportResult, error) {
	ctx := context.Background()
	rc := reportsClient(t)
	out := map[string]openreports.ReportResult{}
	var clusterReports openreports.ClusterReportList
	if err := rc.List(ctx, &clusterReports, client.MatchingLabels{"app.kubernetes.io/managed-by": "pvguard"}); err != nil {
		return nil, err
	}
	var reports openreports.ReportList
	if err := rc.List(ctx, &reports, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/managed-by": "pvguard"}); err != nil {
		return nil, err
	}
	var results []openreports.ReportResult
	for _, r := range clusterReports.Items {
		results = append(results, r.Results...)
	}
	for _, r := range reports.Items {
		results = append(results, r.Results...)
	}
	for _, r := range results {
		for _, s := range r.Subjects {
			e := expected{rule: r.Rule, kind: s.Kind, namespace: s.Namespace, object: s.Name}
			out[e.String()] = r
		}
	}
	return out, nil
}

// TestSeededViolationsEverywhereThenFixed seeds every audit-detectable violation, checks the JSON
// report, the OpenReports objects, `pvguard audit --kubeconfig` and the dashboard in a real
// browser all show each one, then fixes them and checks every place forgets them.
func TestSeededViolationsEverywhereThenFixed(t *testing.T) {
	sc := seedViolations(t)

	harness.Eventually(t, time.Minute, "every seeded violation in /api/v1/report", func(context.Context) error {
		r := report(t)
		var missing []string
		for _, e := range sc.want {
			if !e.in(r) {
				missing = append(missing, e.String())
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("missing %v", missing)
		}
		return nil
	})
	r := report(t)
	for _, f := range r.Findings {
		if strings.Contains(f.Message.String()+f.Hint.String(), sc.canary) {
			t.Errorf("the report carries a CSI attribute value: %s", f.Message)
		}
	}

	harness.Eventually(t, time.Minute, "every seeded violation in the OpenReports objects", func(context.Context) error {
		got, err := reportResults(t, sc.ns)
		if err != nil {
			return err
		}
		var missing []string
		for _, e := range sc.want {
			res, ok := got[e.String()]
			if !ok {
				missing = append(missing, e.String())
				continue
			}
			if res.Source != "pvguard" || res.Policy == "" || res.Description == "" || res.Severity == "" || res.Category == "" {
				return fmt.Errorf("incomplete result for %s: %+v", e, res)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("missing %v", missing)
		}
		return nil
	})

	runCLI := func() audit.Report {
		t.Helper()
		var out, errOut bytes.Buffer
		err := cli.RunAudit(cli.AuditFlags{Kubeconfig: suite.kubeconfig, Output: "json"}, &out, &errOut)
		var exit *cli.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("pvguard audit: %v\n%s", err, errOut.String())
		}
		var r audit.Report
		harness.Must(t, decodeJSON(out.Bytes(), &r), "decoding pvguard audit -o json")
		return r
	}
	cr := runCLI()
	for _, e := range sc.want {
		if !e.in(cr) {
			t.Errorf("pvguard audit --kubeconfig does not report %s", e)
		}
	}

	page := openDashboard(t)
	page.expectFindings(t, sc.want, "seeded")
	page.expectFilter(t, "PVG024", sc.failedPV)

	sc.fix(t)
	harness.Eventually(t, time.Minute, "the fixed violations gone from /api/v1/report", func(context.Context) error {
		r := report(t)
		var left []string
		for _, e := range sc.want {
			if e.in(r) {
				left = append(left, e.String())
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("still reported: %v", left)
		}
		return nil
	})
	harness.Eventually(t, time.Minute, "the fixed violations gone from the OpenReports objects", func(context.Context) error {
		got, err := reportResults(t, sc.ns)
		if err != nil {
			return err
		}
		for _, e := range sc.want {
			if _, ok := got[e.String()]; ok {
				return fmt.Errorf("still in a report: %s", e)
			}
		}
		return nil
	})
	cr = runCLI()
	for _, e := range sc.want {
		if e.in(cr) {
			t.Errorf("pvguard audit --kubeconfig still reports %s", e)
		}
	}
	page.expectNoFindings(t, sc.want, "fixed")
}
