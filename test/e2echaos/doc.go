// Package e2echaos tortures pvguard's binder on a real kube-apiserver: hundreds of claims
// competing for fewer volumes, pre-bound and planted pairs that policy denies, objects created
// while the binder runs, binders killed at random moments (in process between two writes, and
// real processes with SIGKILL), two replicas contending for the leader Lease, injected write
// conflicts, and an informer cache that lags. Afterwards an invariant checker of its own
// (checker.go), which reads the objects live and shares no code with pvguard's policy or binder
// packages, judges the result.
//
// The same harness stops a leader without killing it (freeze_test.go): real processes, each
// behind a recording proxy of its own, one frozen with SIGSTOP or cut off by a stalled link past
// its Lease, and a watch that judges every change. They live here rather than in a package of
// their own because they need what this one has: the control plane with pvguard's webhooks, the
// real `pvguard serve` child processes, the checker and the monitor.
//
// Sizes and the seed come from the environment (see config in main_test.go); every run logs the
// seed and the command that repeats it.
package e2echaos
