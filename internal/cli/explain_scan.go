package cli

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
)

// This file scans the items of the local explanation's lists for the few fields it needs of
// each (explain_wire.go reads the lists), and decodes whole the items it keeps.

// eachField calls f with the number and the value of each field of the protobuf message b, in
// order: the payload of a length-delimited field (a string, bytes, a message, a map entry, one
// element of a repeated one), nil for a scalar, which no caller reads.
func eachField(b []byte, f func(num protowire.Number, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		if typ == protowire.BytesType {
			v, n = protowire.ConsumeBytes(b)
		} else {
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		if err := f(num, v); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
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
		case 1: // metadata
			return eachField(v, func(num protowire.Number, v []byte) error {
				switch num {
				case 1:
					f.name = string(v)
				case 3:
					f.namespace = string(v)
				case 5:
					f.uid = string(v)
				}
				return nil
			})
		case 2: // spec
			return eachField(v, func(num protowire.Number, v []byte) error {
				if num == 3 {
					f.volumeName = string(v)
				}
				return nil
			})
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
				case 4: // claimRef
					f.hasRef = true
					return eachField(v, func(num protowire.Number, v []byte) error {
						switch num {
						case 2:
							f.refNamespace = string(v)
						case 3:
							f.refName = string(v)
						case 4:
							f.refUID = string(v)
						}
						return nil
					})
				case 6:
					specClass = string(v)
				}
				return nil
			})
		case 3: // status
			return eachField(v, func(num protowire.Number, v []byte) error {
				if num == 1 {
					f.phase = string(v)
				}
				return nil
			})
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
