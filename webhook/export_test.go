package webhook

// The layers of a review, for BenchmarkAdmissionLayers (package webhook_test, which needs the
// benchmark fixtures that themselves import this package).
var (
	DecodeAdmissionReview = decodeAdmissionReview
	DecodeReview          = decodeReview
	WriteReview           = writeReview
)

const ReviewKind = reviewKind
