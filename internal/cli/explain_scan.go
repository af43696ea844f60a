package cli

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/internal/protofields"
	"github.com/pvguard/pvguard/storage"
)

// This file scans the items of the local explanation's lists for the few fields it needs of
// each (explain_wire.go reads the lists), and decodes whole the items it keeps.

// eachField calls f with the number and the value of each field of the protobuf message b, in
// order (protofields.Each): the payload of a length-delimited field (a string, bytes, a message,
// a map entry, one element of a repeated one), nil for a scalar, which no caller reads.
func eachField(b []byte, f func(num protowire.Number, v []byte) error) error {
	return protofields.Each(b, func(num protowire.Number, _ protowire.Type, _, v []byte) error { return f(num, v) })
}

// stringField is a string field of a message: its number, and where stringFields puts it.
type stringField struct {
	num protowire.Number
	dst *string
}

// stringFields reads the given string fields of the message b.
func stringFields(b []byte, fields ...stringField) error {
	return eachField(b, func(num protowire.Number, v []byte) error {
		for _, f := range fields {
			if f.num == num {
				*f.dst = string(v)
			}
		}
		return nil
	})
}

// claimFacts is what the local read needs of every claim: who it is and which volume it names.
type claimFacts struct {
	namespace, name, uid, volumeName string
}

// scanClaim reads claimFacts from the protobuf encoding of a PersistentVolumeClaim.
func scanClaim(b []byte) (claimFacts, error) {
	var f claimFacts
	err := eachField(b, func(num protowire.Number, v []byte) error {
		switch num {
		case 1: // metadata: name, namespace, uid
			return stringFields(v, stringField{1, &f.name}, stringField{3, &f.namespace}, stringField{5, &f.uid})
		case 2: // spec: volumeName
			return stringFields(v, stringField{3, &f.volumeName})
		}
		return nil
	})
	if err != nil {
		return claimFacts{}, fmt.Errorf("decoding a PersistentVolumeClaim: %w", err)
	}
	return f, nil
}

// volumeFacts is what the local read needs of every volume to tell whether it is settled and,
// once the closest settled volumes are kept, whether it can rank before them: its name, class
// (storage.VolumeClass: the beta annotation over spec.storageClassName), phase and the claim it
// names.
type volumeFacts struct {
	name, class, phase            string
	hasRef                        bool
	refNamespace, refName, refUID string
}

// scanVolume reads volumeFacts from the protobuf encoding of a PersistentVolume.
func scanVolume(b []byte) (volumeFacts, error) {
	var f volumeFacts
	var specClass string
	betaClass, hasBetaClass := "", false
	err := eachField(b, func(num protowire.Number, v []byte) error {
		switch num {
		case 1: // metadata
			return eachField(v, func(num protowire.Number, v []byte) error {
				switch num {
				case 1:
					f.name = string(v)
				case 12: // annotations: an entry, key 1 and value 2
					var key, value []byte
					err := eachField(v, func(num protowire.Number, v []byte) error {
						switch num {
						case 1:
							key = v
						case 2:
							value = v
						}
						return nil
					})
					if err == nil && string(key) == storage.AnnBetaStorageClass {
						betaClass, hasBetaClass = string(value), true
					}
					return err
				}
				return nil
			})
		case 2: // spec
			return eachField(v, func(num protowire.Number, v []byte) error {
				switch num {
				case 4: // claimRef: namespace, name, uid
					f.hasRef = true
					return stringFields(v, stringField{2, &f.refNamespace}, stringField{3, &f.refName}, stringField{4, &f.refUID})
				case 6:
					specClass = string(v)
				}
				return nil
			})
		case 3: // status: phase
			return stringFields(v, stringField{1, &f.phase})
		}
		return nil
	})
	if err != nil {
		return volumeFacts{}, fmt.Errorf("decoding a PersistentVolume: %w", err)
	}
	f.class = specClass
	if hasBetaClass {
		f.class = betaClass
	}
	return f, nil
}

// decodeClaim and decodeVolume decode an item whole, without the managed fields and the
// `kubectl apply` annotation (as trimClaim), which no rule, the binder nor the explanation reads.
func decodeClaim(b []byte) (*corev1.PersistentVolumeClaim, error) {
	c := &corev1.PersistentVolumeClaim{}
	if err := c.Unmarshal(b); err != nil {
		return nil, fmt.Errorf("decoding a PersistentVolumeClaim: %w", err)
	}
	c.ManagedFields, c.Annotations = nil, withoutLastApplied(c.Annotations)
	return c, nil
}

func decodeVolume(b []byte) (*corev1.PersistentVolume, error) {
	v := &corev1.PersistentVolume{}
	if err := v.Unmarshal(b); err != nil {
		return nil, fmt.Errorf("decoding a PersistentVolume: %w", err)
	}
	v.ManagedFields, v.Annotations = nil, withoutLastApplied(v.Annotations)
	return v, nil
}
