package certs_test

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/cert-manager/cert-manager/pkg/util/pki"

	"github.com/pvguard/pvguard/certs"
)

// state is the Secret between rotation steps.
type state struct {
	data map[string][]byte
	ann  map[string]string
}

func trusted(t *testing.T, s state) *x509.CertPool {
	t.Helper()
	set, err := pki.DecodeX509CertificateSetBytes(s.data[certs.CAFile])
	if err != nil {
		t.Fatalf("trust bundle: %v", err)
	}
	pool := x509.NewCertPool()
	for _, c := range set {
		pool.AddCert(c)
	}
	return pool
}

func verifies(t *testing.T, s state, pool *x509.CertPool, at time.Time) error {
	t.Helper()
	kp, err := certs.ParseKeyPair(s.data[certs.CertFile], s.data[certs.KeyFile])
	if err != nil {
		t.Fatalf("serving pair: %v", err)
	}
	_, err = kp.Cert.Verify(x509.VerifyOptions{DNSName: "pvguard.pvguard-system.svc", Roots: pool, CurrentTime: at,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

// TestRotationKeepsTrustAcrossEveryStep runs the elected replica's checks every half hour over
// more than two CA lifetimes and checks at each write that the serving certificate is trusted by
// the bundle the apiserver holds, before and after the write: the apiserver may still have the
// old bundle while a replica already serves the new certificate, and the other way round.
func TestRotationKeepsTrustAcrossEveryStep(t *testing.T) {
	start := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	now := start
	sm := certs.SelfManaged{
		DNSNames: []string{"pvguard.pvguard-system.svc"}, Validity: 9 * time.Hour, CAValidity: 30 * time.Hour,
		Overlap: time.Hour, Now: func() time.Time { return now },
	}
	s := state{}
	seen := map[string]int{}
	var published time.Time
	for ; now.Before(start.Add(70 * time.Hour)); now = now.Add(30 * time.Minute) {
		data, ann, why, err := sm.Plan(s.data, s.ann)
		if err != nil {
			t.Fatalf("at %s: %v", now, err)
		}
		next := state{data, ann}
		if err := verifies(t, next, trusted(t, next), now); err != nil {
			t.Fatalf("at %s (%s): serving certificate not trusted by its own bundle: %v", now, why, err)
		}
		if why != "" && s.data != nil {
			if err := verifies(t, next, trusted(t, s), now); err != nil {
				t.Errorf("at %s (%s): the new certificate is not trusted by the old bundle: %v", now, why, err)
			}
			if err := verifies(t, s, trusted(t, next), now); err != nil && !strings.Contains(err.Error(), "expired") {
				t.Errorf("at %s (%s): the old certificate is not trusted by the new bundle: %v", now, why, err)
			}
		}
		for _, step := range []string{"issued a CA", "renewal due", "published the next CA", "switched to the next CA"} {
			if strings.Contains(why, step) {
				seen[step]++
			}
		}
		if strings.Contains(why, "published the next CA") {
			published = now
		}
		if strings.Contains(why, "switched") && now.Sub(published) < sm.Overlap {
			t.Errorf("at %s: switched %s after publishing the CA, before the overlap of %s", now, now.Sub(published), sm.Overlap)
		}
		if n := len(mustSet(t, data[certs.CAFile])); n > 2 {
			t.Errorf("at %s: %d CAs trusted", now, n)
		}
		s = next
	}
	if seen["issued a CA"] != 1 || seen["renewal due"] == 0 || seen["published the next CA"] < 2 || seen["switched to the next CA"] < 2 {
		t.Fatalf("rotation steps over 70h: %v", seen)
	}
	if _, _, why, _ := sm.Plan(s.data, s.ann); why != "" && !strings.Contains(why, "renewal due") {
		t.Fatalf("a fresh check right after wants to write: %s", why)
	}
	sm.DNSNames = append(sm.DNSNames, "pvguard.pvguard-system.svc.cluster.local")
	if _, _, why, _ := sm.Plan(s.data, s.ann); !strings.Contains(why, "names changed") {
		t.Fatalf("new DNS names: %q", why)
	}
}

func mustSet(t *testing.T, pemData []byte) []*x509.Certificate {
	t.Helper()
	set, err := pki.DecodeX509CertificateSetBytes(pemData)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestPlanRepairsBadSecrets: garbage or a key that does not match gives a fresh CA and
// certificate, never an error that would leave pvguard without one.
func TestPlanRepairsBadSecrets(t *testing.T) {
	b, err := certs.Issue(certs.Request{DNSNames: []string{"pvguard.pvguard-system.svc"}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := certs.Issue(certs.Request{DNSNames: []string{"pvguard.pvguard-system.svc"}})
	if err != nil {
		t.Fatal(err)
	}
	sm := certs.SelfManaged{DNSNames: []string{"pvguard.pvguard-system.svc"}}
	for _, tc := range []struct {
		name string
		data map[string][]byte
		want string
	}{
		{name: "garbage", data: map[string][]byte{certs.SignerCertKey: []byte("junk"), certs.CertFile: []byte("junk")}, want: "issued a CA"},
		{name: "mismatched key", data: map[string][]byte{certs.SignerCertKey: b.CA.CertPEM, certs.SignerKeyKey: other.CA.KeyPEM}, want: "issued a CA"},
		{name: "serving cert from another CA", data: map[string][]byte{certs.SignerCertKey: b.CA.CertPEM, certs.SignerKeyKey: b.CA.KeyPEM,
			certs.CertFile: other.Serving.CertPEM, certs.KeyFile: other.Serving.KeyPEM}, want: "not signed by the current CA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, _, why, err := sm.Plan(tc.data, nil)
			if err != nil || !strings.Contains(why, tc.want) {
				t.Fatalf("Plan: %q, %v; want %q", why, err, tc.want)
			}
			if err := verifies(t, state{data: data}, trusted(t, state{data: data}), time.Now()); err != nil {
				t.Fatalf("repaired Secret does not verify: %v", err)
			}
		})
	}
}
