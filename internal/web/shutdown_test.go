package web_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/certs"
	"github.com/pvguard/pvguard/internal/web"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
	"github.com/pvguard/pvguard/webhook"
)

// blockingView holds every volume lookup until release is closed, so a review can be kept in
// flight.
type blockingView struct {
	*testobj.View
	entered chan struct{}
	release chan struct{}
}

func (b *blockingView) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	return b.View.PersistentVolume(name)
}

type tlsServer struct {
	addr   string
	pool   *x509.CertPool
	cancel context.CancelFunc
	done   chan error
}

func startTLSServer(t *testing.T, opts web.Options) *tlsServer {
	t.Helper()
	b, err := certs.Issue(certs.Request{DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(b.Serving.CertPEM, b.Serving.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	opts.Listen = "127.0.0.1:0"
	opts.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &pair, nil }
	if opts.Engines == nil {
		opts.Engines = webhook.StaticEngine{E: policy.NewEngine(nil)}
	}
	if opts.Views == nil {
		opts.Views = webhook.StaticView{V: testobj.NewView()}
	}
	srv := web.NewServer(opts)
	ctx, cancel := context.WithCancel(context.Background())
	s := &tlsServer{pool: x509.NewCertPool(), cancel: cancel, done: make(chan error, 1)}
	s.pool.AddCert(b.CA.Cert)
	go func() { s.done <- srv.Start(ctx) }()
	s.addr = srv.Addr().String()
	t.Cleanup(cancel)
	return s
}

// client makes a fresh connection per request (no keep-alive), optionally with a client
// certificate.
func (s *tlsServer) client(cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: s.pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
}

func (s *tlsServer) get(t *testing.T, c *http.Client, path string) int {
	t.Helper()
	resp, err := c.Get("https://" + s.addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestShutdownServesThroughTheDelayThenDrains: told to stop, the server reports not ready at
// once, keeps accepting connections for the delay (endpoints take that long to drop it), and
// finishes a review that was in flight before it returns.
func TestShutdownServesThroughTheDelayThenDrains(t *testing.T) {
	view := &blockingView{View: testobj.NewView(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	s := startTLSServer(t, web.Options{Views: webhook.StaticView{V: view}, ShutdownDelay: 500 * time.Millisecond, ShutdownTimeout: 10 * time.Second})
	c := s.client(nil)

	body := testobj.Review(t, testobj.PVCKind, "persistentvolumeclaims", admissionv1.Create, testobj.PVC("team-a", "c", testobj.VolumeName("pv-1")), nil, "alice")
	inFlight := make(chan int, 1)
	go func() {
		resp, err := c.Post("https://"+s.addr+webhook.PathValidatePVC, "application/json", bytes.NewReader(body))
		if err != nil {
			inFlight <- -1
			return
		}
		resp.Body.Close()
		inFlight <- resp.StatusCode
	}()
	<-view.entered
	start := time.Now()
	s.cancel()
	time.Sleep(50 * time.Millisecond)
	if code := s.get(t, c, "/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("readyz while stopping: %d, want 503", code)
	}
	if code := s.get(t, c, "/healthz"); code != http.StatusOK {
		t.Fatalf("a new connection during the shutdown delay: %d", code)
	}
	time.Sleep(600 * time.Millisecond) // past the delay: the listener closes, the review is still held
	if _, err := c.Get("https://" + s.addr + "/healthz"); err == nil {
		t.Fatal("new connections still accepted after the delay")
	}
	close(view.release)
	if code := <-inFlight; code != http.StatusOK {
		t.Fatalf("the in-flight review got %d, want 200", code)
	}
	if err := <-s.done; err != nil {
		t.Fatalf("Start: %v", err)
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Fatalf("stopped after %s, before the delay", d)
	}
}

// TestClientCertificateRequiredOnWebhookPaths: with ClientCAs set, reviews need a client
// certificate those CAs signed; probes do not.
func TestClientCertificateRequiredOnWebhookPaths(t *testing.T) {
	caCert, caKey := testCA(t)
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	s := startTLSServer(t, web.Options{ClientCAs: pool, ReadyChecks: map[string]func() error{}})
	good := clientCert(t, caCert, caKey)
	otherCA, otherKey := testCA(t)
	stranger := clientCert(t, otherCA, otherKey)

	body := testobj.Review(t, testobj.PVKind, "persistentvolumes", admissionv1.Create, testobj.PV("pv-1"), nil, "alice")
	postWith := func(cert *tls.Certificate) (int, error) {
		resp, err := s.client(cert).Post("https://"+s.addr+webhook.PathValidatePV, "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := postWith(nil); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("review without a client certificate: %d %v, want 401", code, err)
	}
	if code, err := postWith(&good); err != nil || code != http.StatusOK {
		t.Fatalf("review with a trusted client certificate: %d %v, want 200", code, err)
	}
	// Go's client withholds a certificate the server's CA list does not name, so the stranger
	// arrives without one; either way the review must not be answered.
	if code, err := postWith(&stranger); err == nil && code == http.StatusOK {
		t.Fatal("a client certificate from another CA was accepted")
	}
	if code := s.get(t, s.client(nil), "/readyz"); code != http.StatusOK {
		t.Fatalf("readyz without a client certificate: %d", code)
	}
}

// TestOnlyModernTLS: TLS 1.0/1.1 and TLS 1.2 suites without forward secrecy or AEAD are refused.
func TestOnlyModernTLS(t *testing.T) {
	s := startTLSServer(t, web.Options{})
	for _, tc := range []struct {
		name    string
		version uint16
		suites  []uint16
		ok      bool
	}{
		{name: "TLS 1.3", version: tls.VersionTLS13, ok: true},
		{name: "TLS 1.2 ECDHE-ECDSA-AES128-GCM", version: tls.VersionTLS12, suites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, ok: true},
		{name: "TLS 1.2 ECDHE-ECDSA-AES128-CBC", version: tls.VersionTLS12, suites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}},
		{name: "TLS 1.2 ECDHE-ECDSA-AES256-CBC", version: tls.VersionTLS12, suites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA}},
		{name: "TLS 1.1", version: tls.VersionTLS11},
		{name: "TLS 1.0", version: tls.VersionTLS10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := tls.Dial("tcp", s.addr, &tls.Config{RootCAs: s.pool, ServerName: "127.0.0.1", MinVersion: tc.version, MaxVersion: tc.version, CipherSuites: tc.suites}) //nolint:gosec // offering old versions is the point
			if err == nil {
				conn.Close()
			}
			if (err == nil) != tc.ok {
				t.Fatalf("handshake error %v, want success=%v", err, tc.ok)
			}
		})
	}
}

func testCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	ca, err := certs.IssueCA(certs.Request{})
	if err != nil {
		t.Fatal(err)
	}
	return ca.Cert, ca.Key.(*ecdsa.PrivateKey)
}

func clientCert(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
