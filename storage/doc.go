// Package storage is the vocabulary of PersistentVolumes, PersistentVolumeClaims and
// StorageClasses that pvguard's rules, binder and explanations share: the annotations, labels and
// finalizers that Kubernetes' storage controllers and external provisioners read and write, the
// pair predicates that say whether a volume can serve a claim (the checks upstream's binder makes,
// which the rules enforce and pvguard's binder chooses by), and what links a volume to a claim.
//
// Everything here is a pure function of the objects it is given; nothing judges a write or
// phrases a finding (package policy does, with these words). It imports only k8s.io packages.
package storage
