package webhook

import (
	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// requestLogger is admission.DefaultLogConstructor's logger for a request (object, namespace,
// name, resource, user, request ID), with those values added only when something is logged.
// controller-runtime builds the request logger twice per review, and with zap adding six values
// encodes them (the resource by reflection) on the spot: that cost a review more than all of
// pvguard's rules, for lines that are almost never written.
func requestLogger(base logr.Logger, req *admission.Request) logr.Logger {
	if req == nil || base.GetSink() == nil {
		return admission.DefaultLogConstructor(base, req)
	}
	return base.WithSink(&lazyRequestSink{base: base, req: req})
}

// lazyRequestSink forwards to the base logger's sink with the request's values added, adding
// them at the first call that needs them.
type lazyRequestSink struct {
	base logr.Logger
	req  *admission.Request
}

var _ logr.CallDepthLogSink = &lazyRequestSink{}

// sink is the base sink with the request's values; depth accounts for this sink's own frame on
// the way to a log line, so caller annotations stay right.
func (s *lazyRequestSink) sink(depth int) logr.LogSink {
	sink := admission.DefaultLogConstructor(s.base, s.req).GetSink()
	if cd, ok := sink.(logr.CallDepthLogSink); ok && depth > 0 {
		sink = cd.WithCallDepth(depth)
	}
	return sink
}

func (s *lazyRequestSink) Init(logr.RuntimeInfo) {}

func (s *lazyRequestSink) Enabled(level int) bool { return s.base.GetSink().Enabled(level) }

func (s *lazyRequestSink) Info(level int, msg string, keysAndValues ...any) {
	s.sink(1).Info(level, msg, keysAndValues...)
}

func (s *lazyRequestSink) Error(err error, msg string, keysAndValues ...any) {
	s.sink(1).Error(err, msg, keysAndValues...)
}

func (s *lazyRequestSink) WithValues(keysAndValues ...any) logr.LogSink {
	return s.sink(0).WithValues(keysAndValues...)
}

func (s *lazyRequestSink) WithName(name string) logr.LogSink { return s.sink(0).WithName(name) }

func (s *lazyRequestSink) WithCallDepth(depth int) logr.LogSink { return s.sink(depth) }
