package harness

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// MetricSum reads baseURL/metrics and sums the counter or gauge name over the series whose
// labels include every pair in match (all series when match is empty). A metric not exposed
// yet sums to 0.
func MetricSum(hc *http.Client, baseURL, name string, match map[string]string) (float64, error) {
	resp, err := hc.Get(baseURL + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("reading metrics of %s: %w", baseURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("reading metrics of %s: HTTP %d", baseURL, resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("parsing metrics of %s: %w", baseURL, err)
	}
	var sum float64
	for _, m := range families[name].GetMetric() {
		found := 0
		for _, l := range m.GetLabel() {
			if v, ok := match[l.GetName()]; ok && v == l.GetValue() {
				found++
			}
		}
		if found == len(match) {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return sum, nil
}

// HTTPSClient is a client that trusts the harness's serving certificate (CertDir), for
// requests to the instances it serves.
func (h *Harness) HTTPSClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(h.CAPEM)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}
