package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pvguard/pvguard/certs"
)

func TestIssueVerifiesForNamesAndServesTLS(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b, err := certs.Issue(certs.Request{
		DNSNames: []string{"pvguard.pvguard-system.svc", "localhost"},
		IPs:      []net.IP{net.ParseIP("127.0.0.1")},
		Now:      func() time.Time { return now },
		Validity: 24 * time.Hour,
	})
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(b.CA.Cert)
	for _, tc := range []struct {
		name    string
		dns     string
		at      time.Time
		wantErr bool
	}{
		{name: "service name", dns: "pvguard.pvguard-system.svc", at: now},
		{name: "localhost", dns: "localhost", at: now},
		{name: "ip", dns: "127.0.0.1", at: now},
		{name: "other name", dns: "evil.example.com", at: now, wantErr: true},
		{name: "expired", dns: "localhost", at: now.Add(25 * time.Hour), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.Serving.Cert.Verify(x509.VerifyOptions{
				DNSName: tc.dns, Roots: pool, CurrentTime: tc.at,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if (err != nil) != tc.wantErr {
				t.Fatalf("Verify(%s) error = %v, wantErr %v", tc.dns, err, tc.wantErr)
			}
		})
	}
	if !b.CA.Cert.IsCA || b.Serving.Cert.IsCA {
		t.Fatalf("IsCA: ca=%v serving=%v", b.CA.Cert.IsCA, b.Serving.Cert.IsCA)
	}

	dir := filepath.Join(t.TempDir(), "certs")
	if err := b.WriteDir(dir); err != nil {
		t.Fatalf("WriteDir: %v", err)
	}
	if _, err := tls.LoadX509KeyPair(filepath.Join(dir, certs.CertFile), filepath.Join(dir, certs.KeyFile)); err != nil {
		t.Fatalf("written pair does not load: %v", err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, certs.CAFile))
	if err != nil || !x509.NewCertPool().AppendCertsFromPEM(ca) {
		t.Fatalf("written CA does not parse: %v", err)
	}
}

func TestIssueNeedsAName(t *testing.T) {
	if _, err := certs.Issue(certs.Request{}); err == nil {
		t.Fatal("Issue with no names succeeded")
	}
}
