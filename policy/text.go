package policy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// This file is how every answer pvguard gives (a finding's message and hint, an explanation, an
// event) refers to objects: a Text keeps its wording apart from the claims, volumes and uids it
// names, and renders them for one Audience, the reader it is for. A reader is told the name of an
// object only when the Audience says it may read it; otherwise the Text says what kind of object
// it is ("a claim in another namespace"), as upstream's PV controller says "already bound to a
// different claim". Nothing else in an answer may carry a name: Textf takes only Args, and a
// plain string is not one.

// Audience is who an answer is for: which claims, volumes and uids it may be told.
type Audience interface {
	// Names reports whether the reader may be told o's name (and namespace): it may read o, or
	// (at admission) its own request names o.
	Names(o ObjectRef) bool
	// Reads reports whether the reader may read o itself: whether it exists, its state.
	Reads(o ObjectRef) bool
	// UID reports whether the reader may be told uid, which o has (or a reference to o carries).
	UID(o ObjectRef, uid types.UID) bool
}

// Everyone is the Audience of a reader who may read everything: a cluster admin, the API audit
// log, pvguard's own logs.
var Everyone Audience = everyone{}

type everyone struct{}

func (everyone) Names(ObjectRef) bool          { return true }
func (everyone) Reads(ObjectRef) bool          { return true }
func (everyone) UID(ObjectRef, types.UID) bool { return true }

// The phrases that stand for what an Audience may not read.
const (
	HiddenClaim  = "a claim in another namespace"
	HiddenVolume = "a volume you cannot read"
	HiddenUID    = "a uid you cannot read"
	HiddenPod    = "a pod you cannot read"
)

// Arg is a part of a Text: an object reference, a uid, a Word or another Text. Only the types of
// this file implement it, so a rule cannot pass a name as a bare string.
type Arg interface {
	render(a Audience) string
}

// Word is text that names no claim, volume or uid: a class, a mode, a size, a field path, a key,
// a node, a user, a number. Never make a Word of an object's name.
type Word string

func (w Word) render(Audience) string { return string(w) }

// Wordf is Word(fmt.Sprintf(format, args...)): args must name no claim, volume or uid.
func Wordf(format string, args ...any) Word { return Word(fmt.Sprintf(format, args...)) }

func (o ObjectRef) render(a Audience) string {
	if a.Names(o) {
		return o.String()
	}
	return hiddenPhrase(o.Kind)
}

func hiddenPhrase(k Kind) string {
	switch k {
	case KindPersistentVolumeClaim:
		return HiddenClaim
	case KindPersistentVolume:
		return HiddenVolume
	case KindPod:
		return HiddenPod
	}
	return "an object you cannot read"
}

// uidArg is a uid that o has or that a reference to o carries.
type uidArg struct {
	of  ObjectRef
	uid types.UID
}

// UID is the uid of o (or that a reference to o carries), shown to an audience that may read it.
func UID(o ObjectRef, uid types.UID) Arg { return uidArg{of: o, uid: uid} }

func (u uidArg) render(a Audience) string {
	if a.UID(u.of, u.uid) {
		return string(u.uid)
	}
	return HiddenUID
}

// withUID is o named with its uid: "PersistentVolumeClaim a/b (uid …)", without the uid for an
// audience that may not read it.
type withUID struct {
	o   ObjectRef
	uid types.UID
}

// WithUID is o named with uid, the one it has or that a reference to it carries.
func WithUID(o ObjectRef, uid types.UID) Arg { return withUID{o: o, uid: uid} }

func (w withUID) render(a Audience) string {
	s := w.o.render(a)
	if w.uid != "" && a.Names(w.o) && a.UID(w.o, w.uid) {
		s += " (uid " + string(w.uid) + ")"
	}
	return s
}

// either is one of two Texts, by whether the audience may read an object.
type either struct {
	o                   ObjectRef
	readable, otherwise Text
}

// Either is readable for an audience that may read o, otherwise otherwise: what a text says of
// o's state (that it exists, its uid) must not tell a reader who may not read o more than the
// request it sent.
func Either(o ObjectRef, readable, otherwise Text) Arg {
	return either{o: o, readable: readable, otherwise: otherwise}
}

func (e either) render(a Audience) string {
	if a.Reads(e.o) {
		return e.readable.For(a)
	}
	return e.otherwise.For(a)
}

// list is args joined by a separator.
type list struct {
	args []Arg
	sep  string
}

// Join is args rendered one after the other, separated by sep.
func Join(args []Arg, sep string) Arg { return list{args: args, sep: sep} }

func (l list) render(a Audience) string {
	out := make([]string, len(l.args))
	for i, x := range l.args {
		out[i] = x.render(a)
	}
	return strings.Join(out, l.sep)
}

// Text is a sentence of an answer: its wording, with the objects it refers to kept as Args until
// it is rendered for an Audience (For). The zero Text is empty.
type Text struct {
	format string
	args   []Arg
	// rendered marks a Text already rendered for its audience (Rendered): its format is the text.
	rendered bool
}

// Textf is the Text of format (fmt verbs %s only, one per arg) with args.
func Textf(format string, args ...Arg) Text { return Text{format: format, args: args} }

// Plain is a Text without references.
func Plain(s Word) Text { return Text{format: string(s), rendered: true} }

// Rendered is t rendered for a, kept as a Text that renders the same for everyone: an answer made
// for one reader (Redact) holds only such Texts.
func (t Text) Rendered(a Audience) Text { return Text{format: t.For(a), rendered: true} }

// For renders t for a.
func (t Text) For(a Audience) string {
	if t.rendered || len(t.args) == 0 {
		if t.rendered {
			return t.format
		}
		return strings.ReplaceAll(t.format, "%%", "%")
	}
	vals := make([]any, len(t.args))
	for i, x := range t.args {
		vals[i] = x.render(a)
	}
	return fmt.Sprintf(t.format, vals...)
}

func (t Text) render(a Audience) string { return t.For(a) }

// String renders t for Everyone.
func (t Text) String() string { return t.For(Everyone) }

// IsZero reports whether t is empty.
func (t Text) IsZero() bool { return t.format == "" && len(t.args) == 0 }

// Append is t followed by u.
func (t Text) Append(u Text) Text {
	if t.IsZero() {
		return u
	}
	if u.IsZero() {
		return t
	}
	return Textf("%s%s", t, u)
}

// MarshalJSON renders t for Everyone; an answer served to one reader is redacted first (Redact).
func (t Text) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

// UnmarshalJSON reads a rendered text (what MarshalJSON wrote): it names only what its writer's
// reader could read.
func (t *Text) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	*t = Text{format: s, rendered: true}
	return nil
}

// Redact renders, in place, every Text that v (a pointer to an answer: a struct, a slice, a map of
// them) holds for a, and clears the name of every ObjectRef a may not read. It is the one place
// an answer is cut down to its reader: fields that carry references are Texts or ObjectRefs, and
// TestAnswersCarryReferencesOnlyAsTexts (and its peers in the packages that make answers) fails
// on a string field it has not been told carries none.
func Redact(v any, a Audience) {
	redact(reflect.ValueOf(v), a)
}

var (
	textType   = reflect.TypeFor[Text]()
	objRefType = reflect.TypeFor[ObjectRef]()
)

func redact(v reflect.Value, a Audience) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			redact(v.Elem(), a)
		}
	case reflect.Struct:
		switch v.Type() {
		case textType:
			if v.CanSet() {
				v.Set(reflect.ValueOf(v.Interface().(Text).Rendered(a)))
			}
			return
		case objRefType:
			if o := v.Interface().(ObjectRef); v.CanSet() && !a.Names(o) {
				v.Set(reflect.ValueOf(ObjectRef{Kind: o.Kind}))
			}
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				redact(v.Field(i), a)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			redact(v.Index(i), a)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			redact(e, a)
			v.SetMapIndex(k, e)
		}
	}
}

// nameOf is an object's bare name, as a field holds it ("spec.volumeName pv-1").
type nameOf struct{ o ObjectRef }

// NameOf is o's name alone, or what stands for o for an audience that may not be told it.
func NameOf(o ObjectRef) Arg { return nameOf{o: o} }

func (n nameOf) render(a Audience) string {
	if a.Names(n.o) {
		if n.o.Namespace != "" {
			return n.o.Namespace + "/" + n.o.Name
		}
		return n.o.Name
	}
	return hiddenPhrase(n.o.Kind)
}

// namespaceOf is a claim's namespace.
type namespaceOf struct{ o ObjectRef }

// NamespaceOf is o's namespace, or "that claim's namespace" for an audience that may not be told
// o's name.
func NamespaceOf(o ObjectRef) Arg { return namespaceOf{o: o} }

func (n namespaceOf) render(a Audience) string {
	if a.Names(n.o) {
		return n.o.Namespace
	}
	return "that claim's namespace"
}

// cut is a Text rendered and cut to at most n runes.
type cut struct {
	t Text
	n int
}

// Cut is t rendered and cut to at most n runes, the cut marked: a table cell of bounded width.
func Cut(t Text, n int) Arg { return cut{t: t, n: n} }

func (c cut) render(a Audience) string {
	r := []rune(c.t.For(a))
	if len(r) <= c.n {
		return string(r)
	}
	return string(r[:c.n-1]) + "…"
}

// PlainFields lists the fields of an answer type t (a struct, and the structs it holds) that hold
// text outside a Text or an ObjectRef: strings, string kinds, slices and maps of them, as
// "Type.Field" paths. Redact does not touch them, so each must be one that can carry no
// reference a reader may not read; the tests of each package that makes answers hold its types'
// list to a reviewed one, so a new field that could carry a name fails them until it is a Text
// or reviewed.
func PlainFields(t reflect.Type) []string {
	var out []string
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == textType || t == objRefType || seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice || ft.Kind() == reflect.Array {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.String || ft.Kind() == reflect.Map && (ft.Key().Kind() == reflect.String || ft.Elem().Kind() == reflect.String) {
				out = append(out, t.Name()+"."+f.Name)
				continue
			}
			walk(f.Type)
		}
	}
	walk(t)
	return out
}
