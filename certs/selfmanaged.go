package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cert-manager/cert-manager/pkg/util/pki"
	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys of the self-managed Secret (type kubernetes.io/tls). tls.crt, tls.key and ca.crt keep
// their usual meaning, so the Secret can also be mounted and served with --cert-dir; ca.crt is
// the trust bundle (every CA the webhook configurations must trust right now).
const (
	SignerCertKey = "ca-signer.crt"
	SignerKeyKey  = "ca-signer.key"
	NextCertKey   = "ca-next.crt"
	NextKeyKey    = "ca-next.key"
	// NextSinceAnnotation records when the next CA entered the trust bundle; it signs serving
	// certificates only once the bundle has had Overlap to reach the apiserver.
	NextSinceAnnotation = "pvguard.io/ca-next-since"
)

// SelfManaged describes the certificates pvguard issues and rotates for itself.
type SelfManaged struct {
	// Namespace and SecretName locate the Secret that holds them.
	Namespace, SecretName string
	// WebhookConfigurationName names the Validating and the Mutating configuration whose
	// caBundle is kept equal to the trust bundle.
	WebhookConfigurationName string
	// DNSNames and IPs the serving certificate is valid for.
	DNSNames []string
	IPs      []net.IP
	// Validity of serving certificates and of CAs (defaults one and ten years). Each is renewed
	// once less than a third of its life is left.
	Validity, CAValidity time.Duration
	// Overlap is how long a new CA is trusted before it signs the serving certificate (default
	// ten minutes): time for the caBundle to reach the apiserver.
	Overlap time.Duration
	Now     func() time.Time
}

func (s *SelfManaged) defaults() {
	if s.Validity == 0 {
		s.Validity = 365 * 24 * time.Hour
	}
	if s.CAValidity == 0 {
		s.CAValidity = 10 * 365 * 24 * time.Hour
	}
	if s.Overlap == 0 {
		s.Overlap = 10 * time.Minute
	}
	if s.Now == nil {
		s.Now = time.Now
	}
}

// Plan decides the next content of the Secret from its current data and annotations. It
// returns changed=false when nothing needs writing, and says why otherwise. It is pure: the
// rotation steps are
//
//  1. no usable signing CA: issue a CA and a serving certificate;
//  2. the signing CA is in its last third: issue the next CA and add it to the trust bundle;
//  3. the next CA has been trusted for Overlap: it becomes the signer and signs a new serving
//     certificate; the old CA stays trusted until it expires, for replicas still serving the
//     old certificate;
//  4. the serving certificate is in its last third, not signed by the signer, or for other
//     names: issue a new one.
func (s SelfManaged) Plan(data map[string][]byte, annotations map[string]string) (map[string][]byte, map[string]string, string, error) {
	s.defaults()
	p := newSecretPlan(s, data, annotations)
	signer, err := p.ensureSigner()
	if err != nil {
		return nil, nil, "", err
	}
	if signer, err = p.advanceNextCA(signer); err != nil {
		return nil, nil, "", err
	}
	if err := p.ensureServing(signer); err != nil {
		return nil, nil, "", err
	}
	if err := p.buildTrustBundle(signer); err != nil {
		return nil, nil, "", err
	}
	if len(p.reasons) == 0 {
		return data, annotations, "", nil
	}
	return p.out, p.ann, fmt.Sprint(p.reasons), nil
}

// secretPlan is the Secret content Plan builds: copies of the data and annotations it changes,
// and why it changed them.
type secretPlan struct {
	s       SelfManaged
	now     time.Time
	req     Request
	data    map[string][]byte // as read, never changed
	out     map[string][]byte
	ann     map[string]string
	reasons []string
}

// newSecretPlan starts a plan from copies of the Secret's data and annotations.
func newSecretPlan(s SelfManaged, data map[string][]byte, annotations map[string]string) *secretPlan {
	p := &secretPlan{
		s:    s,
		now:  s.Now(),
		req:  Request{DNSNames: s.DNSNames, IPs: s.IPs, Validity: s.Validity, CAValidity: s.CAValidity, Now: s.Now},
		data: data,
		out:  map[string][]byte{},
		ann:  map[string]string{},
	}
	for k, v := range data {
		p.out[k] = v
	}
	for k, v := range annotations {
		p.ann[k] = v
	}
	return p
}

// put stores a key pair under the given certificate and key keys.
func (p *secretPlan) put(certKey, keyKey string, kp *KeyPair) {
	p.out[certKey], p.out[keyKey] = kp.CertPEM, kp.KeyPEM
}

// dropNext removes the next CA and the time it entered the trust bundle.
func (p *secretPlan) dropNext() {
	delete(p.out, NextCertKey)
	delete(p.out, NextKeyKey)
	delete(p.ann, NextSinceAnnotation)
}

// ensureSigner returns the signing CA, issuing a new one (and starting the rotation over) when
// there is no usable one (step 1).
func (p *secretPlan) ensureSigner() (*KeyPair, error) {
	signer, err := ParseKeyPair(p.data[SignerCertKey], p.data[SignerKeyKey])
	if err == nil && p.now.Before(signer.Cert.NotAfter) {
		return signer, nil
	}
	if signer, err = IssueCA(p.req); err != nil {
		return nil, err
	}
	p.put(SignerCertKey, SignerKeyKey, signer)
	p.dropNext()
	p.out[CAFile] = nil
	p.reasons = append(p.reasons, "issued a CA")
	return signer, nil
}

// advanceNextCA publishes the next CA when the signer is in its last third (step 2), or makes
// it the signer once it has been trusted for Overlap (step 3); it returns the signer.
func (p *secretPlan) advanceNextCA(signer *KeyPair) (*KeyPair, error) {
	next, nextErr := ParseKeyPair(p.out[NextCertKey], p.out[NextKeyKey])
	since, sinceErr := time.Parse(time.RFC3339, p.ann[NextSinceAnnotation])
	switch {
	case nextErr == nil && sinceErr == nil && p.now.Sub(since) >= p.s.Overlap:
		signer = next
		p.put(SignerCertKey, SignerKeyKey, signer)
		p.dropNext()
		p.reasons = append(p.reasons, "switched to the next CA")
	case nextErr == nil && sinceErr == nil:
		// waiting for the overlap to pass
	case remaining(signer.Cert, p.now) < p.s.CAValidity/3:
		var err error
		if next, err = IssueCA(p.req); err != nil {
			return nil, err
		}
		p.put(NextCertKey, NextKeyKey, next)
		p.ann[NextSinceAnnotation] = p.now.UTC().Format(time.RFC3339)
		p.reasons = append(p.reasons, "published the next CA")
	default:
		p.dropNext()
	}
	return signer, nil
}

// ensureServing issues a serving certificate from signer when the current one is unusable, due
// for renewal, signed by another CA or for other names (step 4).
func (p *secretPlan) ensureServing(signer *KeyPair) error {
	serving, err := ParseKeyPair(p.out[CertFile], p.out[KeyFile])
	why := p.s.servingProblem(serving, err, signer, p.now)
	if why == "" {
		return nil
	}
	if serving, err = IssueServing(signer, p.req); err != nil {
		return err
	}
	p.out[CertFile], p.out[KeyFile] = serving.CertPEM, serving.KeyPEM
	p.reasons = append(p.reasons, "issued a serving certificate ("+why+")")
	return nil
}

// buildTrustBundle writes the trust bundle: the signer, the next CA, and older CAs still valid.
func (p *secretPlan) buildTrustBundle(signer *KeyPair) error {
	trusted := []*x509.Certificate{signer.Cert}
	if n, err := ParseKeyPair(p.out[NextCertKey], p.out[NextKeyKey]); err == nil {
		trusted = append(trusted, n.Cert)
	}
	for _, c := range decodeAll(p.data[CAFile]) {
		if p.now.Before(c.NotAfter) && !slices.ContainsFunc(trusted, c.Equal) {
			trusted = append(trusted, c)
		}
	}
	var bundle bytes.Buffer
	for _, c := range trusted {
		pem, err := pki.EncodeX509(c)
		if err != nil {
			return fmt.Errorf("encoding the trust bundle: %w", err)
		}
		bundle.Write(pem)
	}
	p.out[CAFile] = bundle.Bytes()
	if !bytes.Equal(p.out[CAFile], p.data[CAFile]) && len(p.reasons) == 0 {
		p.reasons = append(p.reasons, "dropped expired CAs from the trust bundle")
	}
	return nil
}

func (s *SelfManaged) servingProblem(kp *KeyPair, parseErr error, signer *KeyPair, now time.Time) string {
	switch {
	case parseErr != nil:
		return "none usable"
	case kp.Cert.CheckSignatureFrom(signer.Cert) != nil:
		return "not signed by the current CA"
	case remaining(kp.Cert, now) < s.Validity/3:
		// Measured against the configured validity, not the certificate's span (which starts a
		// minute early for clock skew), so a short validity does not renew on every check.
		return "renewal due"
	case !slices.Equal(kp.Cert.DNSNames, s.DNSNames) || !slices.EqualFunc(kp.Cert.IPAddresses, s.IPs, net.IP.Equal):
		return "names changed"
	}
	return ""
}

func remaining(c *x509.Certificate, now time.Time) time.Duration { return c.NotAfter.Sub(now) }

func decodeAll(pemData []byte) []*x509.Certificate {
	certs, err := pki.DecodeX509CertificateSetBytes(pemData)
	if err != nil {
		return nil
	}
	return certs
}

// Rotator keeps the self-managed Secret current and the webhook configurations' caBundle equal
// to its trust bundle. It runs on the elected replica only; every replica serves from the
// Secret through a SecretSource.
type Rotator struct {
	SelfManaged
	// Client writes the Secret and the webhook configurations; Reader reads them live.
	Client client.Client
	Reader client.Reader
	// Interval between checks (default one minute); Trigger asks for one sooner.
	Interval time.Duration
	Log      logr.Logger

	wake chan struct{}
}

// NewRotator returns a Rotator; Start runs it.
func NewRotator(s SelfManaged, c client.Client, r client.Reader, interval time.Duration, log logr.Logger) *Rotator {
	s.defaults()
	if interval <= 0 {
		interval = time.Minute
	}
	return &Rotator{SelfManaged: s, Client: c, Reader: r, Interval: interval, Log: log, wake: make(chan struct{}, 1)}
}

// NeedLeaderElection makes one replica issue and rotate, so two never race to replace the CA.
func (r *Rotator) NeedLeaderElection() bool { return true }

// Trigger asks for a check soon.
func (r *Rotator) Trigger() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Start checks at once and then every Interval or when triggered, until ctx ends.
func (r *Rotator) Start(ctx context.Context) error {
	tick := time.NewTicker(r.Interval)
	defer tick.Stop()
	for {
		if err := r.Reconcile(ctx); err != nil && ctx.Err() == nil {
			r.Log.Error(err, "keeping the serving certificate current")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-r.wake:
		}
	}
}

// Reconcile brings the Secret and the caBundles up to date.
func (r *Rotator) Reconcile(ctx context.Context) error {
	key := client.ObjectKey{Namespace: r.Namespace, Name: r.SecretName}
	secret := &corev1.Secret{}
	err := r.Reader.Get(ctx, key, secret)
	switch {
	case apierrors.IsNotFound(err):
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: r.SecretName,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "pvguard"}}, Type: corev1.SecretTypeTLS}
	case err != nil:
		return fmt.Errorf("reading Secret %s: %w", key, err)
	}
	data, ann, why, err := r.Plan(secret.Data, secret.Annotations)
	if err != nil {
		return fmt.Errorf("planning Secret %s: %w", key, err)
	}
	if why != "" {
		secret.Data, secret.Annotations = data, ann
		if secret.ResourceVersion == "" {
			err = r.Client.Create(ctx, secret)
		} else {
			err = r.Client.Update(ctx, secret)
		}
		if err != nil {
			return fmt.Errorf("writing Secret %s (%s): %w", key, why, err)
		}
		r.Log.Info("serving certificate updated", "secret", key.String(), "why", why)
	}
	return r.injectCABundle(ctx, secret.Data[CAFile])
}

// injectCABundle sets the caBundle of every webhook in pvguard's two configurations. A
// configuration that does not exist yet is skipped (the next check sees it); one reset by a
// chart upgrade is repaired.
func (r *Rotator) injectCABundle(ctx context.Context, bundle []byte) error {
	if r.WebhookConfigurationName == "" {
		return nil
	}
	var errs []error
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: r.WebhookConfigurationName}, v); err == nil {
		changed := false
		for i := range v.Webhooks {
			if !bytes.Equal(v.Webhooks[i].ClientConfig.CABundle, bundle) {
				v.Webhooks[i].ClientConfig.CABundle, changed = bundle, true
			}
		}
		if changed {
			errs = append(errs, r.Client.Update(ctx, v))
		}
	} else if !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: r.WebhookConfigurationName}, m); err == nil {
		changed := false
		for i := range m.Webhooks {
			if !bytes.Equal(m.Webhooks[i].ClientConfig.CABundle, bundle) {
				m.Webhooks[i].ClientConfig.CABundle, changed = bundle, true
			}
		}
		if changed {
			errs = append(errs, r.Client.Update(ctx, m))
		}
	} else if !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("setting the caBundle of webhook configurations %s: %w", r.WebhookConfigurationName, err)
	}
	return nil
}

// SecretSource serves the certificate of the self-managed Secret on every replica, swapping it
// in as the Secret changes.
type SecretSource struct {
	cert atomic.Pointer[tls.Certificate]
}

// Load takes the serving certificate from the Secret's tls.crt and tls.key.
func (s *SecretSource) Load(secret *corev1.Secret) error {
	c, err := tls.X509KeyPair(secret.Data[CertFile], secret.Data[KeyFile])
	if err != nil {
		return fmt.Errorf("loading the serving certificate from Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	s.cert.Store(&c)
	return nil
}

// GetCertificate implements tls.Config.GetCertificate.
func (s *SecretSource) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.cert.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("no serving certificate loaded yet")
}

// Ready reports whether a certificate has been loaded.
func (s *SecretSource) Ready() error {
	if s.cert.Load() == nil {
		return errors.New("no serving certificate loaded yet")
	}
	return nil
}
