package certs_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/certs"
)

// TestExpiryCollectorFollowsTheServedCertificate checks that the expiry gauge is absent until a
// certificate is loaded, then is the served certificate's NotAfter, and follows a reload.
func TestExpiryCollectorFollowsTheServedCertificate(t *testing.T) {
	source := &certs.SecretSource{}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(certs.NewExpiryCollector(source.GetCertificate))
	if n, err := testutil.GatherAndCount(reg, certs.ExpiryMetricName); err != nil || n != 0 {
		t.Fatalf("before any certificate: %d series (err %v), want none", n, err)
	}
	now := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, validity := range []time.Duration{90 * 24 * time.Hour, 9 * time.Hour} {
		b, err := certs.Issue(certs.Request{DNSNames: []string{"pvguard.pvguard-system.svc"}, Validity: validity,
			Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		secret := &corev1.Secret{Data: map[string][]byte{certs.CertFile: b.Serving.CertPEM, certs.KeyFile: b.Serving.KeyPEM}}
		if err := source.Load(secret); err != nil {
			t.Fatal(err)
		}
		want := b.Serving.Cert.NotAfter.Unix()
		if want <= now.Unix() {
			t.Fatalf("issued certificate's NotAfter %v is not after %v", b.Serving.Cert.NotAfter, now)
		}
		exposition := "# HELP " + certs.ExpiryMetricName + " NotAfter of the serving certificate pvguard presents on its webhook port, in seconds since the Unix epoch.\n" +
			"# TYPE " + certs.ExpiryMetricName + " gauge\n" +
			certs.ExpiryMetricName + " " + strconv.FormatInt(want, 10) + "\n"
		if err := testutil.GatherAndCompare(reg, strings.NewReader(exposition), certs.ExpiryMetricName); err != nil {
			t.Errorf("validity %v: %v", validity, err)
		}
	}
}
