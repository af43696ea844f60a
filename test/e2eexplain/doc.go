// Package e2eexplain checks `pvguard explain` against what the real components leave in a real
// API server. TestEveryReasonIsExplained keeps a claim Pending for each reason a claim can stay
// Pending, on one test/cluster control plane (the real kube-scheduler and
// kube-controller-manager, pvguard installed as the chart installs it with --binder=active), and
// checks that the CLI, the kubectl plugin, the binder's NoVolumeFits event and the dashboard's
// page and API each say that reason (docs/explain.md, "End to end").
package e2eexplain
