package webhook_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/pvguard/pvguard/hack/bench/admissionbench"
	"github.com/pvguard/pvguard/policy"
)

// Admission benchmarks: pvguard's webhook against a no-op controller-runtime webhook, over TLS
// with an HTTP/2 keep-alive client and as bare handlers. Results and the command line are in
// docs/benchmarks.md; nothing here asserts a time.

var benchEnv struct {
	once sync.Once
	tls  *admissionbench.TLS
	log  logr.Logger
	err  error
}

func benchSetup(b *testing.B) (*admissionbench.TLS, logr.Logger) {
	b.Helper()
	benchEnv.once.Do(func() {
		benchEnv.log = admissionbench.Logger()
		benchEnv.tls, benchEnv.err = admissionbench.IssueTLS()
	})
	if benchEnv.err != nil {
		b.Fatal(benchEnv.err)
	}
	return benchEnv.tls, benchEnv.log
}

// benchTargets are pvguard's router and the no-op baseline, in that order.
func benchTargets(b *testing.B) ([]string, []http.Handler) {
	t, log := benchSetup(b)
	srv := admissionbench.PVGuard(t, admissionbench.View(), log)
	return []string{"pvguard", "noop"}, []http.Handler{srv.Handler(), admissionbench.Noop()}
}

// BenchmarkAdmissionTLS drives each server with b.RunParallel over one HTTP/2 connection
// (16 concurrent streams on two cores) and reports reviews/s, client-observed latency and the
// time spent in the server's handler.
func BenchmarkAdmissionTLS(b *testing.B) {
	t, log := benchSetup(b)
	pvguard := admissionbench.PVGuard(t, admissionbench.View(), log)
	cfg := pvguard.TLSConfig()
	type target struct {
		name string
		url  string
		rec  *atomic.Pointer[admissionbench.Recorder]
		c    *http.Client
	}
	var targets []target
	for _, h := range []struct {
		name string
		h    http.Handler
	}{{"pvguard", pvguard.Handler()}, {"noop", admissionbench.Noop()}} {
		rec := new(atomic.Pointer[admissionbench.Recorder])
		addr, stop, err := admissionbench.Serve(admissionbench.Timed(h.h, rec), cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(stop)
		targets = append(targets, target{name: h.name, url: "https://" + addr, rec: rec, c: admissionbench.Client(t.Pool)})
	}
	for _, c := range admissionbench.Cases() {
		for _, tg := range targets {
			b.Run(c.Name+"/"+tg.name, func(b *testing.B) {
				url := tg.url + c.Path
				if err := admissionbench.Post(tg.c, url, c.Body); err != nil { // also warms the connection
					b.Fatal(err)
				}
				server, client := admissionbench.NewRecorder(b.N), admissionbench.NewRecorder(b.N)
				tg.rec.Store(server)
				defer tg.rec.Store(nil)
				b.SetParallelism(8)
				b.ResetTimer()
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						t0 := time.Now()
						if err := admissionbench.Post(tg.c, url, c.Body); err != nil {
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
	us := func(q float64) float64 { return float64(admissionbench.Quantile(d, q)) / float64(time.Microsecond) }
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
	for _, c := range admissionbench.Cases() {
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

// BenchmarkAdmissionLayers splits a pvguard review into its layers: controller-runtime's decoding
// of the AdmissionReview, pvguard's decoding of the object, the policy engine, and the encoding
// of the response.
func BenchmarkAdmissionLayers(b *testing.B) {
	scheme := runtime.NewScheme()
	if err := admissionv1.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	decoder := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	engine := policy.NewEngine(nil)
	view := admissionbench.View()
	for _, c := range admissionbench.Cases() {
		var ar admissionv1.AdmissionReview
		if _, _, err := decoder.Decode(c.Body, nil, &ar); err != nil {
			b.Fatal(err)
		}
		req := ar.Request
		b.Run(c.Name+"/decode-review", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var ar admissionv1.AdmissionReview
				if _, _, err := decoder.Decode(c.Body, nil, &ar); err != nil {
					b.Fatal(err)
				}
			}
		})
		r := &policy.Review{Operation: policy.Operation(req.Operation), User: policy.UserInfo{Username: req.UserInfo.Username, Groups: req.UserInfo.Groups}}
		decode := func() {
			var err error
			switch req.Kind.Kind {
			case "PersistentVolume":
				r.Kind, r.PV = policy.KindPersistentVolume, new(corev1.PersistentVolume)
				err = json.Unmarshal(req.Object.Raw, r.PV)
			default:
				r.Kind, r.PVC = policy.KindPersistentVolumeClaim, new(corev1.PersistentVolumeClaim)
				err = json.Unmarshal(req.Object.Raw, r.PVC)
				if err == nil && len(req.OldObject.Raw) > 0 {
					r.OldPVC = new(corev1.PersistentVolumeClaim)
					err = json.Unmarshal(req.OldObject.Raw, r.OldPVC)
				}
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		b.Run(c.Name+"/decode-objects", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				decode()
			}
		})
		decode()
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
			var buf bytes.Buffer
			out := admissionv1.AdmissionReview{Response: &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}}
			out.APIVersion, out.Kind = "admission.k8s.io/v1", "AdmissionReview"
			for b.Loop() {
				buf.Reset()
				if err := json.NewEncoder(&buf).Encode(out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
