// Package sequence is a stateful model for testing the policy engine over sequences of writes, at
// the policy level (in memory, no apiserver). It holds:
//
//   - World, a cluster of volumes, claims, classes and nodes that implements policy.View through
//     testobj.View, and Apply, which runs one Step through the kube-apiserver semantics that matter
//     here (status vs main resource, immutable fields, protection finalizers added on create,
//     deletion with finalizers) and the engine (a write with a deny finding is refused);
//   - Check, the oracle: the deny invariants written as predicates over the state before and
//     after a write, independently of the rule code;
//   - Generate and NextStep, random starting clusters and random writes (a catalogue of field
//     changes by every kind of identity, plus what the upstream controllers would do next);
//   - Flows, the upstream storage flows as named sequences of writes by their real identities;
//   - Case, a world and a sequence of steps as a YAML file, for regression cases.
//
// It is test-only: nothing the pvguard binary links imports it.
package sequence
