package policy

import (
	"fmt"
	"strings"
)

// CELForm is the part of a rule that the apiserver can enforce by itself, as a
// ValidatingAdmissionPolicy (AdmissionPolicies): what can be judged from the object, its old
// version and the requester alone, so that it holds while pvguard is down, or deleted. A rule
// that has a CEL form states it next to its Go form, and the rule tests hold the two to the same
// answers (policy/cel_test.go): the CEL form never refuses a write the Go form admits, except
// where Weaker says (a CEL form cannot read other objects, so where the Go form asks one, the CEL
// form decides from what the object says).
type CELForm struct {
	// Kind is the kind of object it judges; Operations the writes (an UPDATE also covers the
	// status subresource when Status is set).
	//
	// A form that judges a state reached by an update sets Status: the PersistentVolume and
	// PersistentVolumeClaim status strategies reset spec to the stored one before validating
	// admission runs, but keep metadata, so a write through /status can drop a finalizer or an
	// annotation as an update of the main resource can. On a status write object and oldObject
	// are both set, object.spec equals oldObject.spec, and each form's expression then asks only
	// what metadata and status may change (a form over spec alone admits every status write).
	Kind       Kind
	Operations []Operation
	Status     bool
	// ExemptControllers leaves the controllers' writes (the built-in ones and those the config
	// lists) to the Go form, as the Go form does not judge them either, or because only they may
	// make the write and the CEL form cannot tell the legitimate case from the object alone.
	ExemptControllers bool
	// Refuses is a CEL expression over object, oldObject and request, true for a write the rule
	// refuses. It may use variables.confirmKey, the reclaim confirmation annotation's name.
	Refuses string
	// Message is a CEL expression for the refusal's message; it names the rule as the webhook's
	// findings do.
	Message string
	// Weaker says what the CEL form admits that the Go form refuses, and where it refuses what the
	// Go form would admit, and why; "" when the two agree on every write.
	Weaker string
}

// CEL vocabulary for the forms. Fields of an object the apiserver may leave unset are tested with
// has() before use: reading an unset field is an error, and an error fails the write.

// celAnn is true when the object's annotation key is set.
func celAnn(obj, key string) string {
	return fmt.Sprintf("(has(%[1]s.metadata.annotations) && %[2]s in %[1]s.metadata.annotations)", obj, key)
}

// celPhase is the object's status.phase, "" when unset.
func celPhase(obj string) string {
	return fmt.Sprintf("(has(%[1]s.status) && has(%[1]s.status.phase) ? %[1]s.status.phase : '')", obj)
}

// celRefField is a field of the volume's claimRef, "" when there is no claimRef or no such field.
func celRefField(obj, field string) string {
	return fmt.Sprintf("(has(%[1]s.spec.claimRef) && has(%[1]s.spec.claimRef.%[2]s) ? %[1]s.spec.claimRef.%[2]s : '')", obj, field)
}

// celVolumeName is a claim's spec.volumeName, "" when unset.
func celVolumeName(obj string) string {
	return fmt.Sprintf("(has(%[1]s.spec.volumeName) ? %[1]s.spec.volumeName : '')", obj)
}

// celFinalizerRemoved is true when the write drops the finalizer (a CEL string expression).
func celFinalizerRemoved(f string) string {
	return fmt.Sprintf("(has(oldObject.metadata.finalizers) && %[1]s in oldObject.metadata.finalizers && !(has(object.metadata.finalizers) && %[1]s in object.metadata.finalizers))", f)
}

// celVolumeInUse is volumeInUse for the old volume.
func celVolumeInUse() string {
	return fmt.Sprintf("(%s in ['Bound', 'Released'] || %s != '')", celPhase("oldObject"), celRefField("oldObject", "uid"))
}

// celQuote quotes a string as a CEL literal.
func celQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// celUUID matches the uids the apiserver gives objects (storage.MadeFor).
const celUUID = `'^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'`
