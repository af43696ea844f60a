package certs

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/cert-manager/cert-manager/pkg/util/pki"
)

// File names in a certificate directory, matching a kubernetes.io/tls Secret.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
	CAFile   = "ca.crt"
)

// KeyPair is a certificate with its private key, parsed and PEM-encoded.
type KeyPair struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
}

// Request describes a serving certificate.
type Request struct {
	// DNSNames and IPs are the names the certificate is valid for; at least one is required.
	DNSNames []string
	IPs      []net.IP
	// Validity defaults to one year for the serving certificate and ten for the CA.
	Validity, CAValidity time.Duration
	// Now is the issue time; defaults to time.Now. Tests pass a fixed clock.
	Now func() time.Time
}

// Bundle is a CA and a serving certificate it signed.
type Bundle struct {
	CA      *KeyPair
	Serving *KeyPair
}

// Issue creates a new CA and a serving certificate for the request.
func Issue(req Request) (*Bundle, error) {
	req.defaults()
	ca, err := IssueCA(req)
	if err != nil {
		return nil, err
	}
	serving, err := IssueServing(ca, req)
	if err != nil {
		return nil, err
	}
	return &Bundle{CA: ca, Serving: serving}, nil
}

func (req *Request) defaults() {
	if req.Now == nil {
		req.Now = time.Now
	}
	if req.Validity == 0 {
		req.Validity = 365 * 24 * time.Hour
	}
	if req.CAValidity == 0 {
		req.CAValidity = 10 * 365 * 24 * time.Hour
	}
}

// IssueCA creates a self-signed CA valid for req.CAValidity.
func IssueCA(req Request) (*KeyPair, error) {
	req.defaults()
	now := req.Now()
	ca, err := sign(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "pvguard-ca", SerialNumber: fmt.Sprint(now.UnixNano())},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(req.CAValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("issuing the CA: %w", err)
	}
	return ca, nil
}

// IssueServing creates a serving certificate for the request, signed by ca. It never outlives
// the CA.
func IssueServing(ca *KeyPair, req Request) (*KeyPair, error) {
	if len(req.DNSNames) == 0 && len(req.IPs) == 0 {
		return nil, errors.New("issuing a serving certificate: no DNS names or IP addresses")
	}
	req.defaults()
	now := req.Now()
	cn := "pvguard"
	if len(req.DNSNames) > 0 {
		cn = req.DNSNames[0]
	}
	notAfter := now.Add(req.Validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	serving, err := sign(&x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		DNSNames:              req.DNSNames,
		IPAddresses:           req.IPs,
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              notAfter,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca)
	if err != nil {
		return nil, fmt.Errorf("issuing the serving certificate for %v: %w", req.DNSNames, err)
	}
	return serving, nil
}

// ParseKeyPair decodes a PEM certificate and its PEM private key, checking that they belong
// together.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	cert, err := pki.DecodeX509CertificateBytes(certPEM)
	if err != nil {
		return nil, fmt.Errorf("decoding certificate: %w", err)
	}
	key, err := pki.DecodePrivateKeyBytes(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("decoding private key: %w", err)
	}
	if ok, err := pki.PublicKeyMatchesCertificate(key.Public(), cert); err != nil || !ok {
		return nil, fmt.Errorf("private key does not match certificate %s", cert.Subject.CommonName)
	}
	return &KeyPair{Cert: cert, Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// sign creates a key and signs the template with the issuer, or self-signs without one.
func sign(tmpl *x509.Certificate, issuer *KeyPair) (*KeyPair, error) {
	key, err := pki.GenerateECPrivateKey(pki.ECCurve256)
	if err != nil {
		return nil, fmt.Errorf("generating key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generating serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	tmpl.PublicKey = key.Public()
	parent, signer := tmpl, crypto.Signer(key)
	if issuer != nil {
		parent, signer = issuer.Cert, issuer.Key
	}
	certPEM, cert, err := pki.SignCertificate(tmpl, parent, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	keyPEM, err := pki.EncodePrivateKey(key, cmapi.PKCS8)
	if err != nil {
		return nil, fmt.Errorf("encoding key: %w", err)
	}
	return &KeyPair{Cert: cert, Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// WriteDir writes tls.crt, tls.key and ca.crt into dir, creating it. Each file is written to a
// temporary name and renamed, so a watcher never reads half a certificate.
func (b *Bundle) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating certificate directory %s: %w", dir, err)
	}
	for name, data := range map[string][]byte{CAFile: b.CA.CertPEM, KeyFile: b.Serving.KeyPEM, CertFile: b.Serving.CertPEM} {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", tmp, err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("installing %s: %w", name, err)
		}
	}
	return nil
}
