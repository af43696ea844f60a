// Package e2epolicytest holds `pvguard test` to a real cluster: the starter suites' write cases
// (docs/examples/policy-tests) are made on a real kube-apiserver with pvguard's webhooks
// registered, over the suites' fixtures created there, each as its requester (impersonated) and
// as a dry run, and the apiserver's answer must name the same rules, refused and warned, as
// `pvguard test` offline.
package e2epolicytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/internal/policytest"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/harness"
)

var h *harness.Harness

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	if h, err = harness.Start("{}\n"); err != nil {
		fmt.Fprintln(os.Stderr, "e2epolicytest:", err)
		return 1
	}
	defer func() { _ = h.Stop() }()
	return m.Run()
}

// onCluster are the starter suites whose write cases are made on the cluster as dry runs, each
// in the fixtures as given; inSequence the sequential ones, whose writes are made for real, in
// order, each in the state the writes before it left. Not populator-hand-off: the apiserver gives
// each claim a uid of its own, and the populator's claim is named after its target's uid in the
// fixtures, so on the cluster it is not the claim made for the target, and PVG002 refuses the
// hand-off there, rightly.
var (
	onCluster  = []string{"rules", "rename-pvc", "velero-restore-default-install", "velero-with-its-exemption", "forged-hand-off"}
	inSequence = []string{"static-binding", "dynamic-provisioning", "wait-for-first-consumer", "longhorn-default-install", "longhorn-with-its-exemption"}
)

// TestSuitesAgreeWithTheCluster makes each write case of the suites above on a real apiserver
// with pvguard's webhooks registered, and compares the answer with `pvguard test`'s.
func TestSuitesAgreeWithTheCluster(t *testing.T) {
	suites, errs := policytest.Load([]string{filepath.Join(harness.RepoRoot(), "docs", "examples", "policy-tests")})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, name := range onCluster {
		i := slices.IndexFunc(suites, func(s *policytest.Suite) bool { return s.Name == name })
		if i < 0 {
			t.Fatalf("no starter suite %q", name)
		}
		t.Run(name, func(t *testing.T) { ran += agree(t, suites[i]) })
	}
	if ran < 30 {
		t.Errorf("%d write cases made on the cluster, want at least 30", ran)
	}
}

// TestSequencesAgreeWithTheCluster makes the writes of the sequential suites above on the
// cluster, for real and in order, and compares each answer with `pvguard test`'s at that step:
// the state `pvguard test` stores each admitted write in is the state the apiserver stores.
func TestSequencesAgreeWithTheCluster(t *testing.T) {
	suites, errs := policytest.Load([]string{filepath.Join(harness.RepoRoot(), "docs", "examples", "policy-tests")})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, name := range inSequence {
		i := slices.IndexFunc(suites, func(s *policytest.Suite) bool { return s.Name == name })
		if i < 0 {
			t.Fatalf("no starter suite %q", name)
		}
		t.Run(name, func(t *testing.T) { inOrder(t, suites[i]) })
	}
}

// inOrder makes a sequential suite's writes on the cluster, each for real once a dry run of it
// gets the answer `pvguard test` gave at that step (pvguard's informer cache may not have seen
// the write before it yet: the dry runs wait for it, up to a minute).
func inOrder(t *testing.T, s *policytest.Suite) {
	ctx := context.Background()
	rep := policytest.Run(ctx, []*policytest.Suite{s}, policytest.Options{})
	if rep.Failed > 0 {
		t.Fatalf("the suite fails offline: %+v", rep)
	}
	offline := rep.Suites[0].Cases
	admin := newClient(t, "")
	removeWebhooks(t, admin)
	clearCluster(t, admin)
	uids := createFixtures(t, admin, s)
	grantWriters(t, admin, s)
	stop := serve(t, admin, s)
	defer stop()

	for k, c := range s.Cases {
		if c.Write == nil {
			continue
		}
		w, err := c.Write.Resolve(liveFixtures(t, admin))
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		want := offline[k].Got
		var (
			got  policytest.Verdict
			last error
		)
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			if got, err = onTheCluster(ctx, t, w, uids, true); err != nil && ctx.Err() == nil {
				last = err
			}
			return err == nil && got.String() == want, nil
		})
		switch {
		case err != nil && last != nil:
			t.Fatalf("%s: %v", c.Name, last)
		case err != nil:
			t.Fatalf("%s: a dry run on the cluster got %s (%s), pvguard test %s", c.Name, got, got.Message, want)
		}
		if got, err = onTheCluster(ctx, t, w, uids, false); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if got.String() != want {
			t.Fatalf("%s: the cluster answered %s (%s), pvguard test %s", c.Name, got, got.Message, want)
		}
		t.Logf("%s: %s on the cluster and offline", c.Name, got)
	}
}

// serve starts pvguard with the suite's policy config, its cache filled with what the cluster
// holds, and registers its webhooks; the returned function undoes both.
func serve(t *testing.T, admin client.Client, s *policytest.Suite) func() {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "policy.yaml")
	config := s.PolicyConfig()
	if config == nil {
		config = []byte("{}\n")
	}
	if err := os.WriteFile(cfg, config, 0o600); err != nil {
		t.Fatal(err)
	}
	inst, err := h.Serve(func(o *cli.ServeFlags) { o.ConfigFile = cfg })
	if err != nil {
		t.Fatal(err)
	}
	if err := h.InstallWebhooks(inst); err != nil {
		_ = inst.Stop()
		t.Fatal(err)
	}
	return func() {
		removeWebhooks(t, admin)
		if err := inst.Stop(); err != nil {
			t.Errorf("stopping pvguard: %v", err)
		}
	}
}

// liveFixtures are the cluster's volumes, claims and classes.
func liveFixtures(t *testing.T, c client.Client) *policytest.Fixtures {
	t.Helper()
	ctx := context.Background()
	var pvs corev1.PersistentVolumeList
	var pvcs corev1.PersistentVolumeClaimList
	var scs storagev1.StorageClassList
	for _, l := range []client.ObjectList{&pvs, &pvcs, &scs} {
		if err := c.List(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	f := &policytest.Fixtures{}
	for i := range pvs.Items {
		f.Volumes = append(f.Volumes, &pvs.Items[i])
	}
	for i := range pvcs.Items {
		f.Claims = append(f.Claims, &pvcs.Items[i])
	}
	for i := range scs.Items {
		f.Classes = append(f.Classes, &scs.Items[i])
	}
	return f
}

// agree makes a suite's write cases on the cluster and returns how many it made.
func agree(t *testing.T, s *policytest.Suite) int {
	ctx := context.Background()
	admin := newClient(t, "")
	removeWebhooks(t, admin)
	clearCluster(t, admin)
	uids := createFixtures(t, admin, s)
	grantWriters(t, admin, s)

	// pvguard serves the suite's policy config, its cache filled with the fixtures.
	stop := serve(t, admin, s)
	defer stop()

	made := 0
	for _, c := range s.Cases {
		if c.Write == nil {
			continue
		}
		made++
		offline := s.Admit(ctx, c.Write)
		if d := c.Write.Expect.Judge(offline); d != "" {
			t.Errorf("%s: offline: %s", c.Name, d)
		}
		got, err := onTheCluster(ctx, t, c.Write, uids, true)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if !slices.Equal(got.Deny, offline.Deny) || !slices.Equal(got.Warn, offline.Warn) {
			t.Errorf("%s: the cluster answered %s, pvguard test %s\n  cluster: %s\n  offline: %s", c.Name, got, offline, got.Message, offline.Message)
		} else {
			t.Logf("%s: %s on the cluster and offline", c.Name, got)
		}
	}
	return made
}

// onTheCluster makes a write as its requester, as a dry run or for real, and reads pvguard's
// answer from the apiserver's: the rules its denial names and those of its warnings. A write
// made for real that creates an object maps the uid the suite gave it to the apiserver's.
func onTheCluster(ctx context.Context, t *testing.T, w *policytest.Write, uids map[types.UID]types.UID, dryRun bool) (policytest.Verdict, error) {
	warnings := &devcluster.Warnings{}
	groups := slices.DeleteFunc(slices.Clone(w.User.Groups), func(g string) bool { return g == user.AllAuthenticated })
	if strings.HasPrefix(w.User.Username, "system:serviceaccount:") {
		groups = nil // the apiserver gives an impersonated ServiceAccount its groups
	}
	c, err := devcluster.NewClient(h.Config, warnings, w.User.Username, groups...)
	if err != nil {
		return policytest.Verdict{}, err
	}
	admin := newClient(t, "")
	var obj client.Object
	if w.Operation != admissionv1.Delete {
		if obj, err = decode(w.Kind, w.Object, uids); err != nil {
			return policytest.Verdict{}, err
		}
	}
	var dry []string
	if dryRun {
		dry = []string{metav1.DryRunAll}
	}
	switch w.Operation {
	case admissionv1.Create:
		given := obj.GetUID()
		obj.SetUID("")
		obj.SetResourceVersion("")
		if err = c.Create(ctx, obj, &client.CreateOptions{DryRun: dry}); err == nil && !dryRun && given != "" {
			uids[given] = obj.GetUID()
		}
	case admissionv1.Update:
		live, err2 := decode(w.Kind, w.OldObject, uids)
		if err2 != nil {
			return policytest.Verdict{}, err2
		}
		if err2 := admin.Get(ctx, client.ObjectKeyFromObject(live), live); err2 != nil {
			return policytest.Verdict{}, fmt.Errorf("reading the object written: %w", err2)
		}
		obj.SetUID(live.GetUID())
		obj.SetResourceVersion(live.GetResourceVersion())
		obj.SetCreationTimestamp(live.GetCreationTimestamp())
		if w.SubResource == "status" {
			err = c.Status().Update(ctx, obj, &client.SubResourceUpdateOptions{UpdateOptions: client.UpdateOptions{DryRun: dry}})
		} else {
			err = c.Update(ctx, obj, &client.UpdateOptions{DryRun: dry})
		}
	case admissionv1.Delete:
		old, err2 := decode(w.Kind, w.OldObject, uids)
		if err2 != nil {
			return policytest.Verdict{}, err2
		}
		old.SetResourceVersion("")
		err = c.Delete(ctx, old, &client.DeleteOptions{DryRun: dry})
	}
	var v policytest.Verdict
	switch {
	case err == nil:
	case strings.Contains(err.Error(), `.pvguard.io" denied the request`):
		v.Deny = rulesIn(err.Error())
		v.Message = err.Error()
	default:
		return v, fmt.Errorf("the apiserver answered %w", err)
	}
	for _, text := range warnings.Take() {
		v.Warn = append(v.Warn, rulesIn(text)...)
		v.Message += "\n" + text
	}
	slices.Sort(v.Warn)
	v.Warn = slices.Compact(v.Warn)
	return v, nil
}

var ruleRef = regexp.MustCompile(`\[(PVG[0-9]+) `)

// rulesIn reads the rules a message names: "[PVG001 volume-mode-match] ...".
func rulesIn(msg string) []string {
	var ids []string
	for _, m := range ruleRef.FindAllStringSubmatch(msg, -1) {
		ids = append(ids, m[1])
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// decode decodes an object of a write, its uids (its own, and a claimRef's) made the cluster's.
func decode(kind policy.Kind, js []byte, uids map[types.UID]types.UID) (client.Object, error) {
	var obj client.Object
	switch kind {
	case policy.KindPersistentVolume:
		obj = &corev1.PersistentVolume{}
	case policy.KindPersistentVolumeClaim:
		obj = &corev1.PersistentVolumeClaim{}
	default:
		obj = &storagev1.StorageClass{}
	}
	if err := json.Unmarshal(js, obj); err != nil {
		return nil, err
	}
	if u, ok := uids[obj.GetUID()]; ok {
		obj.SetUID(u)
	}
	if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Spec.ClaimRef != nil {
		if u, ok := uids[pv.Spec.ClaimRef.UID]; ok {
			pv.Spec.ClaimRef.UID = u
		}
	}
	return obj, nil
}

func newClient(t *testing.T, impersonate string, groups ...string) client.Client {
	t.Helper()
	c, err := devcluster.NewClient(h.Config, nil, impersonate, groups...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// removeWebhooks deletes pvguard's webhook configurations, so that fixtures can be made and
// removed as they are, whatever the policy says of it.
func removeWebhooks(t *testing.T, c client.Client) {
	t.Helper()
	for _, obj := range []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: devcluster.ChartRelease}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: devcluster.ChartRelease}},
	} {
		if err := c.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
}

// clearCluster deletes every volume, claim, class and attributes class (their finalizers removed
// first).
func clearCluster(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	var pvs corev1.PersistentVolumeList
	var pvcs corev1.PersistentVolumeClaimList
	var scs storagev1.StorageClassList
	var vacs storagev1.VolumeAttributesClassList
	for _, l := range []client.ObjectList{&pvs, &pvcs, &scs, &vacs} {
		if err := c.List(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	var objs []client.Object
	for i := range pvs.Items {
		objs = append(objs, &pvs.Items[i])
	}
	for i := range pvcs.Items {
		objs = append(objs, &pvcs.Items[i])
	}
	for i := range scs.Items {
		objs = append(objs, &scs.Items[i])
	}
	for i := range vacs.Items {
		objs = append(objs, &vacs.Items[i])
	}
	for _, o := range objs {
		if len(o.GetFinalizers()) > 0 {
			o.SetFinalizers(nil)
			if err := c.Update(ctx, o); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
		if err := c.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.List(ctx, &pvs); err != nil {
			return false, err
		}
		if err := c.List(ctx, &pvcs); err != nil {
			return false, err
		}
		return len(pvs.Items) == 0 && len(pvcs.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("volumes and claims left: %d, %d", len(pvs.Items), len(pvcs.Items))
	}
}

// createFixtures creates a suite's fixtures (their namespaces first; claims before the volumes
// whose claimRef names them, so that the claimRef carries the uid the apiserver gave the claim)
// with their status, and returns the uids the apiserver gave for those the fixtures had.
func createFixtures(t *testing.T, c client.Client, s *policytest.Suite) map[types.UID]types.UID {
	t.Helper()
	ctx := context.Background()
	f := s.Fixtures
	namespaces := map[string]bool{}
	for _, pvc := range f.Claims {
		namespaces[pvc.Namespace] = true
	}
	for _, kase := range s.Cases {
		if kase.Write != nil && kase.Write.Namespace != "" {
			namespaces[kase.Write.Namespace] = true
		}
	}
	for ns := range namespaces {
		err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	create := func(obj client.Object, status func(client.Object)) {
		t.Helper()
		fresh := obj.DeepCopyObject().(client.Object)
		fresh.SetUID("")
		fresh.SetResourceVersion("")
		if err := c.Create(ctx, fresh); err != nil {
			t.Fatalf("creating fixture %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
		}
		if status != nil {
			status(fresh)
			if err := c.Status().Update(ctx, fresh); err != nil {
				t.Fatalf("writing the status of fixture %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
			}
		}
	}
	for _, sc := range f.Classes {
		create(sc, nil)
	}
	for _, vac := range f.AttributesClasses {
		create(vac, nil)
	}
	for _, n := range f.Nodes {
		err := c.Create(ctx, n.DeepCopy())
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	uids := map[types.UID]types.UID{}
	for _, pvc := range f.Claims {
		create(pvc, func(o client.Object) { o.(*corev1.PersistentVolumeClaim).Status = pvc.Status })
		live := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), live); err != nil {
			t.Fatal(err)
		}
		if pvc.UID != "" {
			uids[pvc.UID] = live.UID
		}
	}
	for _, pv := range f.Volumes {
		pv = pv.DeepCopy()
		if ref := pv.Spec.ClaimRef; ref != nil {
			if u, ok := uids[ref.UID]; ok {
				ref.UID = u
			}
		}
		create(pv, func(o client.Object) { o.(*corev1.PersistentVolume).Status = pv.Status })
		live := &corev1.PersistentVolume{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pv), live); err != nil {
			t.Fatal(err)
		}
		if pv.UID != "" {
			uids[pv.UID] = live.UID
		}
	}
	return uids
}

// grantWriters lets every requester of the suite's writes write volumes, claims and classes, so
// that what refuses a write is pvguard, not RBAC.
func grantWriters(t *testing.T, c client.Client, s *policytest.Suite) {
	t.Helper()
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "policytest-writers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
	}
	seen := map[string]bool{}
	for _, kase := range s.Cases {
		if w := kase.Write; w != nil && !seen[w.User.Username] {
			seen[w.User.Username] = true
			binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: w.User.Username})
		}
	}
	ctx := context.Background()
	if err := c.Delete(ctx, binding.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := c.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
}
