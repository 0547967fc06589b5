package mutatingwebhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// CertMode says where the webhook's serving certificate comes from.
type CertMode string

const (
	// CertRotate: the webhook makes its own CA and serving certificate, keeps them in a Secret,
	// renews them before they expire and writes the CA bundle into the webhook configuration
	// (open-policy-agent/cert-controller). The Secret is mounted at CertDir; the serving
	// certificate is reloaded from there when it changes.
	CertRotate CertMode = "rotate"
	// CertFiles: something else (cert-manager) writes tls.crt, tls.key and, when it can, ca.crt
	// into CertDir. The CA bundle is taken from ca.crt when present; otherwise the configuration's
	// bundle is left to whoever injects it (cert-manager's CA injector).
	CertFiles CertMode = "files"
)

// CertOptions configure the serving certificate.
type CertOptions struct {
	Mode CertMode
	// Dir holds tls.crt and tls.key (and ca.crt).
	Dir string
	// SecretNamespace and SecretName name the Secret CertRotate keeps the certificates in; it is
	// created empty when missing.
	SecretNamespace, SecretName string
	// DNSNames are the names the certificate is valid for; the first is the subject.
	DNSNames []string
	// WriteFiles makes the webhook copy the Secret into Dir itself, as the kubelet does for a
	// mounted Secret: for webhooks running outside a pod (local clusters, development).
	WriteFiles bool
}

const (
	certFile = "tls.crt"
	keyFile  = "tls.key"
	caFile   = "ca.crt"
)

// setupCertificates arranges the serving certificate and returns a channel closed once the
// certificate is in Dir and, with CertRotate, the CA bundle is in the webhook configuration.
func setupCertificates(ctx context.Context, mgr manager.Manager, direct client.Client, o CertOptions, configuration string, log logr.Logger) (<-chan struct{}, error) {
	ready := make(chan struct{})
	switch o.Mode {
	case CertFiles:
		go func() {
			if err := waitForFile(ctx, filepath.Join(o.Dir, certFile)); err == nil {
				close(ready)
			}
		}()
		return ready, nil
	case CertRotate:
	default:
		return nil, fmt.Errorf("unknown certificate mode %q (want %q or %q)", o.Mode, CertRotate, CertFiles)
	}
	if len(o.DNSNames) == 0 {
		return nil, errors.New("the certificate needs at least one DNS name")
	}
	if err := ensureSecret(ctx, direct, o.SecretNamespace, o.SecretName); err != nil {
		return nil, err
	}
	r := &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: o.SecretNamespace, Name: o.SecretName},
		CertDir:        o.Dir,
		CAName:         "fairway-webhook-ca",
		CAOrganization: "fairway",
		DNSName:        o.DNSNames[0],
		ExtraDNSNames:  o.DNSNames[1:],
		IsReady:        ready,
		Webhooks:       []rotator.WebhookInfo{{Name: configuration, Type: rotator.Mutating}},
		// Every replica rotates and serves; the Secret's resourceVersion settles races.
		RequireLeaderElection: false,
		EnableReadinessCheck:  true,
		FieldOwner:            "fairway-webhook",
		ControllerName:        "fairway-webhook-cert-rotator",
	}
	if err := rotator.AddRotator(mgr, r); err != nil {
		return nil, fmt.Errorf("adding the certificate rotator: %w", err)
	}
	if o.WriteFiles {
		if err := mgr.Add(&secretFiles{reader: mgr.GetAPIReader(), key: r.SecretKey, dir: o.Dir, log: log}); err != nil {
			return nil, fmt.Errorf("adding the certificate writer: %w", err)
		}
	}
	return ready, nil
}

// ensureSecret creates the certificate Secret, empty, when it does not exist: the rotator only
// fills an existing one.
func ensureSecret(ctx context.Context, c client.Client, namespace, name string) error {
	err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		if err != nil {
			return fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
		}
		return nil
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
		Labels: map[string]string{"app.kubernetes.io/name": "fairway", "app.kubernetes.io/component": "webhook"}}}
	if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Secret %s/%s: %w", namespace, name, err)
	}
	return nil
}

// readCABundle returns Dir/ca.crt, or nil when there is none.
func readCABundle(dir string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, caFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

func waitForFile(ctx context.Context, path string) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// secretFiles copies the certificate Secret into the certificate directory whenever it changes,
// playing the kubelet's part for a webhook that runs outside a pod. Files are replaced by rename,
// so the server's certificate watcher never reads half a file.
type secretFiles struct {
	reader client.Reader
	key    types.NamespacedName
	dir    string
	log    logr.Logger
}

func (s *secretFiles) Start(ctx context.Context) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", s.dir, err)
	}
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		if err := s.sync(ctx); err != nil {
			s.log.Error(err, "Copying the certificate Secret into the certificate directory", "dir", s.dir)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (s *secretFiles) NeedLeaderElection() bool { return false }

func (s *secretFiles) sync(ctx context.Context) error {
	var secret corev1.Secret
	if err := s.reader.Get(ctx, s.key, &secret); err != nil {
		return fmt.Errorf("reading Secret %s: %w", s.key, err)
	}
	// The key first: the certificate watcher reloads on the certificate file.
	for _, name := range []string{keyFile, caFile, certFile} {
		data := secret.Data[name]
		if len(data) == 0 {
			continue
		}
		path := filepath.Join(s.dir, name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
			continue
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", tmp, err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("replacing %s: %w", path, err)
		}
		s.log.V(1).Info("Certificate file updated", "file", path)
	}
	return nil
}
