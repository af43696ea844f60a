package webhook_test

import (
	"bytes"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/admissionload"
	"github.com/pvguard/pvguard/test/gen"
	"github.com/pvguard/pvguard/webhook"
)

// Admission benchmarks: pvguard's webhook against a no-op controller-runtime webhook, over TLS
// with an HTTP/2 keep-alive client and as bare handlers. Results and the command line are in
// docs/benchmarks.md; nothing here asserts a time.

var benchEnv struct {
	once sync.Once
	tls  *admissionload.TLS
	log  logr.Logger
	err  error
}

func benchSetup(b *testing.B) (*admissionload.TLS, logr.Logger) {
	b.Helper()
	benchEnv.once.Do(func() {
		benchEnv.log = admissionload.Logger()
		benchEnv.tls, benchEnv.err = admissionload.IssueTLS()
	})
	if benchEnv.err != nil {
		b.Fatal(benchEnv.err)
	}
	return benchEnv.tls, benchEnv.log
}

// benchTargets are pvguard's router and the no-op baseline, in that order.
func benchTargets(b *testing.B) ([]string, []http.Handler) {
	t, log := benchSetup(b)
	srv := admissionload.PVGuard(t, gen.AdmissionView(), log)
	return []string{"pvguard", "noop"}, []http.Handler{srv.Handler(), admissionload.Noop()}
}

// BenchmarkAdmissionTLS drives each server with b.RunParallel over one HTTP/2 connection
// (16 concurrent streams on two cores) and reports reviews/s, client-observed latency and the
// time spent in the server's handler.
func BenchmarkAdmissionTLS(b *testing.B) {
	t, log := benchSetup(b)
	pvguard := admissionload.PVGuard(t, gen.AdmissionView(), log)
	cfg := pvguard.TLSConfig()
	type target struct {
		name string
		url  string
		rec  *atomic.Pointer[admissionload.Recorder]
		c    *http.Client
	}
	var targets []target
	for _, h := range []struct {
		name string
		h    http.Handler
	}{{"pvguard", pvguard.Handler()}, {"noop", admissionload.Noop()}} {
		rec := new(atomic.Pointer[admissionload.Recorder])
		addr, stop, err := admissionload.Serve(admissionload.Timed(h.h, rec), cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(stop)
		targets = append(targets, target{name: h.name, url: "https://" + addr, rec: rec, c: admissionload.Client(t.Pool)})
	}
	for _, c := range gen.AdmissionCases() {
		for _, tg := range targets {
			b.Run(c.Name+"/"+tg.name, func(b *testing.B) {
				url := tg.url + c.Path
				if err := admissionload.Post(tg.c, url, c.Body); err != nil { // also warms the connection
					b.Fatal(err)
				}
				server, client := admissionload.NewRecorder(b.N), admissionload.NewRecorder(b.N)
				tg.rec.Store(server)
				defer tg.rec.Store(nil)
				b.SetParallelism(8)
				b.ResetTimer()
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						t0 := time.Now()
						if err := admissionload.Post(tg.c, url, c.Body); err != nil {
							b.Error(err)
							return
						}
						client.Observe(time.Since(t0))
					}
				})
				elapsed := time.Since(start)
				b.StopTimer()
				reportLatency(b, "", client.Durations())
				reportLatency(b, "srv-", server.Durations())
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "reviews/s")
			})
		}
	}
}

func reportLatency(b *testing.B, prefix string, d []time.Duration) {
	us := func(q float64) float64 { return float64(admissionload.Quantile(d, q)) / float64(time.Microsecond) }
	b.ReportMetric(us(0.50), prefix+"p50-us")
	b.ReportMetric(us(0.99), prefix+"p99-us")
}

// reusableBody is a request body that can be rewound without allocating.
type reusableBody struct{ bytes.Reader }

func (*reusableBody) Close() error { return nil }

// discardWriter is a ResponseWriter that keeps the last response for one check and is reset per
// request, so the benchmark measures the handler rather than httptest's recorder.
type discardWriter struct {
	h    http.Header
	code int
	buf  bytes.Buffer
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(p []byte) (int, error) { return w.buf.Write(p) }
func (w *discardWriter) reset() {
	clear(w.h)
	w.code = http.StatusOK
	w.buf.Reset()
}

// BenchmarkAdmissionHandler calls each router's ServeHTTP directly, with no network and no TLS:
// the cost and allocations of one review (run with -benchmem).
func BenchmarkAdmissionHandler(b *testing.B) {
	names, handlers := benchTargets(b)
	for _, c := range gen.AdmissionCases() {
		for i, h := range handlers {
			b.Run(c.Name+"/"+names[i], func(b *testing.B) {
				body := &reusableBody{}
				req, err := http.NewRequest(http.MethodPost, "https://pvguard.example"+c.Path, body)
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				w := &discardWriter{h: http.Header{}}
				serve := func() {
					body.Reset(c.Body)
					req.ContentLength = int64(len(c.Body))
					w.reset()
					h.ServeHTTP(w, req)
				}
				serve()
				if w.code != http.StatusOK || !bytes.Contains(w.buf.Bytes(), []byte(`"allowed":true`)) {
					b.Fatalf("HTTP %d: %s", w.code, w.buf.String())
				}
				b.ReportAllocs()
				for b.Loop() {
					serve()
				}
			})
		}
	}
}

// BenchmarkAdmissionLayers splits a pvguard review into its layers, each the function the
// server runs: decoding the AdmissionReview, decoding and checking the object(s), the policy
// engine, and encoding the response.
func BenchmarkAdmissionLayers(b *testing.B) {
	engine := policy.NewEngine(nil)
	view := gen.AdmissionView()
	for _, c := range gen.AdmissionCases() {
		ar, err := webhook.DecodeAdmissionReview(c.Body)
		if err != nil {
			b.Fatal(err)
		}
		req := admission.Request{AdmissionRequest: *ar.Request}
		kind := policy.KindPersistentVolumeClaim
		if req.Kind.Kind == "PersistentVolume" {
			kind = policy.KindPersistentVolume
		}
		b.Run(c.Name+"/decode-review", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := webhook.DecodeAdmissionReview(c.Body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.Name+"/decode-objects", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, resp, ok := webhook.DecodeReview(kind, req); !ok {
					b.Fatalf("%+v", resp)
				}
			}
		})
		r, resp, ok := webhook.DecodeReview(kind, req)
		if !ok {
			b.Fatalf("%+v", resp)
		}
		b.Run(c.Name+"/engine", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d, err := engine.Admit(r, view)
				if err != nil || !d.Allowed() || len(d.Warn) > 0 {
					b.Fatalf("%+v %v", d, err)
				}
			}
		})
		b.Run(c.Name+"/encode-response", func(b *testing.B) {
			b.ReportAllocs()
			w := &discardWriter{h: http.Header{}}
			out := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
			for b.Loop() {
				w.reset()
				webhook.WriteReview(w, webhook.ReviewKind, "admission.k8s.io/v1", out, logr.Discard())
			}
		})
	}
}
