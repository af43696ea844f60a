package sequence

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// Case is a starting world and a sequence of steps, kept as a YAML file under
// policy/testdata/sequence/ and replayed on every run: a violation the explorer found, shrunk.
type Case struct {
	Name string `json:"name"`
	// Note says how the case was found and what it shows.
	Note string `json:"note,omitempty"`
	// Violation is what the sequence broke when it was found.
	Violation string `json:"violation,omitempty"`
	// Open, when set, says why the violation is still expected on this code (a rule fix that has
	// not landed yet); the replay then logs it instead of failing, unless run strict.
	Open string `json:"open,omitempty"`
	// Gates are the apiserver's feature gates the case runs with (World.Gates).
	Gates Gates             `json:"gates,omitzero"`
	World []json.RawMessage `json:"world"`
	Steps []Step            `json:"steps"`
}

// NewCase records a world and steps as a case.
func NewCase(name, note string, w *World, steps []Step, v []Violation) (Case, error) {
	c := Case{Name: name, Note: note, Steps: steps, Gates: w.Gates}
	var vs []string
	for _, x := range v {
		vs = append(vs, x.String())
	}
	c.Violation = strings.Join(vs, "; ")
	for _, o := range w.Objects() {
		data, err := json.Marshal(pruneObject(o))
		if err != nil {
			return Case{}, fmt.Errorf("encoding the world of case %s: %w", name, err)
		}
		c.World = append(c.World, data)
	}
	return c, nil
}

// YAML renders the case as its file.
func (c Case) YAML() ([]byte, error) {
	data, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encoding case %s: %w", c.Name, err)
	}
	return data, nil
}

// LoadCase reads a case file.
func LoadCase(path string) (Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Case{}, fmt.Errorf("reading case: %w", err)
	}
	var c Case
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return Case{}, fmt.Errorf("decoding case %s: %w", path, err)
	}
	return c, nil
}

// Start decodes the case's starting world.
func (c Case) Start() (*World, error) {
	w := NewWorld()
	w.Gates = c.Gates
	for i, raw := range c.World {
		var tm metav1.TypeMeta
		if err := json.Unmarshal(raw, &tm); err != nil {
			return nil, fmt.Errorf("case %s: world[%d]: %w", c.Name, i, err)
		}
		var o runtime.Object
		switch tm.Kind {
		case "PersistentVolume":
			o = &corev1.PersistentVolume{}
		case "PersistentVolumeClaim":
			o = &corev1.PersistentVolumeClaim{}
		case "StorageClass":
			o = &storagev1.StorageClass{}
		case "Node":
			o = &corev1.Node{}
		case "Pod":
			o = &corev1.Pod{}
		default:
			return nil, fmt.Errorf("case %s: world[%d]: kind %q is not modelled", c.Name, i, tm.Kind)
		}
		if err := json.Unmarshal(raw, o); err != nil {
			return nil, fmt.Errorf("case %s: world[%d] (%s): %w", c.Name, i, tm.Kind, err)
		}
		w.Put(o)
	}
	return w, nil
}

// Describe renders each object of a world on one line, with the fields the invariants read, and
// the feature gates it runs with.
func Describe(w *World) []string {
	var out []string
	if w.Gates.MutablePVNodeAffinity {
		out = append(out, "feature gate MutablePVNodeAffinity on")
	}
	for _, o := range w.Objects() {
		out = append(out, DescribeObject(o))
	}
	return out
}

// DescribeObject renders one object on one line.
func DescribeObject(o runtime.Object) string {
	switch t := o.(type) {
	case *storagev1.StorageClass:
		s := fmt.Sprintf("StorageClass %s: provisioner %s", t.Name, t.Provisioner)
		if t.VolumeBindingMode != nil {
			s += ", " + string(*t.VolumeBindingMode)
		}
		return s
	case *corev1.Node:
		return fmt.Sprintf("Node %s: labels %v", t.Name, t.Labels)
	case *corev1.PersistentVolume:
		s := fmt.Sprintf("PV %s: %s %v %s %s class %q phase %q claimRef %s",
			t.Name, t.Spec.Capacity.Storage(), t.Spec.AccessModes, mode(t.Spec.VolumeMode),
			t.Spec.PersistentVolumeReclaimPolicy, t.Spec.StorageClassName, t.Status.Phase, refString(t.Spec.ClaimRef))
		if t.Spec.NodeAffinity != nil && t.Spec.NodeAffinity.Required != nil {
			s += " affinity " + describeSelector(t.Spec.NodeAffinity.Required)
		}
		if c := t.Spec.VolumeAttributesClassName; c != nil {
			s += fmt.Sprintf(" attributes class %q", *c)
		}
		return s + describeMeta(t.ObjectMeta)
	case *corev1.PersistentVolumeClaim:
		class := "<unset>"
		if t.Spec.StorageClassName != nil {
			class = fmt.Sprintf("%q", *t.Spec.StorageClassName)
		}
		s := fmt.Sprintf("PVC %s/%s (uid %s): request %s %v %s class %s volumeName %q phase %q",
			t.Namespace, t.Name, t.UID, t.Spec.Resources.Requests.Storage(), t.Spec.AccessModes,
			mode(t.Spec.VolumeMode), class, t.Spec.VolumeName, t.Status.Phase)
		if q, ok := t.Status.Capacity[corev1.ResourceStorage]; ok {
			s += " capacity " + q.String()
		}
		if c := t.Spec.VolumeAttributesClassName; c != nil {
			s += fmt.Sprintf(" attributes class %q", *c)
		}
		if c := t.Status.CurrentVolumeAttributesClassName; c != nil {
			s += fmt.Sprintf(" (current %q)", *c)
		}
		return s + describeMeta(t.ObjectMeta)
	case *corev1.Pod:
		var claims []string
		for _, v := range t.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				claims = append(claims, v.PersistentVolumeClaim.ClaimName)
			}
		}
		return fmt.Sprintf("Pod %s/%s: node %q phase %q claims %v", t.Namespace, t.Name, t.Spec.NodeName, t.Status.Phase, claims)
	}
	return fmt.Sprintf("%T", o)
}

func describeMeta(m metav1.ObjectMeta) string {
	var s string
	if len(m.Annotations) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(m.Annotations)) {
			kv = append(kv, k+"="+m.Annotations[k])
		}
		s += " ann[" + strings.Join(kv, " ") + "]"
	}
	if len(m.Finalizers) > 0 {
		s += " fin[" + strings.Join(m.Finalizers, " ") + "]"
	}
	if m.DeletionTimestamp != nil {
		s += " DELETING"
	}
	return s
}

func describeSelector(ns *corev1.NodeSelector) string {
	var terms []string
	for _, t := range ns.NodeSelectorTerms {
		var exprs []string
		for _, e := range t.MatchExpressions {
			exprs = append(exprs, fmt.Sprintf("%s %s %v", e.Key, e.Operator, e.Values))
		}
		terms = append(terms, strings.Join(exprs, " && "))
	}
	return "(" + strings.Join(terms, " || ") + ")"
}
