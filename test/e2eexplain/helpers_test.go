package e2eexplain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// scene is one case's namespace and the objects it created there and cluster-wide; cleanup
// removes them and waits until its volumes are gone, so that the next case's claims meet none of
// them (each volume is a candidate of every claim, and "closest" is counted over all of them).
type scene struct {
	t       *testing.T
	e       *env
	ctx     context.Context
	ns      string
	classes []string
	volumes []string
}

func newScene(t *testing.T, e *env, ns string) *scene {
	t.Helper()
	s := &scene{t: t, e: e, ctx: context.Background(), ns: ns}
	s.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	t.Cleanup(s.cleanup)
	return s
}

func (s *scene) client() client.Client { return s.e.cl.Client }

func (s *scene) create(obj client.Object) {
	s.t.Helper()
	if err := s.client().Create(s.ctx, obj); err != nil {
		s.t.Fatalf("creating %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
	}
}

// class creates a StorageClass named after the namespace and suffix.
func (s *scene) class(suffix, provisioner string, mode storagev1.VolumeBindingMode) string {
	s.t.Helper()
	name := s.ns + suffix
	s.create(testobj.StorageClass(name, provisioner, func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = &mode }))
	s.classes = append(s.classes, name)
	return name
}

// volume creates a volume named after the namespace and suffix.
func (s *scene) volume(suffix string, mods ...testobj.PVMod) string {
	s.t.Helper()
	name := s.ns + "-" + suffix
	s.create(testobj.PV(name, mods...))
	s.volumes = append(s.volumes, name)
	return name
}

func (s *scene) claim(name string, mods ...testobj.PVCMod) {
	s.t.Helper()
	pvc := testobj.PVC(s.ns, name, mods...)
	pvc.UID = ""
	s.create(pvc)
}

func (s *scene) getClaim(name string) (*corev1.PersistentVolumeClaim, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	return pvc, s.client().Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: name}, pvc)
}

func (s *scene) getVolume(name string) (*corev1.PersistentVolume, error) {
	pv := &corev1.PersistentVolume{}
	return pv, s.client().Get(s.ctx, client.ObjectKey{Name: name}, pv)
}

func (s *scene) waitVolumePhase(name string, phase corev1.PersistentVolumePhase) {
	s.t.Helper()
	harness.WaitFor(s.t, 30*time.Second, "volume "+name+" "+string(phase), func(context.Context) (bool, error) {
		pv, err := s.getVolume(name)
		if err != nil {
			return false, err
		}
		if pv.Status.Phase != phase {
			return false, fmt.Errorf("phase %q", pv.Status.Phase)
		}
		return true, nil
	})
}

func (s *scene) waitClaimBound(name string) {
	s.t.Helper()
	harness.WaitFor(s.t, 30*time.Second, "claim "+s.ns+"/"+name+" Bound", func(context.Context) (bool, error) {
		pvc, err := s.getClaim(name)
		if err != nil {
			return false, err
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			return false, fmt.Errorf("phase %q", pvc.Status.Phase)
		}
		return true, nil
	})
}

// events lists the events in the scene's namespace about the object (kind, name) of a reason.
func (s *scene) events(kind, name, reason string) ([]corev1.Event, error) {
	var list corev1.EventList
	if err := s.client().List(s.ctx, &list, client.InNamespace(s.ns)); err != nil {
		return nil, fmt.Errorf("listing the events of %s: %w", s.ns, err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out, nil
}

func (s *scene) waitEvent(kind, name, reason string) []corev1.Event {
	s.t.Helper()
	var evs []corev1.Event
	harness.WaitFor(s.t, 30*time.Second, fmt.Sprintf("a %s event on %s %s/%s", reason, kind, s.ns, name), func(context.Context) (bool, error) {
		var err error
		evs, err = s.events(kind, name, reason)
		return len(evs) > 0, err
	})
	return evs
}

// cleanup deletes what the scene created and waits until its volumes are gone (the pv-protection
// controller lets a volume go once it is not Bound; the binder releases a volume whose claim is
// deleted). The namespace is deleted without waiting: its events and claims are no candidates.
func (s *scene) cleanup() {
	c, ctx := s.client(), s.ctx
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(s.ns)); err == nil {
		for i := range pods.Items {
			_ = s.e.cl.DeletePod(ctx, &pods.Items[i])
		}
	}
	_ = c.DeleteAllOf(ctx, &corev1.PersistentVolumeClaim{}, client.InNamespace(s.ns))
	for _, name := range s.volumes {
		_ = c.Delete(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	for _, name := range s.classes {
		_ = c.Delete(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	_ = c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}})
	err := harness.Poll(s.ctx, harness.PollInterval, time.Minute, func(context.Context) (bool, error) {
		for _, name := range s.volumes {
			if _, err := s.getVolume(name); !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("volume %s still there (%v)", name, err)
			}
		}
		return true, nil
	})
	if err != nil {
		s.t.Errorf("cleaning up %s: %v; later cases may meet its volumes", s.ns, err)
	}
}

// --- the four surfaces ---

// result is what a command printed and its exit code.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// run runs a program with PATH holding only the freshly built pvguard and its plugin name, HOME an
// empty directory (no ~/.kube/config or kuberc of the machine's user takes part) and KUBECONFIG
// the cluster admin's.
func (s *scene) run(program string, args ...string) result {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Env = []string{"PATH=" + s.e.binDir, "HOME=" + s.t.TempDir(), "KUBECONFIG=" + s.e.kubeconfig}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		s.t.Fatalf("%s %q: %v", program, args, err)
	}
	return r
}

// cli runs `pvguard explain pvc NS/NAME -o json` and decodes what it printed, also as a map (to
// read the JSON fields by name).
func (s *scene) cli(name string, extra ...string) (*explain.Explanation, map[string]any, result, error) {
	s.t.Helper()
	args := append([]string{"explain", "pvc", s.ns + "/" + name, "-o", "json", "--kubeconfig", s.e.kubeconfig}, extra...)
	r := s.run(s.e.pvguard, args...)
	if r.code != 0 {
		return nil, nil, r, fmt.Errorf("pvguard %s: %s", strings.Join(args, " "), r)
	}
	e, raw, err := decode([]byte(r.stdout))
	return e, raw, r, err
}

// plugin runs `kubectl pvguard explain pvc -n NS NAME` (the table).
func (s *scene) plugin(name string, extra ...string) result {
	s.t.Helper()
	return s.run(s.e.kubectl, append([]string{"pvguard", "explain", "pvc", "-n", s.ns, name}, extra...)...)
}

func decode(b []byte) (*explain.Explanation, map[string]any, error) {
	e := &explain.Explanation{}
	if err := json.Unmarshal(b, e); err != nil {
		return nil, nil, fmt.Errorf("decoding the explanation: %w\n%s", err, b)
	}
	raw := map[string]any{}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, nil, err
	}
	return e, raw, nil
}

// get reads one of the suite pvguard's paths.
func (s *scene) get(path string) (int, []byte, error) {
	p := s.e.cl.PVGuard()
	resp, err := p.HTTPClient().Get(p.BaseURL + path)
	if err != nil {
		return 0, nil, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("GET %s: %w", path, err)
	}
	return resp.StatusCode, body, nil
}

// page is what the explanation page shows, read from its HTML (explain/explain.html): the state
// and verdict lines, the line of volumes of other classes, and each row's cells by check.
type page struct {
	state, verdict, others string
	rows                   map[string]map[explain.Check]cell
}

type cell struct {
	pass  bool
	value string
}

var (
	pageState   = regexp.MustCompile(`<p class="state" id="state">State: (.*?)</p>`)
	pageVerdict = regexp.MustCompile(`<p class="verdict" id="verdict">Verdict: (.*?)</p>`)
	pageOthers  = regexp.MustCompile(`<p id="others">(.*?)</p>`)
	pageRow     = regexp.MustCompile(`<tr data-volume="([^"]*)">(.*?)</tr>`)
	pageCell    = regexp.MustCompile(`<td data-check="([^"]*)" class="(pass|fail)">(.*?)</td>`)
)

func parsePage(b []byte) (*page, error) {
	text := string(b)
	p := &page{rows: map[string]map[explain.Check]cell{}}
	m := pageState.FindStringSubmatch(text)
	v := pageVerdict.FindStringSubmatch(text)
	if m == nil || v == nil {
		return nil, fmt.Errorf("no state or verdict on the page:\n%s", text)
	}
	p.state, p.verdict = html.UnescapeString(m[1]), html.UnescapeString(v[1])
	if o := pageOthers.FindStringSubmatch(text); o != nil {
		p.others = html.UnescapeString(o[1])
	}
	for _, r := range pageRow.FindAllStringSubmatch(text, -1) {
		cells := map[explain.Check]cell{}
		for _, c := range pageCell.FindAllStringSubmatch(r[2], -1) {
			cells[explain.Check(c[1])] = cell{pass: c[2] == "pass", value: html.UnescapeString(c[3])}
		}
		p.rows[html.UnescapeString(r[1])] = cells
	}
	return p, nil
}

// tableRow is the line of the text table for volume, "" if there is none.
func tableRow(out, volume string) string {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == volume {
			return l
		}
	}
	return ""
}

func candidateOf(e *explain.Explanation, volume string) *explain.Candidate {
	for i := range e.Candidates {
		if e.Candidates[i].Volume == volume {
			return &e.Candidates[i]
		}
	}
	return nil
}
