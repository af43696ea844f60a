// Package gen generates the objects that tests and benchmarks share, deterministically:
//
//   - Inventory, large synthetic clusters for the audit (policy and manifests tests,
//     hack/bench/audit), and their writers to YAML and JSON files;
//   - AdmissionObjects and AdmissionCases, a realistic cluster state and the AdmissionReview
//     bodies an apiserver would send for it (webhook tests, hack/bench/admission), with
//     AdmissionView and CacheView, the view the webhook reads it through.
//
// It is test-only: nothing the pvguard binary links imports it.
package gen
