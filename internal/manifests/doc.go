// Package manifests reads the objects pvguard audits (PersistentVolumes, PersistentVolumeClaims,
// StorageClasses and Nodes) from manifest files, for the offline audit (`pvguard audit -f`).
//
// It reads what kubectl reads and writes: JSON (one value or a stream of them), multi-document
// YAML, and Lists of items in either. Each format has one small reader, and each leaves the
// parsing to a maintained library: YAML is converted to JSON by sigs.k8s.io/yaml, strictly, as
// kubectl and the apiserver convert it; JSON is decoded into the typed objects by
// go-json-experiment (the basis of encoding/json/v2), strictly, as the apiserver decodes it.
// A document that cannot be read is an error naming its file, its place and, where there is one,
// the object and the field; it never hides the documents around it.
//
// Nothing here judges an object: Load returns a clusterstate.State for the audit engine.
package manifests
