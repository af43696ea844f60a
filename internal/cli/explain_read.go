package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/storage"
)

// listPage is how many objects one list request of the local explanation returns: few round
// trips (40 at 100,000 pairs: from a laptop, each one is the network's), each page read as it
// streams in (eachItems), so the page's size does not set the client's memory.
const listPage = 5000

// settledPairs is what a claim's local explanation makes of the settled volumes (settledVolume:
// bound to another claim, or Released by a claim that is gone): the binder plans only claims
// without a volume and gives out only free volumes or those pre-bound to such a claim
// (binder.Plan), so a settled volume is no one's to take, and policy judges only pairs that pass
// claimRef, which it fails. It still counts for the verdict when no volume fits (the closest
// volume may be one that would fit if it were freed), so the read keeps the closest of them (at
// most settledKept, ranked as the candidate table ranks) and counts the rest: Total, by class and
// by the check each fails first.
type settledPairs struct {
	Total   int
	ByClass map[string]int
	ByCheck map[explain.Check]int
}

// settledKept is how many settled volumes the local read keeps: the closest, from which
// the verdict names one when nothing fits. More than localTop, so the rows shown are the closest.
const settledKept = 2 * localTop

// boundClaim is what the local read keeps of a claim that names its volume, until the volumes
// show whether that volume names it back.
type boundClaim struct {
	namespace, name, volume string
}

// readClaimLive reads, from the cluster of rc as the user of rc, what the explanation of the
// claim namespace/name reads (readClaimInput): the large lists in protobuf and page by page.
func readClaimLive(ctx context.Context, rc *rest.Config, namespace, name string) (explain.Input, settledPairs, error) {
	// Leases are one filtered request (explain.ReadProvisionerLeases), through the same client
	// library the server uses.
	leases, err := client.New(rc, client.Options{})
	if err != nil {
		return explain.Input{}, settledPairs{}, fmt.Errorf("connecting to %s: %w", rc.Host, err)
	}
	return readClaimLiveWith(ctx, rc, leases, namespace, name)
}

// readKindsLive adds to st, listed live, the objects of the kinds beyond the typed reads that
// the rules judging the pairs read (clusterstate.Readables): none for the shipped rules.
func readKindsLive(ctx context.Context, rc *rest.Config, st *clusterstate.State, kinds []clusterstate.Kind) (*clusterstate.State, error) {
	kinds = slices.DeleteFunc(slices.Clone(kinds), func(k clusterstate.Kind) bool {
		_, ok := clusterstate.ReadableKind(k)
		return !ok
	})
	if len(kinds) == 0 {
		return st, nil
	}
	c, err := client.New(rc, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", rc.Host, err)
	}
	return clusterstate.ReadKinds(ctx, c, st, kinds...)
}

// readClaimLiveWith is readClaimLive reading Leases from leases (nil: none).
func readClaimLiveWith(ctx context.Context, rc *rest.Config, leases client.Reader, namespace, name string) (explain.Input, settledPairs, error) {
	pc := rest.CopyConfig(rc)
	pc.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	pc.ContentType = runtime.ContentTypeProtobuf
	// One request at a time, each waiting for the one before: client-go's default limit (5/s
	// after a burst of 10) would only add waits, 200 ms a page past the tenth. The apiserver's
	// own fairness (API Priority and Fairness) still queues this user's requests.
	if pc.QPS == 0 {
		pc.QPS, pc.Burst = -1, 0
	}
	cs, err := kubernetes.NewForConfig(pc)
	if err != nil {
		return explain.Input{}, settledPairs{}, fmt.Errorf("connecting to %s: %w", rc.Host, err)
	}
	in, settled, err := readClaimInput(ctx, cs, restPages(cs.CoreV1().RESTClient()), leases, namespace, name, listPage, settledKept)
	if errors.Is(err, explain.ErrUnknownClaim) {
		return explain.Input{}, settledPairs{}, err // bad input, said as it is
	}
	if err != nil {
		return explain.Input{}, settledPairs{}, fmt.Errorf("reading %s: %w", rc.Host, err)
	}
	return in, settled, nil
}

// readClaimInput reads what the explanation of the claim namespace/name needs, without holding
// the cluster: the claim; every class; the nodes' names and labels; the pods and events of the
// claim's namespace; the claims without a volume (those the binder plans, which compete for the
// same volumes) whole, and of the others only which volume each names; the volumes, but for
// the settled ones (settledVolume), of which only the closest are kept and the rest counted
// (settledPairs); and, with leases set, the Leases of the claim's provisioner. Claims naming a
// volume that does not name them back are read again one by one: they are few, and the state
// holds them whole. Lists are read page objects at a time; claims and volumes through pages, as
// they stream in, each object decoded whole only when it is kept (explain_wire.go,
// explain_scan.go); keep is how many settled volumes it keeps (settledKept). A claim that does
// not exist is explain.ErrUnknownClaim.
func readClaimInput(ctx context.Context, cs kubernetes.Interface, pages pageReader, leases client.Reader, namespace, name string, page int64, keep int) (explain.Input, settledPairs, error) {
	settled := settledPairs{ByClass: map[string]int{}, ByCheck: map[explain.Check]int{}}
	target, err := cs.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return explain.Input{}, settled, fmt.Errorf("%w %s/%s", explain.ErrUnknownClaim, namespace, name)
	}
	if err != nil {
		return explain.Input{}, settled, fmt.Errorf("reading claim %s/%s: %w", namespace, name, err)
	}

	classes, err := listClasses(ctx, cs, page)
	if err != nil {
		return explain.Input{}, settled, err
	}
	in := explain.Input{NodesListed: true, Now: time.Now()}
	nodes, err := listNodeLabels(ctx, cs, page)
	if err != nil {
		return explain.Input{}, settled, err
	}
	if err := listPodsAndEvents(ctx, cs, &in, namespace, page); err != nil {
		return explain.Input{}, settled, err
	}
	claims, whole, bound, err := readClaimList(ctx, pages, target, page)
	if err != nil {
		return explain.Input{}, settled, err
	}
	closest := closestSettled{keep: keep, target: target, classes: classes, nodes: nodes, pods: in.Pods, out: &settled}
	volumes, err := readVolumeList(ctx, pages, target, whole, bound, &closest, page)
	if err != nil {
		return explain.Input{}, settled, err
	}
	// The claims left in bound name a volume that does not name them back: read them whole.
	for _, b := range sortedBound(bound) {
		c, err := cs.CoreV1().PersistentVolumeClaims(b.namespace).Get(ctx, b.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return explain.Input{}, settled, fmt.Errorf("reading claim %s/%s: %w", b.namespace, b.name, err)
		}
		claims = append(claims, trimClaim(c))
	}

	in.State = clusterstate.New(claims, volumes, classes, nodes).WithPods(in.Pods)
	if leases != nil {
		if err := explain.ReadProvisionerLeases(ctx, leases, &in, namespace, name); err != nil {
			return explain.Input{}, settled, err
		}
	}
	return in, settled, nil
}

// listClasses lists every storage class, page objects at a time.
func listClasses(ctx context.Context, cs kubernetes.Interface, page int64) ([]*storagev1.StorageClass, error) {
	var classes []*storagev1.StorageClass
	err := eachPage(ctx, page, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l, err := cs.StorageV1().StorageClasses().List(ctx, o)
		if err != nil {
			return "", err
		}
		for i := range l.Items {
			classes = append(classes, &l.Items[i])
		}
		return l.Continue, nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing storage classes: %w", err)
	}
	return classes, nil
}

// listNodeLabels lists the nodes, keeping of each only its name, uid and labels.
func listNodeLabels(ctx context.Context, cs kubernetes.Interface, page int64) ([]*corev1.Node, error) {
	// Nodes: only names and labels, all that the binder and the explanation read of a node.
	var nodes []*corev1.Node
	err := eachPage(ctx, page, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l, err := cs.CoreV1().Nodes().List(ctx, o)
		if err != nil {
			return "", err
		}
		for i := range l.Items {
			n := &l.Items[i]
			nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, Labels: n.Labels}})
		}
		return l.Continue, nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return nodes, nil
}

// listPodsAndEvents lists the pods and events of namespace into in, without managed fields.
func listPodsAndEvents(ctx context.Context, cs kubernetes.Interface, in *explain.Input, namespace string, page int64) error {
	err := eachPage(ctx, page, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l, err := cs.CoreV1().Pods(namespace).List(ctx, o)
		if err != nil {
			return "", err
		}
		for i := range l.Items {
			p := &l.Items[i]
			p.ManagedFields = nil
			in.Pods = append(in.Pods, p)
		}
		return l.Continue, nil
	})
	if err != nil {
		return fmt.Errorf("listing pods in namespace %s: %w", namespace, err)
	}
	err = eachPage(ctx, page, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l, err := cs.CoreV1().Events(namespace).List(ctx, o)
		if err != nil {
			return "", err
		}
		for i := range l.Items {
			e := &l.Items[i]
			e.ManagedFields = nil
			in.Events = append(in.Events, e)
		}
		return l.Continue, nil
	})
	if err != nil {
		return fmt.Errorf("listing events in namespace %s: %w", namespace, err)
	}
	return nil
}

// readClaimList lists the claims: whole those without a volume and target, of the others only
// the volume each names (bound); whole says which claims were kept whole.
func readClaimList(ctx context.Context, pages pageReader, target *corev1.PersistentVolumeClaim, page int64) ([]*corev1.PersistentVolumeClaim, map[types.UID]bool, map[types.UID]boundClaim, error) {
	// Claims: whole when the binder may plan them (no volume named) or when explained; else
	// only the volume each names, by uid.
	var claims []*corev1.PersistentVolumeClaim
	whole := map[types.UID]bool{} // the claims kept whole: a volume naming one may be planned for it
	bound := map[types.UID]boundClaim{}
	err := eachItems(ctx, pages, "persistentvolumeclaims", "PersistentVolumeClaimList", page, func(items [][]byte) error {
		for _, item := range items {
			f, err := scanClaim(item)
			if err != nil {
				return err
			}
			if types.UID(f.uid) != target.UID && f.volumeName != "" {
				bound[types.UID(f.uid)] = boundClaim{namespace: f.namespace, name: f.name, volume: f.volumeName}
				continue
			}
			// The explained claim as this list has it, so the state is one list's.
			c, err := decodeClaim(item)
			if err != nil {
				return err
			}
			claims = append(claims, c)
			whole[c.UID] = true
		}
		return nil
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("listing claims: %w", err)
	}
	if !containsClaim(claims, target.UID) {
		claims = append(claims, trimClaim(target)) // created after the list began
	}
	return claims, whole, bound, nil
}

// readVolumeList lists the volumes: the settled ones go to closest, which keeps the closest and
// counts the rest; bound loses each claim whose volume names it back.
func readVolumeList(ctx context.Context, pages pageReader, target *corev1.PersistentVolumeClaim, whole map[types.UID]bool, bound map[types.UID]boundClaim, closest *closestSettled, page int64) ([]*corev1.PersistentVolume, error) {
	var volumes []*corev1.PersistentVolume
	err := eachItems(ctx, pages, "persistentvolumes", "PersistentVolumeList", page, func(items [][]byte) error {
		var pairs []*corev1.PersistentVolume
		for _, item := range items {
			f, err := scanVolume(item)
			if err != nil {
				return err
			}
			if b, ok := bound[types.UID(f.refUID)]; ok && b.volume == f.name && b.namespace == f.refNamespace && b.name == f.refName {
				delete(bound, types.UID(f.refUID)) // the claim's volume names it back: it stays in no one's way
			}
			settledOne := settledVolume(f, target, whole)
			if first, ok := closest.outranked(f.class, f.name); settledOne && ok {
				closest.count(f.class, first) // counted without being decoded
				continue
			}
			v, err := decodeVolume(item)
			if err != nil {
				return err
			}
			if settledOne {
				pairs = append(pairs, v)
				continue
			}
			volumes = append(volumes, v)
		}
		return closest.add(pairs)
	})
	if err != nil {
		return nil, fmt.Errorf("listing volumes: %w", err)
	}
	return append(volumes, closest.kept...), nil
}

// settledVolume says the volume of f (what the read scanned of it) is no one's to take in a plan
// made now, so that the explanation of target needs only its row: it names, by uid, a claim that the plan does not consider (bound, or
// gone: none of those kept whole, which are every claim without a volume), and it is not
// Available, so not free (binder.Plan gives out free volumes and those pre-bound to a pending
// claim). The claim's own volume, and the volume it names, are the subject of its state and stay.
func settledVolume(f volumeFacts, target *corev1.PersistentVolumeClaim, whole map[types.UID]bool) bool {
	uid := types.UID(f.refUID)
	return uid != "" && !whole[uid] && uid != target.UID && f.name != target.Spec.VolumeName &&
		f.phase != string(corev1.VolumeAvailable) && f.phase != string(corev1.VolumePending)
}

// eachPage calls list with Limit page and each Continue token it returns, until the last page.
func eachPage(ctx context.Context, page int64, list func(context.Context, metav1.ListOptions) (next string, err error)) error {
	o := metav1.ListOptions{Limit: page}
	for {
		next, err := list(ctx, o)
		if err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		o.Continue = next
	}
}

// trimClaim copies a claim without the managed fields, which no rule, the binder nor the
// explanation reads, and which are most of a written object's size.
func trimClaim(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	cp := *c
	cp.ManagedFields, cp.Annotations = nil, withoutLastApplied(c.Annotations)
	return &cp
}

// lastApplied is the annotation `kubectl apply` keeps the applied configuration in: a copy of the
// object, which no rule reads.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// withoutLastApplied is annotations without lastApplied (annotations itself when it has none).
func withoutLastApplied(annotations map[string]string) map[string]string {
	if _, ok := annotations[lastApplied]; !ok {
		return annotations
	}
	out := make(map[string]string, len(annotations)-1)
	for k, v := range annotations {
		if k != lastApplied {
			out[k] = v
		}
	}
	return out
}

func containsClaim(claims []*corev1.PersistentVolumeClaim, uid types.UID) bool {
	for _, c := range claims {
		if c.UID == uid {
			return true
		}
	}
	return false
}

// sortedBound is bound's claims in namespace/name order, so that the state's order does not
// depend on the map's.
func sortedBound(bound map[types.UID]boundClaim) []boundClaim {
	out := make([]boundClaim, 0, len(bound))
	for _, b := range bound {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].namespace != out[j].namespace {
			return out[i].namespace < out[j].namespace
		}
		return out[i].name < out[j].name
	})
	return out
}

// closestSettled keeps, of the settled volumes, the keep closest to the claim target, ranked as
// the candidate table ranks them (by checks failed, then the claim's class first, then by name),
// and counts the others into out.
type closestSettled struct {
	keep    int
	target  *corev1.PersistentVolumeClaim
	classes []*storagev1.StorageClass
	nodes   []*corev1.Node
	pods    []*corev1.Pod
	out     *settledPairs
	kept    []*corev1.PersistentVolume
	// worst is the last of the kept rows once keep are kept: a volume that cannot rank before it
	// is counted without being checked.
	worst *explain.Candidate
}

// add ranks pairs (one page's settled volumes) with those kept so far, by the explanation's own
// checks: the target's explanation over only these volumes, where no plan gives any of them
// out, so each row is as the whole cluster's explanation has it. Once keep are kept, volumes
// that cannot rank before the last of them are counted without being checked (outranked).
func (k *closestSettled) add(pairs []*corev1.PersistentVolume) error {
	var check []*corev1.PersistentVolume
	for _, v := range pairs {
		if first, ok := k.outranked(storage.VolumeClass(v), v.Name); ok {
			k.count(storage.VolumeClass(v), first)
			continue
		}
		check = append(check, v)
	}
	if len(check) == 0 {
		return nil
	}
	vols := append(k.kept, check...)
	in := explain.Input{State: clusterstate.New([]*corev1.PersistentVolumeClaim{k.target}, vols, k.classes, k.nodes).WithPods(k.pods),
		Pods: k.pods, NodesListed: true}
	e, err := explain.Claim(in, k.target.Namespace, k.target.Name)
	if err != nil {
		return fmt.Errorf("ranking the settled volumes: %w", err)
	}
	byName := make(map[string]*corev1.PersistentVolume, len(vols))
	for _, v := range vols {
		byName[v.Name] = v
	}
	k.kept = k.kept[:0:0]
	for i, row := range e.Candidates { // closest first
		v := byName[row.Volume]
		if i < k.keep {
			k.kept = append(k.kept, v)
			if i == k.keep-1 {
				k.worst = &e.Candidates[i]
			}
			continue
		}
		first := explain.Check("fits")
		if f := row.Failed(); len(f) > 0 {
			first = f[0].Check
		}
		k.count(storage.VolumeClass(v), first)
	}
	return nil
}

// outranked says v cannot rank before the worst kept row, from what every settled volume fails
// (phase, not Available, and claimRef, naming another claim) and its class alone; first is the
// check it fails first when that is known without checking it ("" otherwise). A volume of
// another class fails class too, the first check: it ranks after a worst row that fails at most
// two checks, or three and is of the claim's class. A volume of the claim's class fails at least
// two: it ranks after a worst row that fails exactly two (so is of the claim's class) and has a
// smaller name.
func (k *closestSettled) outranked(volumeClass, volumeName string) (first explain.Check, ok bool) {
	if k.worst == nil {
		return "", false
	}
	failed, class := len(k.worst.Failed()), storage.ClaimClass(k.target)
	if volumeClass != class {
		worstOfClass := k.worst.Class == class
		return explain.CheckClass, failed < 3 || failed == 3 && worstOfClass
	}
	return "", failed == 2 && volumeName > k.worst.Volume
}

// count counts a volume of volumeClass as left out, failing first (by the column order; "" when
// it was not checked).
func (k *closestSettled) count(volumeClass string, first explain.Check) {
	k.out.Total++
	k.out.ByClass[volumeClass]++
	k.out.ByCheck[first]++
}
