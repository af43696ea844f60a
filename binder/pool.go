package binder

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/policy"
)

// poolLists gives Assign the planner's relation for one class's pool, "claims[c] may take
// volumes[v]" (usable and fitsUnbound), as adjacency lists in Assign's preference order (order,
// from assignVolumeOrder): claim c's list is lists[listOf[c]]. The volumes are the pool's: no
// claimRef, not being deleted.
//
// Asking the predicate about every pair is 50 M questions for 10,000 claims over 5,000 free
// volumes, and the dense relation up to 200 MB. But the predicate reads little of either side,
// and a pool's claims mostly ask alike: so claims of one kind (same demand, selector and node)
// share one list, built once, and policy.Satisfies is asked once per demand and kind of volume.
// Only what depends on the claim's uid (a bind in flight to one claim, pairs policy denied) is
// asked per pair, and only for the few claims it concerns, which get lists of their own.
func (pl *poolPlanner) poolLists(claims []pending, volumes []*corev1.PersistentVolume, order []int32) (lists [][]int32, listOf []int32) {
	pendingFree, fits := pl.pendingFree, pl.fits

	// Kinds of volume (offers), with one volume of each.
	offerOf := make([]int32, len(volumes))
	offers := map[volumeOffer]int32{}
	var offerVolume []int32
	for v, vol := range volumes {
		k := offerOfVolume(vol, v, pendingFree)
		o, ok := offers[k]
		if !ok {
			o = int32(len(offerVolume))
			offers[k] = o
			offerVolume = append(offerVolume, int32(v))
		}
		offerOf[v] = o
	}

	// Kinds of claim, with one claim of each: a demand, and the selector and node that the
	// predicate asks about beside Satisfies.
	type claimKind struct {
		demand    int32
		selector  string
		scheduled bool
		node      *corev1.Node // nil when not scheduled, or scheduled to a node that cannot be read
	}
	demands := map[claimDemand]int32{}
	var demandClaim []int32
	kinds := map[claimKind]int32{}
	var kindOf, kindClaim, kindDemand []int32
	var kindKey []claimKind
	for c, p := range claims {
		dk := demandOfClaim(p.claim, c)
		d, ok := demands[dk]
		if !ok {
			d = int32(len(demandClaim))
			demands[dk] = d
			demandClaim = append(demandClaim, int32(c))
		}
		k := claimKind{demand: d, selector: selectorKey(fits.selector(p.claim)), scheduled: p.scheduled}
		if p.scheduled {
			k.node = p.node
		}
		i, ok := kinds[k]
		if !ok {
			i = int32(len(kindClaim))
			kinds[k] = i
			kindClaim = append(kindClaim, int32(c))
			kindDemand = append(kindDemand, d)
			kindKey = append(kindKey, k)
		}
		kindOf = append(kindOf, i)
	}

	// What depends on the claim's uid: volumes with a bind in flight are usable only by the
	// claim being bound, and claims with denied pairs must skip those.
	reserved := make([]bool, len(volumes))
	owners := map[types.UID]bool{}
	for v, vol := range volumes {
		if uid, ok := pl.inFlight.Reserved[vol.Name]; ok {
			reserved[v] = true
			owners[uid] = true
		}
	}

	// Answers asked once, unknown until asked: satisfied[d*offers+o] for Satisfies of demand d
	// by offer o, selects[selector][v] whether a selector matches volume v, and
	// reachable[node][a] whether volumes of distinct node affinity a (local volumes on one host
	// share theirs) are reachable from a node.
	satisfied := make([]answer, len(demandClaim)*len(offerVolume))
	selects := map[string][]answer{}
	reachable := map[*corev1.Node][]answer{}
	var affinityOf, affinityVolume []int32
	row := make([]int32, 0, len(order))
	// list is the list of claims of kind k; of claim when given, which alone may take the
	// volumes reserved for it, and not those policy denied it.
	list := func(k int32, claim *corev1.PersistentVolumeClaim) []int32 {
		rep := claims[kindClaim[k]]
		demand := claims[demandClaim[kindDemand[k]]].claim
		sat := satisfied[int(kindDemand[k])*len(offerVolume):][:len(offerVolume)]
		var sel, reach []answer
		if key := kindKey[k].selector; key != "" {
			if sel = selects[key]; sel == nil {
				sel = make([]answer, len(volumes))
				selects[key] = sel
			}
		}
		if rep.scheduled {
			if affinityOf == nil {
				affinityOf, affinityVolume = distinctAffinities(volumes)
			}
			if reach = reachable[rep.node]; reach == nil {
				reach = make([]answer, len(affinityVolume))
				reachable[rep.node] = reach
			}
		}
		row = row[:0]
		for _, v := range order {
			vol := volumes[v]
			if claim == nil && reserved[v] || claim != nil && !pl.inFlight.usable(claim.UID, vol.Name) {
				continue
			}
			o := offerOf[v]
			if !sat[o].known() {
				rep := volumes[offerVolume[o]]
				sat[o] = answerOf(isFree(rep, pendingFree) && policy.Satisfies(rep, demand) == nil)
			}
			if !sat[o].yes() {
				continue
			}
			if sel != nil {
				if !sel[v].known() {
					sel[v] = answerOf(fits.selectorAdmits(rep.claim, vol))
				}
				if !sel[v].yes() {
					continue
				}
			}
			if reach != nil {
				a := affinityOf[v]
				if !reach[a].known() {
					reach[a] = answerOf(fits.affinityAdmits(volumes[affinityVolume[a]], rep.node))
				}
				if !reach[a].yes() {
					continue
				}
			}
			row = append(row, v)
		}
		return slices.Clone(row)
	}
	kindList := make([]int32, len(kindClaim))
	for k := range kindList {
		kindList[k] = -1
	}
	listOf = make([]int32, len(claims))
	for c, p := range claims {
		k := kindOf[c]
		if owners[p.claim.UID] || len(pl.inFlight.Denied[p.claim.UID]) > 0 {
			lists = append(lists, list(k, p.claim))
			listOf[c] = int32(len(lists) - 1)
			continue
		}
		if kindList[k] < 0 {
			lists = append(lists, list(k, nil))
			kindList[k] = int32(len(lists) - 1)
		}
		listOf[c] = kindList[k]
	}
	return lists, listOf
}

// distinctAffinities numbers the volumes' distinct required node affinities, told apart by their
// protobuf encoding (0 for none), and gives a volume of each. A volume whose affinity cannot be
// encoded gets a number of its own.
func distinctAffinities(volumes []*corev1.PersistentVolume) (affinityOf, affinityVolume []int32) {
	affinityOf = make([]int32, len(volumes))
	ids := map[string]int32{}
	for v, vol := range volumes {
		key, shared := "", true
		if a := vol.Spec.NodeAffinity; a != nil && a.Required != nil {
			encoded, err := a.Required.Marshal()
			key, shared = "required:"+string(encoded), err == nil
		}
		id, ok := ids[key]
		if !ok || !shared {
			id = int32(len(affinityVolume))
			affinityVolume = append(affinityVolume, int32(v))
			if shared {
				ids[key] = id
			}
		}
		affinityOf[v] = id
	}
	return affinityOf, affinityVolume
}

// answer is a yes or no asked once: unknown (0) until then.
type answer int8

func answerOf(yes bool) answer {
	if yes {
		return 1
	}
	return 2
}

func (a answer) known() bool { return a != 0 }
func (a answer) yes() bool   { return a == 1 }

// claimDemand is what policy.Satisfies reads of a claim, apart from its class (which a pool's
// claims share): claims with equal demands are satisfied by the same volumes. It must name
// every field Satisfies reads (TestPlanAgreesWithTheOldPlanner varies others too); it may tell
// apart claims that ask the same (a request written differently), which only costs sharing.
type claimDemand struct {
	request         exactQuantity
	attributesClass optionalString
	volumeMode      optionalString
	accessModes     string
}

// volumeOffer is what policy.Satisfies and isFree read of a volume without a claimRef, apart
// from its class.
type volumeOffer struct {
	capacity        exactQuantity
	attributesClass optionalString
	volumeMode      optionalString
	accessModes     string
	free            bool
}

func demandOfClaim(c *corev1.PersistentVolumeClaim, index int) claimDemand {
	return claimDemand{
		request:         exactQuantityOf(c.Spec.Resources.Requests[corev1.ResourceStorage], index),
		attributesClass: optionalOf(c.Spec.VolumeAttributesClassName),
		volumeMode:      optionalOf(c.Spec.VolumeMode),
		accessModes:     accessModesKey(c.Spec.AccessModes),
	}
}

func offerOfVolume(v *corev1.PersistentVolume, index int, pendingFree bool) volumeOffer {
	return volumeOffer{
		capacity:        exactQuantityOf(v.Spec.Capacity[corev1.ResourceStorage], index),
		attributesClass: optionalOf(v.Spec.VolumeAttributesClassName),
		volumeMode:      optionalOf(v.Spec.VolumeMode),
		accessModes:     accessModesKey(v.Spec.AccessModes),
		free:            isFree(v, pendingFree),
	}
}

// exactQuantity identifies a quantity by its value when that is a whole int64, and otherwise
// (fractions, huge values) by the index of the object it belongs to, so that it equals no other.
type exactQuantity struct {
	value   int64
	inexact int
}

func exactQuantityOf(q resource.Quantity, index int) exactQuantity {
	if v, ok := q.AsInt64(); ok {
		return exactQuantity{value: v}
	}
	return exactQuantity{inexact: index + 1}
}

// optionalString tells an unset field from one set to "".
type optionalString struct {
	set   bool
	value string
}

func optionalOf[S ~string](p *S) optionalString {
	if p == nil {
		return optionalString{}
	}
	return optionalString{set: true, value: string(*p)}
}

// accessModesKey is the list as it is, order and repeats included.
func accessModesKey(modes []corev1.PersistentVolumeAccessMode) string {
	var s strings.Builder
	for _, m := range modes {
		s.WriteString(string(m))
		s.WriteByte(0)
	}
	return s.String()
}

// selectorKey identifies a parsed selector by what it matches: its canonical form (requirements
// sorted by key, values sorted), "" for none or an empty one (both admit every volume), and a
// string no selector renders to for an invalid one (which admits none).
func selectorKey(sel parsedSelector) string {
	if sel.err != nil {
		return "\x00invalid"
	}
	return sel.sel.String()
}
