package localstatic

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// The expected names were computed outside Go (FNV-1a 32 over the concatenated strings), so a
// change to the hashing fails here.
func TestPVName(t *testing.T) {
	for _, tc := range []struct{ file, node, class, want string }{
		{"vol1", "node-a", "local-wffc", "local-pv-d5fcc937"},
		{"vol2", "node-a", "local-wffc", "local-pv-72e88ab2"},
		{"vol1", "node-b", "local-wffc", "local-pv-5b1a3cf6"},
		{"vol1", "node-a", "other", "local-pv-e89f8833"},
		{"disk-0", "worker", "fast-disks", "local-pv-67b10102"},
	} {
		if got := PVName(tc.file, tc.node, tc.class); got != tc.want {
			t.Errorf("PVName(%q, %q, %q) = %s, want %s", tc.file, tc.node, tc.class, got, tc.want)
		}
	}
}

func TestRoundDownCapacityPretty(t *testing.T) {
	for name, tc := range map[string]struct{ in, want int64 }{
		"tiny stays":              {500, 500},
		"1Mi tmpfs stays":         {mib, mib},
		"9.5Mi stays":             {9*mib + mib/2, 9*mib + mib/2},
		"10.5Mi to 10Mi":          {10*mib + mib/2, 10 * mib},
		"9.9Gi to whole MiB":      {9*gib + 9*gib/10, 9*gib + 9*gib/10 - (9*gib/10)%mib},
		"10.5Gi to 10Gi":          {10*gib + gib/2, 10 * gib},
		"exactly 10Gi stays 10Gi": {10 * gib, 10 * gib},
	} {
		if got := roundDownCapacityPretty(tc.in); got != tc.want {
			t.Errorf("%s: roundDownCapacityPretty(%d) = %d, want %d", name, tc.in, got, tc.want)
		}
	}
}

// fakeVolumes is the host as the unit tests see it: which paths are mount points, and the size
// of each filesystem.
type fakeVolumes struct {
	mounts   map[string]struct{}
	capacity map[string]int64
}

func (f fakeVolumes) mountPoints() (map[string]struct{}, error) { return f.mounts, nil }

func (f fakeVolumes) fsCapacity(path string) (int64, error) {
	if c, ok := f.capacity[path]; ok {
		return c, nil
	}
	return mib, nil
}

// world is one fake node's provisioner against a fake clientset, driven pass by pass.
type world struct {
	t      *testing.T
	cs     *fake.Clientset
	np     *nodeProvisioner
	events *record.FakeRecorder
	dir    string
	vols   fakeVolumes
}

const (
	testNode  = "worker"
	testUID   = types.UID("0f1e2d3c")
	testHost  = "worker-host" // differs from the node name: affinity must use the label
	testClass = "fast-disks"
)

func node() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: testNode, UID: testUID,
		Labels: map[string]string{corev1.LabelHostname: testHost, corev1.LabelTopologyZone: "zone-1"},
	}}
}

func class(reclaim *corev1.PersistentVolumeReclaimPolicy, mountOptions ...string) *storagev1.StorageClass {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: testClass},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: &wffc,
		ReclaimPolicy:     reclaim,
		MountOptions:      mountOptions,
	}
}

func policy(p corev1.PersistentVolumeReclaimPolicy) *corev1.PersistentVolumeReclaimPolicy { return &p }

// newWorld starts one node's provisioner (informers synced, no loop) over objs; mutate adjusts
// the configuration.
func newWorld(t *testing.T, mutate func(*Config), objs ...runtime.Object) *world {
	t.Helper()
	w := &world{
		t:      t,
		cs:     fake.NewClientset(objs...),
		events: record.NewFakeRecorder(100),
		dir:    t.TempDir(),
		vols:   fakeVolumes{mounts: map[string]struct{}{}, capacity: map[string]int64{}},
	}
	cfg := Config{
		Nodes:   []Node{{Name: testNode, Dirs: map[string]string{testClass: w.dir}}},
		Classes: map[string]ClassConfig{testClass: {}},
		hooks: &hooks{vol: w.vols, recorder: func(string) record.EventRecorder {
			return w.events
		}},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	np, err := newNodeProvisioner(ctx, w.cs, cfg, cfg.Nodes[0])
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); np.shutdown() })
	w.np = np
	return w
}

// volume makes name a directory of the discovery directory; mounted says whether the host lists
// it as a mount point.
func (w *world) volume(name string, mounted bool, capacity int64) string {
	w.t.Helper()
	p := filepath.Join(w.dir, name)
	if err := os.Mkdir(p, 0o755); err != nil {
		w.t.Fatal(err)
	}
	if mounted {
		w.vols.mounts[p] = struct{}{}
	}
	if capacity != 0 {
		w.vols.capacity[p] = capacity
	}
	return p
}

func (w *world) pvs() map[string]*corev1.PersistentVolume {
	w.t.Helper()
	list, err := w.cs.CoreV1().PersistentVolumes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	out := map[string]*corev1.PersistentVolume{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// settle waits until the provisioner's cache holds exactly the PVs of the fake API that are its
// own (the populator runs on informer events, asynchronously).
func (w *world) settle() {
	w.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		for name, pv := range w.pvs() {
			cached, ok := w.np.cache.get(name)
			own := pv.Annotations[annProvisionedBy] == w.np.name
			if own != ok || (ok && cached.ResourceVersion != pv.ResourceVersion) {
				return false, nil
			}
		}
		for _, pv := range w.np.cache.list() {
			if _, ok := w.pvs()[pv.Name]; !ok {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		w.t.Fatalf("the provisioner's cache never caught up with the API: %v", err)
	}
}

// pass runs the deleter, waits for the cleaning it started, then runs discovery, as one turn of
// upstream's loop (the wait stands in for the discovery period).
func (w *world) pass() error {
	w.t.Helper()
	w.settle()
	derr := w.np.deletePVs(context.Background())
	w.np.cleaners.Wait()
	w.settle()
	err := w.np.discover(context.Background())
	w.settle()
	if derr != nil {
		return derr
	}
	return err
}

func (w *world) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-w.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestDiscoveryShapesPVsAsUpstream(t *testing.T) {
	const name = "local-pv-67b10102" // PVName("disk-0", "worker", "fast-disks")
	base := func() *corev1.PersistentVolume {
		fs := corev1.PersistentVolumeFilesystem
		return &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{annProvisionedBy: "local-volume-provisioner-worker-0f1e2d3c"},
			},
			Spec: corev1.PersistentVolumeSpec{
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName:              testClass,
				VolumeMode:                    &fs,
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{testHost}}},
				}}}},
			},
		}
	}
	extraTerm := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpExists}}}
	for _, tc := range []struct {
		name   string
		config func(*Config)
		class  *storagev1.StorageClass
		want   func(pv *corev1.PersistentVolume)
	}{
		{
			name:  "defaults: class without reclaim policy gives Delete",
			class: class(nil),
			want:  func(*corev1.PersistentVolume) {},
		},
		{
			name:  "reclaim policy and mount options come from the StorageClass",
			class: class(policy(corev1.PersistentVolumeReclaimRetain), "noatime", "nodiratime"),
			want: func(pv *corev1.PersistentVolume) {
				pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
				pv.Spec.MountOptions = []string{"noatime", "nodiratime"}
			},
		},
		{
			name: "labels: copied node labels that exist, then labelsForPV",
			config: func(c *Config) {
				c.NodeLabelsForPV = []string{corev1.LabelHostname, corev1.LabelTopologyZone, "absent"}
				c.LabelsForPV = map[string]string{"pv-labels": "can-be-selected"}
			},
			class: class(policy(corev1.PersistentVolumeReclaimDelete)),
			want: func(pv *corev1.PersistentVolume) {
				pv.Labels = map[string]string{corev1.LabelHostname: testHost, corev1.LabelTopologyZone: "zone-1", "pv-labels": "can-be-selected"}
			},
		},
		{
			name: "class config: access mode, fsType, extra selector term ORed after the hostname term",
			config: func(c *Config) {
				c.Classes[testClass] = ClassConfig{AccessMode: corev1.ReadWriteOncePod, FsType: "ext4", Selector: []corev1.NodeSelectorTerm{extraTerm}}
			},
			class: class(nil),
			want: func(pv *corev1.PersistentVolume) {
				pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
				ext4 := "ext4"
				pv.Spec.Local.FSType = &ext4
				pv.Spec.NodeAffinity.Required.NodeSelectorTerms = append(pv.Spec.NodeAffinity.Required.NodeSelectorTerms, extraTerm)
			},
		},
		{
			name:   "useNodeNameOnly: provisioner named after the node only",
			config: func(c *Config) { c.UseNodeNameOnly = true },
			class:  class(nil),
			want: func(pv *corev1.PersistentVolume) {
				pv.Annotations[annProvisionedBy] = "local-volume-provisioner-worker"
			},
		},
		{
			name:   "setPVOwnerRef: the Node owns the PV",
			config: func(c *Config) { c.SetPVOwnerRef = true },
			class:  class(nil),
			want: func(pv *corev1.PersistentVolume) {
				pv.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: testNode, UID: testUID}}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.config, node(), tc.class)
			path := w.volume("disk-0", true, 10*gib+gib/2)
			if err := w.pass(); err != nil {
				t.Fatalf("discovery failed: %v", err)
			}
			want := base()
			want.Spec.Local = &corev1.LocalVolumeSource{Path: path}
			tc.want(want)
			got, ok := w.pvs()[name]
			if !ok {
				t.Fatalf("no PV %s; PVs: %v", name, keys(w.pvs()))
			}
			if !equality.Semantic.DeepEqual(got.ObjectMeta.Labels, want.Labels) ||
				!equality.Semantic.DeepEqual(got.Annotations, want.Annotations) ||
				!equality.Semantic.DeepEqual(got.OwnerReferences, want.OwnerReferences) {
				t.Errorf("metadata: labels %v annotations %v owners %v; want %v %v %v", got.Labels, got.Annotations, got.OwnerReferences, want.Labels, want.Annotations, want.OwnerReferences)
			}
			if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
				t.Errorf("spec:\n got %+v\nwant %+v", got.Spec, want.Spec)
			}
			if len(w.pvs()) != 1 {
				t.Errorf("PVs %v, want only %s", keys(w.pvs()), name)
			}
		})
	}
}

func TestDiscoveryDecisions(t *testing.T) {
	own := "local-volume-provisioner-worker-0f1e2d3c"
	existing := func(name, by, path string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: by}},
			Spec: corev1.PersistentVolumeSpec{
				PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}},
				StorageClassName:       testClass,
			},
		}
	}
	for _, tc := range []struct {
		name    string
		config  func(*Config)
		class   *storagev1.StorageClass // nil: none in the API
		setup   func(w *world) []runtime.Object
		created []string // names of the PVs discovery must create
		wantErr string   // a substring of the pass's error; "" for none
	}{
		{
			name:    "a mount point becomes a PV",
			class:   class(nil),
			setup:   func(w *world) []runtime.Object { w.volume("vol1", true, 0); return nil },
			created: []string{PVName("vol1", testNode, testClass)},
		},
		{
			name:    "a plain directory is not a volume",
			class:   class(nil),
			setup:   func(w *world) []runtime.Object { w.volume("vol1", false, 0); return nil },
			wantErr: "not a mount point",
		},
		{
			name:  "a regular file is not a volume",
			class: class(nil),
			setup: func(w *world) []runtime.Object {
				if err := os.WriteFile(filepath.Join(w.dir, "README"), nil, 0o644); err != nil {
					w.t.Fatal(err)
				}
				return nil
			},
			wantErr: "neither a directory nor a block device",
		},
		{
			name:   "only names matching one of the patterns",
			config: func(c *Config) { c.Classes[testClass] = ClassConfig{NamePattern: "disk-*,ssd-?"} },
			class:  class(nil),
			setup: func(w *world) []runtime.Object {
				w.volume("disk-0", true, 0)
				w.volume("ssd-1", true, 0)
				w.volume("other", true, 0)
				return nil
			},
			created: []string{PVName("disk-0", testNode, testClass), PVName("ssd-1", testNode, testClass)},
		},
		{
			name:    "no StorageClass: nothing discovered",
			setup:   func(w *world) []runtime.Object { w.volume("vol1", true, 0); return nil },
			wantErr: "reading the reclaim policy of StorageClass fast-disks",
		},
		{
			name:    "a Recycle class discovers nothing",
			class:   class(policy(corev1.PersistentVolumeReclaimRecycle)),
			setup:   func(w *world) []runtime.Object { w.volume("vol1", true, 0); return nil },
			wantErr: `reclaimPolicy "Recycle" is not supported`,
		},
		{
			name:  "already discovered: its own PV under that name",
			class: class(nil),
			setup: func(w *world) []runtime.Object {
				p := w.volume("vol1", true, 0)
				return []runtime.Object{existing(PVName("vol1", testNode, testClass), own, p)}
			},
		},
		{
			name:  "a path already used by another of its PVs is skipped",
			class: class(nil),
			setup: func(w *world) []runtime.Object {
				p := w.volume("vol1", true, 0)
				return []runtime.Object{existing("hand-made", own, p)}
			},
		},
		{
			name:  "a PV of another provisioner under the same name is not its own: creating fails",
			class: class(nil),
			setup: func(w *world) []runtime.Object {
				p := w.volume("vol1", true, 0)
				return []runtime.Object{existing(PVName("vol1", testNode, testClass), "someone-else", p)}
			},
			wantErr: "already exists",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The directory and the API objects are made before the provisioner starts, so its
			// informers list them.
			dir := t.TempDir()
			pre := &world{t: t, dir: dir, vols: fakeVolumes{mounts: map[string]struct{}{}, capacity: map[string]int64{}}}
			objs := append([]runtime.Object{node()}, tc.setup(pre)...)
			if tc.class != nil {
				objs = append(objs, tc.class)
			}
			before := map[string]bool{}
			for _, o := range objs {
				if pv, ok := o.(*corev1.PersistentVolume); ok {
					before[pv.Name] = true
				}
			}
			w := newWorld(t, func(c *Config) {
				c.Nodes[0].Dirs[testClass] = dir
				if tc.config != nil {
					tc.config(c)
				}
			}, objs...)
			w.np.vol, w.dir = pre.vols, dir

			err := w.pass()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("pass failed: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("pass error %v, want one containing %q", err, tc.wantErr)
			}
			var created []string
			for name := range w.pvs() {
				if !before[name] {
					created = append(created, name)
				}
			}
			slices.Sort(created)
			want := slices.Sorted(slices.Values(tc.created))
			if !slices.Equal(created, want) {
				t.Errorf("created PVs %v, want %v", created, want)
			}
		})
	}
}

func TestDeleterDecisions(t *testing.T) {
	const vol = "vol1"
	name := PVName(vol, testNode, testClass)
	own := "local-volume-provisioner-worker-0f1e2d3c"
	for _, tc := range []struct {
		name      string
		pvName    string // the PV's name; the one discovery gives vol1 when empty
		phase     corev1.PersistentVolumePhase
		reclaim   corev1.PersistentVolumeReclaimPolicy
		by        string
		deleting  bool
		class     string // the PV's class; testClass when empty
		cleaned   bool   // the volume's contents are gone
		deleted   bool   // the PV is gone from the API (then rediscovered)
		wantEvent string // a reason among the events; "" for none
	}{
		{name: "Released + Delete: cleaned, deleted, rediscovered", phase: corev1.VolumeReleased, reclaim: corev1.PersistentVolumeReclaimDelete, by: own, cleaned: true, deleted: true},
		{name: "Released + Retain: left for the administrator", phase: corev1.VolumeReleased, reclaim: corev1.PersistentVolumeReclaimRetain, by: own},
		{name: "Released + Recycle: unsupported, warned", phase: corev1.VolumeReleased, reclaim: corev1.PersistentVolumeReclaimRecycle, by: own, wantEvent: reasonUnsupported},
		{name: "Bound + Delete: in use, untouched", phase: corev1.VolumeBound, reclaim: corev1.PersistentVolumeReclaimDelete, by: own},
		{name: "Available + Delete: untouched", phase: corev1.VolumeAvailable, reclaim: corev1.PersistentVolumeReclaimDelete, by: own},
		{name: "Released + Delete but already being deleted: untouched", phase: corev1.VolumeReleased, reclaim: corev1.PersistentVolumeReclaimDelete, by: own, deleting: true},
		{name: "Released + Delete of another provisioner: not its own", pvName: "local-pv-someone-elses", phase: corev1.VolumeReleased, reclaim: corev1.PersistentVolumeReclaimDelete, by: "local-volume-provisioner-other-1"},
		{name: "Released + Delete in a class it does not serve: warned", phase: corev1.VolumeReleased, reclaim: corev1.PersistentVolumeReclaimDelete, by: own, class: "elsewhere", wantEvent: reasonFailedDelete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, vol)
			if err := os.MkdirAll(filepath.Join(path, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(path, "sub", "data"), []byte("left by the last pod"), 0o644); err != nil {
				t.Fatal(err)
			}
			fs := corev1.PersistentVolumeFilesystem
			pvClass := tc.class
			if pvClass == "" {
				pvClass = testClass
			}
			pvName := tc.pvName
			if pvName == "" {
				pvName = name
			}
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: pvName, UID: "first", Annotations: map[string]string{annProvisionedBy: tc.by}},
				Spec: corev1.PersistentVolumeSpec{
					PersistentVolumeReclaimPolicy: tc.reclaim,
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
					PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}},
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName:              pvClass,
					VolumeMode:                    &fs,
					ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "default", Name: "gone", UID: "claim-uid"},
				},
				Status: corev1.PersistentVolumeStatus{Phase: tc.phase},
			}
			if tc.deleting {
				now := metav1.Now()
				pv.DeletionTimestamp = &now
				pv.Finalizers = []string{"kubernetes.io/pv-protection"}
			}
			w := newWorld(t, func(c *Config) { c.Nodes[0].Dirs[testClass] = dir }, node(), class(nil), pv)
			w.vols.mounts[path] = struct{}{}

			// First pass: the deleter starts cleaning; discovery sees the PV still there.
			err1 := w.pass()
			// Second pass: the deleter sees the cleaning done and deletes the PV; discovery finds
			// the volume again once the deletion reached the cache.
			err2 := w.pass()
			if tc.wantEvent == "" && (err1 != nil || err2 != nil) {
				t.Errorf("passes failed: %v / %v", err1, err2)
			}

			_, statErr := os.Stat(filepath.Join(path, "sub", "data"))
			if gone := os.IsNotExist(statErr); gone != tc.cleaned {
				t.Errorf("volume contents gone = %v, want %v (stat: %v)", gone, tc.cleaned, statErr)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("the volume's directory itself must stay: %v", err)
			}
			var deletes int
			for _, a := range w.cs.Actions() {
				if a.GetVerb() == "delete" && a.GetResource().Resource == "persistentvolumes" {
					deletes++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tc.deleted]; deletes != want {
				t.Errorf("PV deletions %d, want %d", deletes, want)
			}
			now, exists := w.pvs()[pvName]
			if !exists {
				t.Fatalf("PV %s missing: a deleted volume must be rediscovered", pvName)
			}
			if tc.deleted && (now.Status.Phase == corev1.VolumeReleased || now.Spec.ClaimRef != nil) {
				t.Errorf("rediscovered PV still shows the old volume: phase %q claimRef %v", now.Status.Phase, now.Spec.ClaimRef)
			}
			events := w.drainEvents()
			found := false
			for _, e := range events {
				found = found || strings.Contains(e, " "+tc.wantEvent+" ")
			}
			if tc.wantEvent != "" && !found {
				t.Errorf("events %q, want one with reason %s", events, tc.wantEvent)
			}
			if tc.wantEvent == "" && len(events) > 0 {
				t.Errorf("unexpected events %q", events)
			}
		})
	}
}

// TestLoopStopsCleanly runs the real loop on a fake clientset through a whole cycle and checks
// that Wait returns once the context ends.
func TestLoopStopsCleanly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vol1")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset(node(), class(nil))
	vols := fakeVolumes{mounts: map[string]struct{}{path: {}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := Start(ctx, cs, Config{
		Nodes:           []Node{{Name: testNode, Dirs: map[string]string{testClass: dir}}},
		Classes:         map[string]ClassConfig{testClass: {}},
		DiscoveryPeriod: 10 * time.Millisecond,
		OnError:         func(node string, err error) { t.Errorf("%s: %v", node, err) },
		hooks:           &hooks{vol: vols, recorder: func(string) record.EventRecorder { return record.NewFakeRecorder(100) }},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Name(testNode); got != "local-volume-provisioner-worker-0f1e2d3c" {
		t.Errorf("Name = %q", got)
	}
	name := PVName("vol1", testNode, testClass)
	get := func() (*corev1.PersistentVolume, error) {
		return cs.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	}
	poll := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	poll("discovery", func() bool { _, err := get(); return err == nil })
	if err := os.WriteFile(filepath.Join(path, "data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	pv, _ := get()
	pv.Status.Phase = corev1.VolumeReleased
	if _, err := cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll("cleaning, deletion and rediscovery", func() bool {
		pv, err := get()
		_, statErr := os.Stat(filepath.Join(path, "data"))
		return err == nil && pv.Status.Phase != corev1.VolumeReleased && os.IsNotExist(statErr)
	})

	cancel()
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the provisioner did not stop within 10s of its context ending")
	}
}

func TestConfigErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"no nodes":       {Config{Classes: map[string]ClassConfig{"c": {}}}, "Config.Nodes is empty"},
		"unknown class":  {Config{Nodes: []Node{{Name: "n", Dirs: map[string]string{"c": "/x"}}}}, `Dirs["c"]: no such class`},
		"relative dir":   {Config{Nodes: []Node{{Name: "n", Dirs: map[string]string{"c": "x"}}}, Classes: map[string]ClassConfig{"c": {}}}, "not an absolute path"},
		"block class":    {Config{Nodes: []Node{{Name: "n", Dirs: map[string]string{"c": "/x"}}}, Classes: map[string]ClassConfig{"c": {VolumeMode: corev1.PersistentVolumeBlock}}}, "Block volumes are not modelled"},
		"duplicate node": {Config{Nodes: []Node{{Name: "n", Dirs: map[string]string{"c": "/x"}}, {Name: "n", Dirs: map[string]string{"c": "/y"}}}, Classes: map[string]ClassConfig{"c": {}}}, "appears twice"},
	} {
		if _, err := tc.cfg.withDefaults(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
	// A node without the hostname label cannot get volumes: their affinity names it.
	n := node()
	delete(n.Labels, corev1.LabelHostname)
	_, err := Start(context.Background(), fake.NewClientset(n), Config{
		Nodes:   []Node{{Name: testNode, Dirs: map[string]string{testClass: "/x"}}},
		Classes: map[string]ClassConfig{testClass: {}},
	})
	if err == nil || !strings.Contains(err.Error(), "has no kubernetes.io/hostname") {
		t.Errorf("Start on a node without hostname label: %v", err)
	}
}

func keys[V any](m map[string]V) []string { return sortedKeys(m) }
