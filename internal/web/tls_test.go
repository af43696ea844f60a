package web_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	"github.com/pvguard/pvguard/certs"
	"github.com/pvguard/pvguard/internal/web"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
	"github.com/pvguard/pvguard/webhook"
)

// TestServingCertificateHotReloads replaces the files in the certificate directory, as a
// cert-manager Secret update does, and checks new connections get the new certificate without a
// restart; it also checks TLS 1.1 is refused.
func TestServingCertificateHotReloads(t *testing.T) {
	dir := t.TempDir()
	issue := func() *certs.Bundle {
		t.Helper()
		b, err := certs.Issue(certs.Request{DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.WriteDir(dir); err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := issue()
	w, err := certwatcher.New(filepath.Join(dir, certs.CertFile), filepath.Join(dir, certs.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	w = w.WithWatchInterval(100 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Start(ctx) }()
	srv := web.NewServer(web.Options{
		Listen:         "127.0.0.1:0",
		GetCertificate: w.GetCertificate,
		Engines:        webhook.StaticEngine{E: policy.NewEngine(nil)},
		Views:          webhook.StaticView{V: testobj.NewView()},
	})
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	addr := srv.Addr().String()

	served := func(tlsVersion uint16) (*x509.Certificate, error) {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tlsVersion, MaxVersion: tlsVersion}) //nolint:gosec // the test inspects the served certificate itself
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0], nil
	}
	got, err := served(tls.VersionTLS12)
	if err != nil || got.SerialNumber.Cmp(first.Serving.Cert.SerialNumber) != 0 {
		t.Fatalf("first certificate not served: %v", err)
	}
	if _, err := served(tls.VersionTLS11); err == nil {
		t.Fatal("TLS 1.1 handshake succeeded")
	}

	second := issue()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := served(tls.VersionTLS13)
		if err == nil && got.SerialNumber.Cmp(second.Serving.Cert.SerialNumber) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rotated certificate never served (last err %v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start: %v", err)
	}
}
