// Package e2eexplain checks `pvguard explain` against what real components leave in a real API
// server:
//   - TestEveryReasonIsExplained (reasons_test.go) keeps a claim Pending for each reason a claim
//     can stay Pending, on one test/cluster control plane (the real kube-scheduler and
//     kube-controller-manager, pvguard installed as the chart installs it with --binder=active),
//     and checks that the CLI, the kubectl plugin, the binder's NoVolumeFits event and the
//     dashboard's page and API each say that reason (docs/explain.md, "End to end");
//   - TestExplainSaysWhetherTheProvisionerRuns (provisioner_test.go) tells from the real
//     external-provisioner's Lease whether a claim's provisioner appears to run.
package e2eexplain
