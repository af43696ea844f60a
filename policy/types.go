package policy

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/clusterstate"
)

// RuleID identifies a rule of the catalogue, such as "PVG001".
type RuleID string

// Action is what pvguard does with a rule's findings.
type Action string

const (
	// ActionDeny refuses the write at admission.
	ActionDeny Action = "deny"
	// ActionWarn admits the write and returns a warning that kubectl prints.
	ActionWarn Action = "warn"
	// ActionAudit admits the write silently and records the finding in the API audit log.
	ActionAudit Action = "audit"
	// ActionOff disables the rule.
	ActionOff Action = "off"
)

// UnmarshalJSON accepts YAML's bare off (which YAML 1.1 reads as false) as ActionOff, so that
// "action: off" means what it says.
func (a *Action) UnmarshalJSON(data []byte) error {
	switch string(data) {
	case "false":
		*a = ActionOff
		return nil
	case "true":
		return fmt.Errorf("action must be one of deny, warn, audit, off, not a boolean")
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("action must be a string: %w", err)
	}
	if s == "false" { // the YAML-to-JSON step already turned a bare off into this string
		s = string(ActionOff)
	}
	*a = Action(s)
	return nil
}

func (a Action) valid() bool {
	switch a {
	case ActionDeny, ActionWarn, ActionAudit, ActionOff:
		return true
	}
	return false
}

// Kind is the kind of object a review is about, or that a rule reads through the View.
type Kind = clusterstate.Kind

const (
	KindPersistentVolume      = clusterstate.KindPersistentVolume
	KindPersistentVolumeClaim = clusterstate.KindPersistentVolumeClaim
	KindStorageClass          = clusterstate.KindStorageClass
	KindNode                  = clusterstate.KindNode
	KindPod                   = clusterstate.KindPod
)

// Operation is the kind of write under review.
type Operation string

const (
	OperationCreate Operation = "CREATE"
	OperationUpdate Operation = "UPDATE"
	OperationDelete Operation = "DELETE"
)

// UserInfo is the identity that makes a request.
type UserInfo struct {
	Username string
	Groups   []string
}

// Review is one write to evaluate: exactly one of the object pairs is set, matching Kind.
// Old objects are nil on CREATE.
type Review struct {
	Kind        Kind
	Operation   Operation
	SubResource string
	User        UserInfo
	DryRun      bool

	PV, OldPV   *corev1.PersistentVolume
	PVC, OldPVC *corev1.PersistentVolumeClaim
	SC, OldSC   *storagev1.StorageClass

	// audit marks the review an audit makes of an existing object (judged as if just created):
	// a pair it reads as linked may be a binding completed long ago. now is when the audit
	// judges, for the rules that age (zero at admission).
	audit bool
	now   time.Time
}

// Object names the object under review.
func (r *Review) Object() ObjectRef {
	switch r.Kind {
	case KindPersistentVolume:
		if pv := pick(r.PV, r.OldPV); pv != nil {
			return ObjectRef{Kind: r.Kind, Name: pv.Name}
		}
	case KindPersistentVolumeClaim:
		if pvc := pick(r.PVC, r.OldPVC); pvc != nil {
			return ObjectRef{Kind: r.Kind, Namespace: pvc.Namespace, Name: pvc.Name}
		}
	case KindStorageClass:
		if sc := pick(r.SC, r.OldSC); sc != nil {
			return ObjectRef{Kind: r.Kind, Name: sc.Name}
		}
	}
	return ObjectRef{Kind: r.Kind}
}

// namespaces are the namespaces exemptions are matched against: a claim's own namespace, or for
// a volume (cluster-scoped) the namespaces of the claims its old and new claimRef name. A volume
// write is exempt by namespace only when all of them are, so an exempt namespace cannot be used
// to re-point a volume away from a claim elsewhere.
func (r *Review) namespaces(buf *[2]string) []string {
	out := buf[:0] // one evaluation's: every object of an audit passes here
	switch r.Kind {
	case KindPersistentVolumeClaim:
		if pvc := pick(r.PVC, r.OldPVC); pvc != nil {
			out = append(out, pvc.Namespace)
		}
	case KindPersistentVolume:
		for _, pv := range []*corev1.PersistentVolume{r.PV, r.OldPV} {
			if pv != nil && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace != "" {
				out = append(out, pv.Spec.ClaimRef.Namespace)
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func pick[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}

// ObjectRef names an object in messages and reports: the cluster state's key (the same fields,
// and converts to and from it), which a message renders per reader (Redact).
type ObjectRef clusterstate.Key

func (o ObjectRef) String() string { return clusterstate.Key(o).String() }

func pvRef(pv *corev1.PersistentVolume) ObjectRef {
	return ObjectRef{Kind: KindPersistentVolume, Name: pv.Name}
}

func pvcRef(pvc *corev1.PersistentVolumeClaim) ObjectRef {
	return ObjectRef{Kind: KindPersistentVolumeClaim, Namespace: pvc.Namespace, Name: pvc.Name}
}

// Finding is one violation of one rule by one object.
type Finding struct {
	Rule   RuleID
	Name   string
	Action Action
	// Object is the object whose write (or state) violates the rule.
	Object ObjectRef
	// Field is the path of the offending field, such as "spec.volumeName".
	Field string
	// Message says what is wrong; Hint says how to fix it. Each names other objects only as Args
	// (text.go), rendered per reader: For.
	Message Text
	Hint    Text
	// fixes are the routes Hint names as writes (Fix), for programs; never rendered.
	fixes []Fix
}

// String renders the finding for a reader who may read everything (the API audit log, the logs).
func (f Finding) String() string { return f.For(Everyone) }

// For renders the finding the way kubectl users read it, for audience a:
// "[PVG001 volume-mode-match] <message>; <hint>".
func (f Finding) For(a Audience) string { return f.Text().For(a) }

// Text is the finding as For renders it, kept as a Text until its reader is known: an answer
// that lists findings (a volume's explanation) holds them so.
func (f Finding) Text() Text {
	t := Textf("[%s %s] %s", Word(f.Rule), Word(f.Name), f.Message)
	if !f.Hint.IsZero() {
		t = Textf("%s; %s", t, f.Hint)
	}
	return t
}

// View is the read-only view of related objects that rules consult. Getters return nil and no
// error when the object does not exist. The webhook implements it over an informer cache with a
// live read on a miss; tests implement it over a fixed set of objects.
type View interface {
	PersistentVolume(name string) (*corev1.PersistentVolume, error)
	PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error)
	// ClaimsNamingVolume lists the claims whose spec.volumeName is the given volume.
	ClaimsNamingVolume(volumeName string) ([]*corev1.PersistentVolumeClaim, error)
	// VolumesClaiming lists the volumes whose spec.claimRef names the given claim.
	VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error)
	// ClaimWaitingForData returns the claim with the given uid, in any namespace, if it waits for
	// its data (storage.WaitsForData), else nil. Only the rules that judge a claim made for
	// another claim (named after its uid, policy/handoff.go) ask it, and only a claim waiting for
	// its data has one made for it: a view need not file every claim by uid.
	ClaimWaitingForData(uid types.UID) (*corev1.PersistentVolumeClaim, error)
	Node(name string) (*corev1.Node, error)
	// ListNodes lists every node the view knows (names and labels are enough). Only PVG025 asks
	// it, to tell a volume's node that is gone; an empty list means nothing is known of the nodes,
	// never that there are none.
	ListNodes() ([]*corev1.Node, error)
	// PodsUsingClaim lists the pods of the namespace whose volumes use the claim
	// (storage.PodClaims). A view may hold pods stripped to what the rules read: name,
	// namespace, spec.nodeName, the claims of spec.volumes and status.phase.
	PodsUsingClaim(namespace, claim string) ([]*corev1.Pod, error)
	StorageClasses() ([]*storagev1.StorageClass, error)
	// ListKind lists every object of a kind of clusterstate.Readables, which a rule declares in
	// its Reads and reads with ListOf; an error for another kind, or for one the view was not
	// given (so that no rule judges on an absence a reader made up).
	ListKind(kind Kind) ([]runtime.Object, error)
}

// ListOf lists the objects of a kind of clusterstate.Readables through the view, as the kind's
// Go type T (*storagev1.VolumeAttributesClass for "VolumeAttributesClass").
func ListOf[T runtime.Object](v View, kind Kind) ([]T, error) {
	objs, err := v.ListKind(kind)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		t, ok := o.(T)
		if !ok {
			var want T
			return nil, fmt.Errorf("listing %s: a %T, not a %T", kind, o, want)
		}
		out = append(out, t)
	}
	return out, nil
}

// Judges is what a rule judges, which decides where it runs.
type Judges string

const (
	// JudgesChange: a write, the new object against the old one. Only admission runs the rule:
	// an object as it stands has no change to judge (a claimRef naming a claim that is gone
	// describes a released volume once it has been written).
	JudgesChange Judges = "change"
	// JudgesState: an object as it stands, with the objects it relates to. Admission refuses a
	// write that takes a safe state to this one, and the audit reports the objects found in it,
	// each judged as if it had just been created.
	JudgesState Judges = "state"
	// JudgesStoredState: a state that no write of the object itself brings about (its claim
	// deleted, its storage failed, time passed), so there is no write to refuse: only the audit
	// runs the rule.
	JudgesStoredState Judges = "stored state"
)

// AtAdmission reports whether admission runs a rule that judges j.
func (j Judges) AtAdmission() bool { return j == JudgesChange || j == JudgesState }

// InAudit reports whether the audit runs a rule that judges j.
func (j Judges) InAudit() bool { return j == JudgesState || j == JudgesStoredState }

// Rule is one entry of the catalogue. Everything pvguard needs to know about a rule is declared
// here, in the rule's own file: the engine, the audit, the reports, the metrics and the docs
// check read it from the rule set they are given.
type Rule struct {
	ID      RuleID
	Name    string
	Default Action
	// Judges says whether the rule judges a change or a state, and so whether admission, the
	// audit or both run it.
	Judges Judges
	// Kinds lists the kinds of object the rule judges.
	Kinds []Kind
	// Reads lists the kinds of related object the rule reads through the View (a claim's
	// volume, a volume's claims, the StorageClasses, a Node, a kind of clusterstate.Readables it
	// lists with ListOf, whose informer starts only for a rule set that reads it); the rule tests
	// hold each rule to it.
	Reads []Kind
	// StatusReads lists, per kind, the fields of status the rule reads (as the API spells them:
	// "phase", "capacity"), of the object it judges, of its old version and of the related objects
	// it reads through the View. The rule tests hold each rule to it (changing any other status
	// field changes none of its findings), and the webhooks' matchConditions are generated from it
	// (WebhookMatchConditions): a status write that changes none of the fields the rules judging
	// its kind read is not sent to pvguard.
	StatusReads map[Kind][]string
	// ConfirmLive lists the fields of the rule's audit findings that report an object as gone (the
	// claim a volume names, the volume a claim names). The audit reports such a finding only when
	// the rule, judging the object again on live reads (Engine.Confirm), finds it again: an
	// informer cache that has not caught up must not make pvguard report an object as gone.
	ConfirmLive []string
	// Summary is a one-line description for documentation and reports.
	Summary string
	// CEL are the rule's forms the apiserver enforces by itself (CELForm); none for a rule that
	// needs other objects to judge anything.
	CEL []CELForm
	// Check judges one review: a write at admission, or an existing object in the audit (judged
	// as if just created). Findings need only Object, Field, Message and Hint: the engine fills
	// in the rule's identity and action.
	Check func(r *Review, v View, c *Config) ([]Finding, error)
}

func (rl *Rule) appliesTo(k Kind) bool {
	for _, kk := range rl.Kinds {
		if kk == k {
			return true
		}
	}
	return false
}

// confirms reports whether a finding of the rule on field must be confirmed live.
func (rl *Rule) confirms(field string) bool {
	for _, f := range rl.ConfirmLive {
		if f == field {
			return true
		}
	}
	return false
}
