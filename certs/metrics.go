package certs

import (
	"crypto/tls"
	"crypto/x509"

	"github.com/prometheus/client_golang/prometheus"
)

// ExpiryMetricName is the gauge NewExpiryCollector exports.
const ExpiryMetricName = "pvguard_serving_certificate_expiry_timestamp_seconds"

var expiryDesc = prometheus.NewDesc(ExpiryMetricName,
	"NotAfter of the serving certificate pvguard presents on its webhook port, in seconds since the Unix epoch.", nil, nil)

// NewExpiryCollector exports the NotAfter of the certificate get serves (the GetCertificate of a
// SecretSource or of a certificate directory's watcher), read at each scrape, so the value follows
// every reload of the Secret or of the mounted files. Nothing is exported while no certificate is
// loaded or it cannot be parsed: a missing series, not a zero that reads as long expired.
func NewExpiryCollector(get func(*tls.ClientHelloInfo) (*tls.Certificate, error)) prometheus.Collector {
	return expiryCollector{get: get}
}

type expiryCollector struct {
	get func(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

func (c expiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- expiryDesc }

func (c expiryCollector) Collect(ch chan<- prometheus.Metric) {
	cert, err := c.get(&tls.ClientHelloInfo{})
	if err != nil || cert == nil || len(cert.Certificate) == 0 {
		return
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return
		}
	}
	ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, float64(leaf.NotAfter.Unix()))
}
