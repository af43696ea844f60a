package e2ecallers

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/certs"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
	"github.com/pvguard/pvguard/webhook"
)

// TestWebhookPortTakesReviewsOnlyFromTheAPIServer runs the client-certificate mode end to end:
// the kube-apiserver is started with an AdmissionConfiguration whose webhook kubeconfig gives it
// a client certificate for pvguard's host (the user named "127.0.0.1:<port>", as a cluster names
// "<service>.<namespace>.svc"), and pvguard is given that certificate's CA (--client-ca-file, the
// chart's tls.clientCA). Then:
//
//   - the apiserver's calls are judged: a person's volume whose claimRef is not a claim is
//     refused with the rule's message;
//   - a caller on the network without a client certificate is refused with 401 before any rule
//     runs (pvguard's review counter does not move), and so is one whose certificate another CA
//     signed;
//   - the same review with the apiserver's certificate is answered: what is refused is the
//     caller, not the review;
//   - probes need no certificate (the kubelet presents none).
func TestWebhookPortTakesReviewsOnlyFromTheAPIServer(t *testing.T) {
	dir := t.TempDir()
	// The apiserver's identity toward webhooks: a CA of its own (in a kubeadm cluster, e.g. the
	// front-proxy CA, which signs nothing but the apiserver's certificates) and a client
	// certificate it signed.
	clientCA, err := certs.IssueCA(certs.Request{})
	if err != nil {
		t.Fatal(err)
	}
	apiserverCert, apiserverKey := clientCertificate(t, clientCA, "kube-apiserver-webhook-client")
	clientCAFile := filepath.Join(dir, "client-ca.crt")
	harness.Must(t, os.WriteFile(clientCAFile, clientCA.CertPEM, 0o600), "writing the client CA")

	// pvguard's address is named in the apiserver's kubeconfig, so it is chosen first.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hostPort := ln.Addr().String()
	_ = ln.Close()
	admissionConfig := writeAdmissionConfig(t, dir, hostPort, apiserverCert, apiserverKey)

	h, err := harness.StartWith("", devcluster.Options{LogDir: dir, APIServerFlags: map[string]string{"admission-control-config-file": admissionConfig}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop() })
	inst, err := h.Serve(func(o *cli.ServeFlags) { o.Listen, o.Certs.ClientCAFile = hostPort, clientCAFile })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inst.Stop() })
	// InstallWebhooks waits until the apiserver's probe is refused by pvguard: the apiserver
	// presented its certificate and a rule judged the write.
	harness.Must(t, h.InstallWebhooks(inst), "installing the webhooks")

	ctx := context.Background()
	person, err := devcluster.NewClient(h.Config, nil, "pat@example.com", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	misbound := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "misbound"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}},
			ClaimRef:               &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "team-a", Name: "web"},
		},
	}
	err = person.Create(ctx, misbound, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), `.pvguard.io" denied the request`) || !strings.Contains(err.Error(), "[PVG") {
		t.Fatalf("a volume whose claimRef is a Pod, through the apiserver: %v, want pvguard's rule to refuse it", err)
	}
	t.Logf("through the apiserver, with its client certificate: %v", err)

	// Direct callers of the port.
	review := testobj.Review(t, testobj.PVKind, "persistentvolumes", admissionv1.Create, testobj.PV("pv-direct"), nil, "mallory")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(h.CAPEM)
	caller := func(cert *tls.Certificate) *http.Client {
		c := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if cert != nil {
			c.Certificates = []tls.Certificate{*cert}
		}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: c}}
	}
	post := func(hc *http.Client) (int, string, error) {
		resp, err := hc.Post(inst.BaseURL+webhook.PathValidatePV, "application/json", bytes.NewReader(review))
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	reviews := func() float64 {
		t.Helper()
		n, err := harness.MetricSum(caller(nil), inst.BaseURL, "pvguard_admission_reviews_total", nil)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	before := reviews()
	if code, body, err := post(caller(nil)); err != nil || code != http.StatusUnauthorized {
		t.Errorf("a review without a client certificate: HTTP %d %q (%v), want 401", code, body, err)
	} else {
		t.Logf("without a client certificate: HTTP %d %s", code, strings.TrimSpace(body))
	}
	otherCA, err := certs.IssueCA(certs.Request{})
	if err != nil {
		t.Fatal(err)
	}
	strangerCert, strangerKey := clientCertificate(t, otherCA, "kube-apiserver-webhook-client")
	stranger, err := tls.X509KeyPair(strangerCert, strangerKey)
	if err != nil {
		t.Fatal(err)
	}
	// Go's client withholds a certificate the server's list of CAs does not name, so the
	// stranger arrives without one: refused either at the handshake or with 401.
	if code, body, err := post(caller(&stranger)); err == nil && code != http.StatusUnauthorized {
		t.Errorf("a review with a certificate another CA signed: HTTP %d %q, want it refused", code, body)
	}
	if after := reviews(); after != before {
		t.Errorf("pvguard's review counter moved from %v to %v: a rule ran for a caller without the apiserver's certificate", before, after)
	}

	apiserver, err := tls.X509KeyPair(apiserverCert, apiserverKey)
	if err != nil {
		t.Fatal(err)
	}
	code, body, err := post(caller(&apiserver))
	if err != nil || code != http.StatusOK {
		t.Fatalf("the same review with the apiserver's certificate: HTTP %d %q (%v), want it answered", code, body, err)
	}
	answer := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal([]byte(body), answer); err != nil || answer.Response == nil {
		t.Fatalf("the answer to the apiserver's certificate is not an AdmissionReview: %v %q", err, body)
	}
	if after := reviews(); after != before+1 {
		t.Errorf("pvguard's review counter moved from %v to %v, want one review judged (the apiserver-certified one)", before, after)
	}

	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := caller(nil).Get(inst.BaseURL + path)
		if err != nil {
			t.Fatalf("%s without a client certificate: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s without a client certificate: HTTP %d, want 200 (the kubelet's probes present none)", path, resp.StatusCode)
		}
	}
}

// writeAdmissionConfig writes the kube-apiserver's AdmissionConfiguration: both webhook admission
// plugins read a kubeconfig whose user named hostPort (the webhook's host as the apiserver
// looks it up; for a Service, "<name>.<namespace>.svc") holds the client certificate.
func writeAdmissionConfig(t *testing.T, dir, hostPort string, certPEM, keyPEM []byte) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.AuthInfos[hostPort] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	kubeconfig := filepath.Join(dir, "webhook-client.kubeconfig")
	harness.Must(t, clientcmd.WriteToFile(*kc, kubeconfig), "writing the webhook kubeconfig")
	config := fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: ValidatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: %[1]s
  - name: MutatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: %[1]s
`, kubeconfig)
	path := filepath.Join(dir, "admission.yaml")
	harness.Must(t, os.WriteFile(path, []byte(config), 0o600), "writing the AdmissionConfiguration")
	return path
}

// clientCertificate issues a TLS client certificate for cn, signed by ca.
func clientCertificate(t *testing.T, ca *certs.KeyPair, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}
