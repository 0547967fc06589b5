// Package certs keeps the webhook's serving certificate: in Rotate mode it makes, renews and
// stores (in a Secret) its own CA and serving certificate and tells the configuration reconciler
// which CA bundle to inject; in Files mode it reads what cert-manager wrote.
package certs

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Mode says where the webhook's serving certificate comes from.
type Mode string

const (
	// Rotate: the webhook makes its own CA and serving certificate, keeps them in a Secret,
	// renews them before they expire, and writes the CA bundle into the webhook configuration.
	// The Secret is mounted at CertDir (or copied there with WriteFiles); the server reloads the
	// certificate when the files change.
	Rotate Mode = "rotate"
	// Files: something else (cert-manager) writes tls.crt, tls.key and, when it can, ca.crt
	// into CertDir. The CA bundle is taken from ca.crt when present; otherwise the configuration's
	// bundle is left to whoever injects it (cert-manager's CA injector).
	Files Mode = "files"
)

// Options configure the serving certificate.
type Options struct {
	Mode Mode
	// Dir holds tls.crt and tls.key (and ca.crt).
	Dir string
	// SecretNamespace and SecretName name the Secret Rotate keeps the certificates in; it is
	// created when missing.
	SecretNamespace, SecretName string
	// DNSNames are the names the certificate is valid for; the first is its subject.
	DNSNames []string
	// WriteFiles makes the webhook copy the Secret into Dir itself, as the kubelet does for a
	// mounted Secret: for webhooks running outside a pod (local clusters, development).
	WriteFiles bool
}

// Keys of the certificate Secret, and names of the files in the certificate directory (those of
// cert-manager's Secrets and of controller-runtime's webhook server).
const (
	CertFile     = "tls.crt"
	KeyFile      = "tls.key"
	CAFile       = "ca.crt"
	caKeyFile    = "ca.key"
	caBundleFile = "ca-bundle.crt"
)

// Lifetimes. The CA is renewed a year before it expires and the previous CA stays in the bundle
// while it is valid, so replicas still serving a certificate of the old CA stay trusted until the
// kubelet has updated their mounted Secret.
const (
	caValidity      = 10 * 365 * 24 * time.Hour
	caRenewBefore   = 365 * 24 * time.Hour
	certValidity    = 365 * 24 * time.Hour
	certRenewBefore = 90 * 24 * time.Hour
	rotateEvery     = time.Hour
)

// Rotator keeps a CA and a serving certificate in a Secret, with ECDSA P-256 keys.
//
// fairway does this itself rather than with open-policy-agent/cert-controller, which only makes
// RSA-2048 keys: the API server calls service webhooks over HTTP/1.1 and keeps 25 idle
// connections, so in a burst each call above that opens a TLS connection, and the server's RSA
// signature then costs 0.7 ms of CPU more per handshake than P-256 (measured with
// `make bench-webhook -no-keepalive`: 1.9 ms against 1.2 ms per request). One component, the
// configuration reconciler, also writes the whole webhook configuration, CA bundle included,
// instead of two writers racing on it.
type Rotator struct {
	client   client.Client // uncached: the Secret is read rarely and must be current
	key      types.NamespacedName
	dnsNames []string
	now      func() time.Time
	log      logr.Logger
}

// NewRotator returns a rotator of the Secret key for dnsNames (the first is the certificate's
// subject). c should read the API server directly: the Secret is read rarely and must be current.
func NewRotator(c client.Client, key types.NamespacedName, dnsNames []string, log logr.Logger) *Rotator {
	return &Rotator{client: c, key: key, dnsNames: dnsNames, now: time.Now, log: log}
}

// ensure makes the Secret hold a CA and a serving certificate valid for the DNS names, renewing
// what expires soon, and returns the Secret's data. Replicas racing to write it settle on the
// Secret's resource version (client-go's retry.RetryOnConflict).
func (r *Rotator) ensure(ctx context.Context) (map[string][]byte, error) {
	var out map[string][]byte
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		secret := &corev1.Secret{}
		err := r.client.Get(ctx, r.key, secret)
		if apierrors.IsNotFound(err) {
			secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.key.Namespace, Name: r.key.Name,
				Labels: map[string]string{"app.kubernetes.io/name": "fairway", "app.kubernetes.io/component": "webhook"}}}
			if err := r.client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating Secret %s: %w", r.key, err)
			}
			err = r.client.Get(ctx, r.key, secret)
		}
		if err != nil {
			return fmt.Errorf("reading Secret %s: %w", r.key, err)
		}
		data, changed, err := renewCertificates(secret.Data, r.dnsNames, r.now())
		if err != nil {
			return err
		}
		if !changed {
			out = data
			return nil
		}
		secret.Data = data
		if err := r.client.Update(ctx, secret); err != nil {
			return fmt.Errorf("writing Secret %s: %w", r.key, err) // a Conflict is retried
		}
		r.log.Info("Certificates renewed", "secret", r.key.String(), "dnsNames", r.dnsNames)
		out = data
		return nil
	})
	return out, err
}

// renewCertificates returns the Secret data with a CA and a serving certificate that are valid
// at now and well beyond, making new ones where needed, and whether it changed anything.
func renewCertificates(data map[string][]byte, dnsNames []string, now time.Time) (map[string][]byte, bool, error) {
	out := map[string][]byte{}
	for k, v := range data {
		out[k] = v
	}
	changed := false
	ca, caKey, err := parsePair(data[CAFile], data[caKeyFile])
	if err != nil || now.Add(caRenewBefore).After(ca.NotAfter) || now.Before(ca.NotBefore) {
		var caPEM, keyPEM []byte
		if ca, caKey, caPEM, keyPEM, err = newCertificate(nil, nil, "fairway-webhook-ca", nil, now, caValidity); err != nil {
			return nil, false, err
		}
		out[CAFile], out[caKeyFile] = caPEM, keyPEM
		delete(out, CertFile) // signed by the old CA
		changed = true
	}
	if !validServingCert(out[CertFile], out[KeyFile], ca, dnsNames, now) {
		_, _, certPEM, keyPEM, err := newCertificate(ca, caKey, dnsNames[0], dnsNames, now, certValidity)
		if err != nil {
			return nil, false, err
		}
		out[CertFile], out[KeyFile] = certPEM, keyPEM
		changed = true
	}
	// The bundle: the current CA, then every earlier CA still valid, so certificates the old CA
	// signed stay trusted while replicas switch over.
	bundle := slices.Clone(out[CAFile])
	for _, old := range [][]byte{data[caBundleFile], data[CAFile]} {
		for rest := old; ; {
			var block *pem.Block
			if block, rest = pem.Decode(rest); block == nil {
				break
			}
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil || c.Equal(ca) || !now.Before(c.NotAfter) || bytes.Contains(bundle, pem.EncodeToMemory(block)) {
				continue
			}
			bundle = append(bundle, pem.EncodeToMemory(block)...)
		}
	}
	if !bytes.Equal(bundle, data[caBundleFile]) {
		out[caBundleFile] = bundle
		changed = true
	}
	return out, changed, nil
}

// newCertificate makes a P-256 key and a certificate for it: a self-signed CA when parent is nil,
// else a serving certificate for dnsNames signed by parent. It starts an hour before now, for
// clocks slightly behind.
func newCertificate(parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, dnsNames []string, now time.Time, validity time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, []byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("generating a key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("generating a serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"fairway"}},
		DNSNames:     dnsNames,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	signer, signerKey := parent, parentKey
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = nil
		signer, signerKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("signing certificate %s: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// parsePair parses a PEM certificate and its EC private key.
func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, err
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, errors.New("not an ECDSA key")
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	return cert, key, err
}

// validServingCert reports whether the serving certificate matches its key, is signed by ca, is
// valid for every DNS name, and stays valid well beyond now.
func validServingCert(certPEM, keyPEM []byte, ca *x509.Certificate, dnsNames []string, now time.Time) bool {
	cert, _, err := parsePair(certPEM, keyPEM)
	if err != nil || ca == nil {
		return false
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range dnsNames {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: now.Add(certRenewBefore)}); err != nil {
			return false
		}
	}
	return true
}

// Manager runs the rotator: at start and every rotateEvery it renews what is due, copies the
// Secret into the certificate directory when asked to, and wakes the configuration reconciler when
// the CA bundle changed. It is a manager.Runnable.
type Manager struct {
	rotator    *Rotator
	dir        string
	writeFiles bool
	wake       chan<- struct{}
	log        logr.Logger
}

// NewManager returns a manager of r that copies the Secret into dir when writeFiles is set and
// sends on wake (without blocking) when the CA bundle changed.
func NewManager(r *Rotator, dir string, writeFiles bool, wake chan<- struct{}, log logr.Logger) *Manager {
	return &Manager{rotator: r, dir: dir, writeFiles: writeFiles, wake: wake, log: log}
}

// Start renews the certificates until ctx ends.
func (m *Manager) Start(ctx context.Context) error {
	var bundle []byte
	for {
		wait := rotateEvery
		data, err := m.rotator.ensure(ctx)
		if err == nil && m.writeFiles {
			err = writeCertFiles(m.dir, data)
		}
		if err != nil {
			m.log.Error(err, "Renewing the webhook's certificates; retrying")
			wait = 10 * time.Second
		} else if !bytes.Equal(bundle, data[caBundleFile]) {
			bundle = data[caBundleFile]
			select {
			case m.wake <- struct{}{}:
			default:
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// NeedLeaderElection: every replica keeps its certificate current.
func (m *Manager) NeedLeaderElection() bool { return false }

// writeCertFiles writes the certificate, the key and the CA into dir, each replaced by rename so
// that the server's certificate watcher never reads half a file; the key first, as the watcher
// reloads on the certificate.
func writeCertFiles(dir string, data map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	for _, name := range []string{KeyFile, CAFile, CertFile} {
		path := filepath.Join(dir, name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data[name]) {
			continue
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, data[name], 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", tmp, err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("replacing %s: %w", path, err)
		}
	}
	return nil
}

// BundleSource tells the configuration reconciler which CA bundle to write.
type BundleSource interface {
	// CABundle returns the bundle, or nil when the webhook does not manage it (cert-manager's
	// injector does), or an error when it should but has none yet.
	CABundle(ctx context.Context) ([]byte, error)
}

// SecretBundle reads the bundle from the certificate Secret Key at each reconcile, so that every
// replica writes the same bundle even right after another replica renewed the CA.
type SecretBundle struct {
	Client client.Client
	Key    types.NamespacedName
}

// CABundle implements BundleSource.
func (s SecretBundle) CABundle(ctx context.Context) ([]byte, error) {
	secret := &corev1.Secret{}
	if err := s.Client.Get(ctx, s.Key, secret); err != nil {
		return nil, fmt.Errorf("reading Secret %s: %w", s.Key, err)
	}
	if len(secret.Data[caBundleFile]) == 0 {
		return nil, fmt.Errorf("the Secret %s has no %s yet", s.Key, caBundleFile)
	}
	return secret.Data[caBundleFile], nil
}

// FileBundle reads ca.crt from the certificate directory Dir (cert-manager writes it for CA and
// self-signed issuers); without one, the bundle is left to cert-manager's CA injector.
type FileBundle struct{ Dir string }

// CABundle implements BundleSource.
func (f FileBundle) CABundle(context.Context) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(f.Dir, CAFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}
