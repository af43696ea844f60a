package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/pvguard/pvguard/certs"
)

// loadClientCAs reads --client-ca-file; nil when it is not set.
func loadClientCAs(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	pemData, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading --client-ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, fmt.Errorf("--client-ca-file %s: no PEM certificates", file)
	}
	return pool, nil
}

// servingCertificates sets up where the serving certificate comes from: a directory reloaded on
// change (--cert-dir, optionally filled by --self-signed), or the self-managed Secret, which the
// elected replica keeps current in pvguard's namespace and every replica serves from.
func servingCertificates(ctx context.Context, mgr manager.Manager, o CertOptions, namespace string, log logr.Logger) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), func() error, error) {
	if o.Secret == "" {
		certDir := o.Dir
		if o.SelfSigned {
			if certDir == "" {
				var err error
				if certDir, err = os.MkdirTemp("", "pvguard-certs-"); err != nil {
					return nil, nil, fmt.Errorf("creating certificate directory: %w", err)
				}
			}
			if err := issueSelfSigned(certDir, o.SelfSignedHosts); err != nil {
				return nil, nil, err
			}
			log.Info("issued a self-signed serving certificate", "dir", certDir, "ca", filepath.Join(certDir, certs.CAFile))
		}
		watcher, err := certwatcher.New(filepath.Join(certDir, certs.CertFile), filepath.Join(certDir, certs.KeyFile))
		if err != nil {
			return nil, nil, fmt.Errorf("loading serving certificate from %s: %w", certDir, err)
		}
		if err := mgr.Add(watcher); err != nil {
			return nil, nil, fmt.Errorf("adding certificate watcher: %w", err)
		}
		return watcher.GetCertificate, func() error { return nil }, nil
	}

	svc := o.ServiceName
	sm := certs.SelfManaged{
		Namespace: namespace, SecretName: o.Secret, WebhookConfigurationName: o.WebhookConfigurationName,
		DNSNames: []string{svc, svc + "." + namespace, svc + "." + namespace + ".svc", svc + "." + namespace + ".svc.cluster.local"},
		Validity: o.Validity, CAValidity: o.CAValidity, Overlap: o.CAOverlap,
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			sm.IPs = append(sm.IPs, ip)
		} else if h = strings.TrimSpace(h); h != "" {
			sm.DNSNames = append(sm.DNSNames, h)
		}
	}
	rotator := certs.NewRotator(sm, mgr.GetClient(), mgr.GetAPIReader(), o.CheckInterval, log.WithName("certs"))
	if err := mgr.Add(rotator); err != nil {
		return nil, nil, fmt.Errorf("adding certificate rotator: %w", err)
	}
	source := &certs.SecretSource{}
	load := func(obj any) {
		if secret, ok := obj.(*corev1.Secret); ok {
			if err := source.Load(secret); err != nil {
				log.Error(err, "keeping the previous serving certificate")
			}
		}
		rotator.Trigger()
	}
	inf, err := mgr.GetCache().GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return nil, nil, fmt.Errorf("watching Secret %s/%s: %w", namespace, o.Secret, err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    load,
		UpdateFunc: func(_, obj any) { load(obj) },
		DeleteFunc: func(any) { rotator.Trigger() },
	}); err != nil {
		return nil, nil, fmt.Errorf("watching Secret %s/%s: %w", namespace, o.Secret, err)
	}
	return source.GetCertificate, source.Ready, nil
}

func issueSelfSigned(dir string, hosts []string) error {
	req := certs.Request{}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			req.IPs = append(req.IPs, ip)
		} else if h = strings.TrimSpace(h); h != "" {
			req.DNSNames = append(req.DNSNames, h)
		}
	}
	b, err := certs.Issue(req)
	if err != nil {
		return err
	}
	return b.WriteDir(dir)
}
