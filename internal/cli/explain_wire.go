package cli

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/pvguard/pvguard/storage"
)

// This file reads the two large lists of a claim's local explanation, claims and volumes,
// from their protobuf encoding without decoding every object: of most objects the explanation
// needs a few fields (whose claim a volume names, which volume a claim names), and decoding the
// whole of 200,000 objects, managed fields and annotations included, only to drop them was most
// of the read's CPU and all of its garbage. Each item is scanned for those fields first and
// decoded whole (by its generated Unmarshal) only when it is kept.

// pageReader reads into buf one page of the cluster-wide list of resource
// ("persistentvolumeclaims" or "persistentvolumes"), as the apiserver sends it: protobuf when it
// can, else JSON (listItems reads both).
type pageReader func(ctx context.Context, resource string, o metav1.ListOptions, buf *bytes.Buffer) error

// restPages reads pages through c, a client of the core group whose requests accept protobuf,
// into a buffer the caller reuses page after page.
func restPages(c rest.Interface) pageReader {
	return func(ctx context.Context, resource string, o metav1.ListOptions, buf *bytes.Buffer) error {
		body, err := c.Get().Resource(resource).VersionedParams(&o, scheme.ParameterCodec).Stream(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = body.Close() }()
		buf.Reset()
		if _, err := buf.ReadFrom(body); err != nil {
			return fmt.Errorf("reading a page of %s: %w", resource, err)
		}
		return nil
	}
}

// eachItemsPage reads the cluster-wide list of resource, of kind, through pages, limit objects a
// page, and calls f with each page's items (listItems) in order. It asks for the next page while
// f reads one, so that the apiserver's work on a page and the client's on the one before
// overlap: it holds at most two pages, each in a buffer reused two pages later. The items are
// valid only during f.
func eachItemsPage(ctx context.Context, pages pageReader, resource, kind string, limit int64, f func(items [][]byte) error) error {
	type page struct {
		buf   *bytes.Buffer
		items [][]byte
		err   error
	}
	readCtx, cancel := context.WithCancel(ctx)
	var reader sync.WaitGroup
	defer reader.Wait() // so that nothing reads through pages once this returns
	defer cancel()      // ends the reader when f fails
	out := make(chan page)
	free := make(chan *bytes.Buffer, 2)
	free <- new(bytes.Buffer)
	free <- new(bytes.Buffer)
	reader.Go(func() {
		defer close(out)
		o := metav1.ListOptions{Limit: limit}
		for {
			var p page
			select {
			case p.buf = <-free:
			case <-readCtx.Done():
				return
			}
			var next string
			if p.err = pages(readCtx, resource, o, p.buf); p.err == nil {
				p.items, next, p.err = listItems(p.buf.Bytes(), kind)
			}
			select {
			case out <- p:
			case <-readCtx.Done():
				return
			}
			if p.err != nil || next == "" {
				return
			}
			o.Continue = next
		}
	})
	for p := range out {
		if p.err != nil {
			return p.err
		}
		if err := f(p.items); err != nil {
			return err
		}
		free <- p.buf
	}
	return ctx.Err() // the reader stops without a page when ctx ends
}

// protobufMagic starts the apiserver's protobuf encoding of an object (apimachinery's protobuf
// serializer): a runtime.Unknown holding the object's encoding follows.
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// listItems splits an encoded list of kind into its items, each in protobuf, and its continue
// token. The items of a protobuf list are slices of body; a list in JSON (a server that does not
// speak protobuf) is decoded and each item encoded in protobuf, so that one path reads both.
func listItems(body []byte, kind string) (items [][]byte, next string, err error) {
	if !bytes.HasPrefix(body, protobufMagic) {
		return jsonListItems(body, kind)
	}
	var raw []byte
	var gotKind, encoding string
	err = eachField(body[len(protobufMagic):], func(num protowire.Number, v []byte) error {
		switch num {
		case 1: // typeMeta
			return eachField(v, func(num protowire.Number, v []byte) error {
				if num == 2 { // kind
					gotKind = string(v)
				}
				return nil
			})
		case 2: // raw
			raw = v
		case 3: // contentEncoding
			encoding = string(v)
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, "", fmt.Errorf("decoding a %s: %w", kind, err)
	case gotKind != kind:
		return nil, "", fmt.Errorf("decoding a %s: the server sent a %q", kind, gotKind)
	case encoding != "":
		return nil, "", fmt.Errorf("decoding a %s: content encoding %q", kind, encoding)
	}
	err = eachField(raw, func(num protowire.Number, v []byte) error {
		switch num {
		case 1: // metadata: ListMeta
			return eachField(v, func(num protowire.Number, v []byte) error {
				if num == 3 { // continue
					next = string(v)
				}
				return nil
			})
		case 2: // items
			items = append(items, v)
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("decoding a %s: %w", kind, err)
	}
	return items, next, nil
}

// jsonListItems is listItems for a list in JSON.
func jsonListItems(body []byte, kind string) (items [][]byte, next string, err error) {
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		return nil, "", fmt.Errorf("decoding a %s: %w", kind, err)
	}
	var encoded [][]byte
	switch l := obj.(type) {
	case *corev1.PersistentVolumeClaimList:
		for i := range l.Items {
			b, err := l.Items[i].Marshal()
			if err != nil {
				return nil, "", err
			}
			encoded = append(encoded, b)
		}
		next = l.Continue
	case *corev1.PersistentVolumeList:
		for i := range l.Items {
			b, err := l.Items[i].Marshal()
			if err != nil {
				return nil, "", err
			}
			encoded = append(encoded, b)
		}
		next = l.Continue
	default:
		return nil, "", fmt.Errorf("decoding a %s: the server sent a %T", kind, obj)
	}
	if obj.GetObjectKind().GroupVersionKind().Kind != kind {
		return nil, "", fmt.Errorf("decoding a %s: the server sent a %q", kind, obj.GetObjectKind().GroupVersionKind().Kind)
	}
	return encoded, next, nil
}

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
