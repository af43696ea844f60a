package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/pvguard/pvguard/explain"
)

// benchCluster is a cluster of n pairs generated on demand, object by object, so that the
// server holding it takes no memory that grows with n and the client's heap is what a benchmark
// measures: of every 20 pairs, 17 are bound, one a pending claim beside an Available volume, one
// a Released volume and one an Available volume; 200 namespaces; 32 nodes. Each object carries two managed-fields entries and a
// last-applied annotation, about 3 KB written, as objects written by kubectl and controllers do.
type benchCluster struct{ n int }

func (b benchCluster) namespace(i int) string { return fmt.Sprintf("ns-%03d", i%200) }

// managed is what kubectl's client-side apply and a controller's status writes leave.
func managed(manager string) []metav1.ManagedFieldsEntry {
	fields := `{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{},"f:pv.kubernetes.io/bind-completed":{}},"f:labels":{".":{},"f:app.kubernetes.io/name":{},"f:app.kubernetes.io/part-of":{}}},"f:spec":{"f:accessModes":{},"f:resources":{"f:requests":{".":{},"f:storage":{}}},"f:storageClassName":{},"f:volumeMode":{},"f:volumeName":{}},"f:status":{"f:accessModes":{},"f:capacity":{".":{},"f:storage":{}},"f:phase":{}}}`
	now := metav1.NewTime(time.Unix(1_700_000_000, 0))
	return []metav1.ManagedFieldsEntry{
		{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}},
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}, Subresource: "status"},
	}
}

func (b benchCluster) claim(i int) corev1.PersistentVolumeClaim {
	class, mode := "rbd", corev1.PersistentVolumeFilesystem
	c := corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: b.namespace(i), Name: fmt.Sprintf("claim-%06d", i), UID: types.UID(fmt.Sprintf("uid-claim-%06d", i)),
			ResourceVersion: "1", Labels: map[string]string{"app.kubernetes.io/name": fmt.Sprintf("app-%06d", i), "app.kubernetes.io/part-of": fmt.Sprintf("service-%03d", i%500)},
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 600)},
			Finalizers:  []string{"kubernetes.io/pvc-protection"}, ManagedFields: managed("kubectl-client-side-apply")},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &class, VolumeMode: &mode,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(strconv.Itoa(1+i%50) + "Gi")}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
	if i%20 < 17 {
		c.Spec.VolumeName = b.volumeName(i)
		c.Annotations["pv.kubernetes.io/bind-completed"] = "yes"
		c.Status.Phase = corev1.ClaimBound
	}
	return c
}

func (b benchCluster) volumeName(i int) string {
	return fmt.Sprintf("pvc-%06d-0000-4000-8000-000000000000", i)
}

func (b benchCluster) volume(i int) corev1.PersistentVolume {
	mode := corev1.PersistentVolumeFilesystem
	v := corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: b.volumeName(i), UID: types.UID(fmt.Sprintf("uid-pv-%06d", i)), ResourceVersion: "1",
			Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": "rbd.csi.ceph.com"},
			Finalizers:  []string{"kubernetes.io/pv-protection", "external-provisioner.volume.kubernetes.io/finalizer"}, ManagedFields: managed("csi-provisioner")},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(strconv.Itoa(1+i%50) + "Gi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: "rbd", VolumeMode: &mode,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "rbd.csi.ceph.com",
				VolumeHandle: fmt.Sprintf("0001-0009-rook-ceph-0000000000000001-%06d", i), FSType: "ext4",
				VolumeAttributes:   map[string]string{"clusterID": "rook-ceph", "imageFeatures": "layering", "pool": "replicapool", "imageName": fmt.Sprintf("csi-vol-%06d", i)},
				NodeStageSecretRef: &corev1.SecretReference{Name: "rook-csi-rbd-node", Namespace: "rook-ceph"}}}},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable},
	}
	switch i % 20 {
	case 18: // Released: its claim is gone
		v.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: b.namespace(i), Name: fmt.Sprintf("gone-%06d", i), UID: "uid-gone"}
		v.Status.Phase = corev1.VolumeReleased
	case 17, 19: // Available
	default:
		c := b.claim(i)
		v.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: c.Namespace, Name: c.Name, UID: c.UID}
		v.Status.Phase = corev1.VolumeBound
	}
	return v
}

// hasClaim says pair i has a claim: bound (0-16 of 20) or pending (17, whose volume is
// Available); 18 is a Released volume and 19 an Available one, without claims.
func (b benchCluster) hasClaim(i int) bool { return i%20 <= 17 }

// serve answers the reads of a claim's local explanation as the apiserver does, in protobuf,
// lists paged by limit and continue (the index of the next pair).
func (b benchCluster) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from, _ := strconv.Atoi(q.Get("continue"))
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 {
		limit = b.n
	}
	page := func() (to int, next string) {
		to = min(from+limit, b.n)
		if to < b.n {
			next = strconv.Itoa(to)
		}
		return to, next
	}
	if discovery, ok := standInDiscovery[r.URL.Path]; ok { // for the binary's Lease read, through controller-runtime's client
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, discovery)
		return
	}
	var obj apiruntime.Object
	switch p := r.URL.Path; {
	case p == "/api/v1/persistentvolumeclaims":
		l := &corev1.PersistentVolumeClaimList{}
		to, next := page()
		for i := from; i < to; i++ {
			if b.hasClaim(i) {
				l.Items = append(l.Items, b.claim(i))
			}
		}
		l.Continue, obj = next, l
	case p == "/api/v1/persistentvolumes":
		l := &corev1.PersistentVolumeList{}
		to, next := page()
		for i := from; i < to; i++ {
			l.Items = append(l.Items, b.volume(i))
		}
		l.Continue, obj = next, l
	case strings.HasPrefix(p, "/api/v1/namespaces/") && strings.Contains(p, "/persistentvolumeclaims/"):
		name := p[strings.LastIndex(p, "/")+1:]
		i, err := strconv.Atoi(strings.TrimPrefix(name, "claim-"))
		if err != nil || i >= b.n || !b.hasClaim(i) {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		c := b.claim(i)
		obj = &c
	case p == "/apis/storage.k8s.io/v1/storageclasses":
		immediate := storagev1.VolumeBindingImmediate
		obj = &storagev1.StorageClassList{Items: []storagev1.StorageClass{{ObjectMeta: metav1.ObjectMeta{Name: "rbd"},
			Provisioner: "rbd.csi.ceph.com", VolumeBindingMode: &immediate}}}
	case p == "/api/v1/nodes":
		l := &corev1.NodeList{}
		for i := range 32 {
			l.Items = append(l.Items, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%02d", i),
				Labels: map[string]string{"kubernetes.io/hostname": fmt.Sprintf("node-%02d", i)}}})
		}
		obj = l
	case strings.HasSuffix(p, "/pods"):
		obj = &corev1.PodList{}
	case strings.HasSuffix(p, "/events"):
		obj = &corev1.EventList{}
	case p == "/apis/coordination.k8s.io/v1/leases":
		obj = &coordinationv1.LeaseList{}
	default:
		http.Error(w, "not served: "+p, http.StatusNotFound)
		return
	}
	mediaType := apiruntime.ContentTypeJSON
	if strings.Contains(r.Header.Get("Accept"), apiruntime.ContentTypeProtobuf) {
		mediaType = apiruntime.ContentTypeProtobuf
	}
	info, ok := apiruntime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		http.Error(w, "no serializer for "+mediaType, http.StatusInternalServerError)
		return
	}
	gv := corev1.SchemeGroupVersion
	switch {
	case strings.HasPrefix(r.URL.Path, "/apis/storage.k8s.io/"):
		gv = storagev1.SchemeGroupVersion
	case strings.HasPrefix(r.URL.Path, "/apis/coordination.k8s.io/"):
		gv = coordinationv1.SchemeGroupVersion
	}
	w.Header().Set("Content-Type", mediaType)
	if err := scheme.Codecs.EncoderForVersion(info.Serializer, gv).Encode(obj, w); err != nil {
		_ = json.NewEncoder(w).Encode(err.Error())
	}
}

// standInDiscovery is the API discovery the stand-in serves, in JSON: the groups and resources
// `pvguard explain pvc` reads.
var standInDiscovery = map[string]string{
	"/api":  `{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1"}]}`,
	"/apis": `{"kind":"APIGroupList","apiVersion":"v1","groups":[` + standInGroup("storage.k8s.io") + `,` + standInGroup("coordination.k8s.io") + `]}`,
	"/api/v1": `{"kind":"APIResourceList","groupVersion":"v1","resources":[` + standInResource("persistentvolumes", "PersistentVolume", false) + `,` +
		standInResource("persistentvolumeclaims", "PersistentVolumeClaim", true) + `,` + standInResource("nodes", "Node", false) + `,` +
		standInResource("pods", "Pod", true) + `,` + standInResource("events", "Event", true) + `]}`,
	"/apis/storage.k8s.io/v1":      `{"kind":"APIResourceList","groupVersion":"storage.k8s.io/v1","resources":[` + standInResource("storageclasses", "StorageClass", false) + `]}`,
	"/apis/coordination.k8s.io/v1": `{"kind":"APIResourceList","groupVersion":"coordination.k8s.io/v1","resources":[` + standInResource("leases", "Lease", true) + `]}`,
}

func standInGroup(group string) string {
	return fmt.Sprintf(`{"name":%q,"versions":[{"groupVersion":"%s/v1","version":"v1"}],"preferredVersion":{"groupVersion":"%s/v1","version":"v1"}}`, group, group, group)
}

func standInResource(name, kind string, namespaced bool) string {
	return fmt.Sprintf(`{"name":%q,"singularName":"","namespaced":%t,"kind":%q,"verbs":["get","list"]}`, name, namespaced, kind)
}

// peakHeap samples the live heap every few milliseconds until stop is called, which returns the
// highest sample.
func peakHeap() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	finished := make(chan struct{})
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(finished)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); <-finished; return peak.Load() }
}

// standInEnv asks the test binary to serve a benchCluster of that many pairs (TestBenchStandIn),
// in a process of its own, so that the benchmark's process is the client alone.
const standInEnv = "PVGUARD_BENCH_STANDIN_PAIRS"

// TestBenchStandIn is BenchmarkLocalExplain's apiserver stand-in when the benchmark starts this
// test binary as its child with standInEnv set: it serves the cluster on a local port, writes
// the address to stdout, and serves until stdin closes. Otherwise it is skipped.
func TestBenchStandIn(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv(standInEnv))
	if err != nil {
		t.Skip("the stand-in apiserver of BenchmarkLocalExplain, run as its child")
	}
	srv := httptest.NewServer(http.HandlerFunc(benchCluster{n: n}.serve))
	defer srv.Close()
	fmt.Println(srv.URL)
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// startStandIn starts the stand-in apiserver of n pairs as a child process and returns its URL
// and its process id.
func startStandIn(b *testing.B, n int) (string, int) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchStandIn$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", standInEnv, n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	url, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("the stand-in apiserver did not start: %v", err)
	}
	return strings.TrimSpace(url), cmd.Process.Pid
}

// processCPU is the user and system time of process pid so far, from /proc (0 where there is
// none).
func processCPU(pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's name, which is in parentheses: utime and stime are the
	// 12th and 13th of them, in clock ticks (100 a second on Linux).
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.Atoi(fields[11])
	stime, _ := strconv.Atoi(fields[12])
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// cpuTime is the process's user and system time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLocalExplain measures `explain pvc`'s local read and explanation of one pending claim
// (readClaimLive, explain.Claim, compactCandidates) against an apiserver stand-in holding 10,000
// or 100,000 pairs (benchCluster) over HTTP in a child process: wall time per explanation, the
// client's CPU time, its peak heap of objects (sampled every 2 ms), and the stand-in's CPU time
// (generating and encoding the objects, which a real apiserver spends differently). docs/benchmarks.md,
// "kubectl pvguard explain".
func BenchmarkLocalExplain(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			c := benchCluster{n: n}
			url, pid := startStandIn(b, n)
			rc := &rest.Config{Host: url}
			const claim = 17 // pending
			var peak uint64
			runtime.GC()
			cpu, serverCPU := cpuTime(b), processCPU(pid)
			b.ResetTimer()
			for range b.N {
				stop := peakHeap()
				in, settled, err := readClaimLiveWith(context.Background(), rc, nil, c.namespace(claim), fmt.Sprintf("claim-%06d", claim))
				if err != nil {
					b.Fatal(err)
				}
				e, err := explain.Claim(in, c.namespace(claim), fmt.Sprintf("claim-%06d", claim))
				if err != nil {
					b.Fatal(err)
				}
				_ = compactCandidates(e, localTop)
				if settled.Total == 0 || e.WaitingFor == "" {
					b.Fatalf("nothing counted (%+v) or no state", settled)
				}
				peak = max(peak, stop())
			}
			b.StopTimer()
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric((cpuTime(b)-cpu).Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric((processCPU(pid)-serverCPU).Seconds()/float64(b.N), "server-cpu-s/op")
		})
	}
}
