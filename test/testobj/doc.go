// Package testobj builds test objects with modifiers, in the style of cert-manager's
// test/unit/gen: testobj.PV("pv-1", testobj.Capacity("1Gi"), testobj.ClaimRef("ns", "c", "uid")).
// It also provides View, an in-memory policy.View over a fixed set of objects, and Review, the
// AdmissionReview body of a write; WriteFiles, a temporary directory of files; and
// HTTPGet/HTTPGetAs, a GET through a handler as a given reader.
package testobj
