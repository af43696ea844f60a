package binder

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/storage"
)

// poolLists gives assignLists the planner's relation for one class's pool, "claims[c] may take
// volumes[v]" (usable and fitsUnbound), as adjacency lists in its preference order (order,
// from assignVolumeOrder): claim c's list is lists[listOf[c]]. The volumes are the pool's: no
// claimRef, not being deleted.
//
// Asking the predicate about every pair is claims × volumes questions, and the dense relation as
// large. But the predicate reads little of either side, and a pool's claims mostly ask alike: so
// claims of one kind (same demand, selector and node) share one list, built once, and
// storage.Satisfies is asked once per demand and kind of volume.
// Only what depends on the claim's uid (a bind in flight to one claim, pairs policy denied) is
// asked per pair, and only for the few claims it concerns, which get lists of their own.
func (pl *poolPlanner) poolLists(claims []pending, volumes []*corev1.PersistentVolume, order []int32) (lists [][]int32, listOf []int32) {
	p := pl.newPool(claims, volumes, order)
	kindList := make([]int32, len(p.kindClaim))
	for k := range kindList {
		kindList[k] = -1
	}
	listOf = make([]int32, len(claims))
	for c, cl := range claims {
		k := p.kindOf[c]
		if p.owners[cl.claim.UID] || len(pl.inFlight.Denied[cl.claim.UID]) > 0 {
			lists = append(lists, p.list(k, cl.claim))
			listOf[c] = int32(len(lists) - 1)
			continue
		}
		if kindList[k] < 0 {
			lists = append(lists, p.list(k, nil))
			kindList[k] = int32(len(lists) - 1)
		}
		listOf[c] = kindList[k]
	}
	return lists, listOf
}

// pool is one class's pool as poolLists sees it: its volumes sorted into offers (kinds of
// volume), its claims into kinds, and the predicate's answers asked so far.
type pool struct {
	pl      *poolPlanner
	claims  []pending
	volumes []*corev1.PersistentVolume
	order   []int32

	// offerOf[v] is volume v's offer, and offerVolume[o] a volume of offer o.
	offerOf, offerVolume []int32
	// kindOf[c] is claim c's kind; kindClaim[k] is a claim of kind k, kindDemand[k] its demand
	// and kindSelector[k] its selector's key (selectorKey); demandClaim[d] is a claim of demand d.
	kindOf, kindClaim, kindDemand, demandClaim []int32
	kindSelector                               []string
	// reserved[v] tells the volumes with a bind in flight, and owners the claims they go to.
	reserved []bool
	owners   map[types.UID]bool

	// Answers asked once, unknown until asked: satisfied[d*offers+o] for Satisfies of demand d
	// by offer o, selects[selector][v] whether a selector matches volume v, and
	// reachable[node][a] whether volumes of distinct node affinity a (local volumes on one host
	// share theirs) are reachable from a node.
	satisfied                  []answer
	selects                    map[string][]answer
	reachable                  map[*corev1.Node][]answer
	affinityOf, affinityVolume []int32
	row                        []int32 // scratch for list
}

func (pl *poolPlanner) newPool(claims []pending, volumes []*corev1.PersistentVolume, order []int32) *pool {
	p := &pool{
		pl: pl, claims: claims, volumes: volumes, order: order,
		selects:   map[string][]answer{},
		reachable: map[*corev1.Node][]answer{},
		row:       make([]int32, 0, len(order)),
	}
	p.sortVolumes()
	p.sortClaims()
	p.noteReservations()
	p.satisfied = make([]answer, len(p.demandClaim)*len(p.offerVolume))
	return p
}

// sortVolumes sorts the volumes into offers, with one volume of each.
func (p *pool) sortVolumes() {
	p.offerOf = make([]int32, len(p.volumes))
	offers := map[volumeOffer]int32{}
	for v, vol := range p.volumes {
		k := offerOfVolume(vol, v, p.pl.pendingFree)
		o, ok := offers[k]
		if !ok {
			o = int32(len(p.offerVolume))
			offers[k] = o
			p.offerVolume = append(p.offerVolume, int32(v))
		}
		p.offerOf[v] = o
	}
}

// sortClaims sorts the claims into kinds, with one claim of each: a demand, and the selector and
// node that the predicate asks about beside Satisfies.
func (p *pool) sortClaims() {
	type claimKind struct {
		demand    int32
		selector  string
		scheduled bool
		node      *corev1.Node // nil when not scheduled, or scheduled to a node that cannot be read
	}
	demands := map[claimDemand]int32{}
	kinds := map[claimKind]int32{}
	for c, cl := range p.claims {
		dk := demandOfClaim(cl.claim, c)
		d, ok := demands[dk]
		if !ok {
			d = int32(len(p.demandClaim))
			demands[dk] = d
			p.demandClaim = append(p.demandClaim, int32(c))
		}
		k := claimKind{demand: d, selector: selectorKey(p.pl.fits.selector(cl.claim)), scheduled: cl.scheduled}
		if cl.scheduled {
			k.node = cl.node
		}
		i, ok := kinds[k]
		if !ok {
			i = int32(len(p.kindClaim))
			kinds[k] = i
			p.kindClaim = append(p.kindClaim, int32(c))
			p.kindDemand = append(p.kindDemand, d)
			p.kindSelector = append(p.kindSelector, k.selector)
		}
		p.kindOf = append(p.kindOf, i)
	}
}

// noteReservations notes what depends on the claim's uid: volumes with a bind in flight are
// usable only by the claim being bound, and claims with denied pairs must skip those.
func (p *pool) noteReservations() {
	p.reserved = make([]bool, len(p.volumes))
	p.owners = map[types.UID]bool{}
	for v, vol := range p.volumes {
		if uid, ok := p.pl.inFlight.Reserved[vol.Name]; ok {
			p.reserved[v] = true
			p.owners[uid] = true
		}
	}
}

// list is the list of claims of kind k; of claim when given, which alone may take the volumes
// reserved for it, and not those policy denied it.
func (p *pool) list(k int32, claim *corev1.PersistentVolumeClaim) []int32 {
	rep := p.claims[p.kindClaim[k]]
	demand := p.claims[p.demandClaim[p.kindDemand[k]]].claim
	sat, sel, reach := p.answers(k)
	p.row = p.row[:0]
	for _, v := range p.order {
		vol := p.volumes[v]
		if claim == nil && p.reserved[v] || claim != nil && !p.pl.inFlight.usable(claim.UID, vol.Name) {
			continue
		}
		o := p.offerOf[v]
		if !sat[o].known() {
			rep := p.volumes[p.offerVolume[o]]
			sat[o] = answerOf(isFree(rep, p.pl.pendingFree) && storage.Satisfies(rep, demand) == nil)
		}
		if !sat[o].yes() {
			continue
		}
		if sel != nil {
			if !sel[v].known() {
				sel[v] = answerOf(p.pl.fits.selectorAdmits(rep.claim, vol))
			}
			if !sel[v].yes() {
				continue
			}
		}
		if reach != nil {
			a := p.affinityOf[v]
			if !reach[a].known() {
				reach[a] = answerOf(p.pl.fits.affinityAdmits(p.volumes[p.affinityVolume[a]], rep.node))
			}
			if !reach[a].yes() {
				continue
			}
		}
		p.row = append(p.row, v)
	}
	return slices.Clone(p.row)
}

// answers returns the tables of answers that the list of kind k reads: Satisfies of its demand
// by each offer, its selector's by each volume (nil when it has none), and reachability of each
// distinct node affinity from its node (nil when it is not scheduled).
func (p *pool) answers(k int32) (sat, sel, reach []answer) {
	offers := len(p.offerVolume)
	sat = p.satisfied[int(p.kindDemand[k])*offers:][:offers]
	if key := p.kindSelector[k]; key != "" {
		if sel = p.selects[key]; sel == nil {
			sel = make([]answer, len(p.volumes))
			p.selects[key] = sel
		}
	}
	if rep := p.claims[p.kindClaim[k]]; rep.scheduled {
		if p.affinityOf == nil {
			p.affinityOf, p.affinityVolume = distinctAffinities(p.volumes)
		}
		if reach = p.reachable[rep.node]; reach == nil {
			reach = make([]answer, len(p.affinityVolume))
			p.reachable[rep.node] = reach
		}
	}
	return sat, sel, reach
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

// claimDemand is what storage.Satisfies reads of a claim, apart from its class (which a pool's
// claims share): claims with equal demands are satisfied by the same volumes. It must name
// every field Satisfies reads (TestPlanAgreesWithTheOraclePlanner varies others too); it may tell
// apart claims that ask the same (a request written differently), which only costs sharing.
type claimDemand struct {
	request         exactQuantity
	attributesClass optionalString
	volumeMode      optionalString
	accessModes     string
}

// volumeOffer is what storage.Satisfies and isFree read of a volume without a claimRef, apart
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
