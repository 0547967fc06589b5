package certs

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

var testDNSNames = []string{"fairway-webhook.fairway-system.svc", "fairway-webhook.fairway-system.svc.cluster.local"}

// TestRenewCertificates walks a Secret through its life: made empty, left alone while valid,
// serving certificate renewed near its end and when the DNS names change, CA renewed near its end
// with the previous CA kept in the bundle until it expires.
func TestRenewCertificates(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	data, changed, err := renewCertificates(nil, testDNSNames, t0)
	if err != nil || !changed {
		t.Fatalf("from nothing: changed %v, err %v", changed, err)
	}
	ca := mustCert(t, data[CAFile])
	leaf := mustCert(t, data[CertFile])
	if _, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok {
		t.Errorf("serving key is %T, want ECDSA", leaf.PublicKey)
	}
	verify(t, data, testDNSNames, t0)

	if _, changed, _ := renewCertificates(data, testDNSNames, t0.Add(24*time.Hour)); changed {
		t.Errorf("valid certificates were renewed")
	}

	// 300 days later the serving certificate expires within 90 days: renewed, same CA.
	t1 := t0.Add(300 * 24 * time.Hour)
	renewed, changed, err := renewCertificates(data, testDNSNames, t1)
	if err != nil || !changed || bytes.Equal(renewed[CertFile], data[CertFile]) || !bytes.Equal(renewed[CAFile], data[CAFile]) {
		t.Fatalf("serving certificate near its end: changed %v, err %v, CA kept %v", changed, err, bytes.Equal(renewed[CAFile], data[CAFile]))
	}
	verify(t, renewed, testDNSNames, t1)

	// A new DNS name (the Service was renamed): renewed.
	names := append(testDNSNames, "fairway.example")
	if renamed, changed, _ := renewCertificates(renewed, names, t1); !changed {
		t.Errorf("DNS names changed but the certificate was kept")
	} else {
		verify(t, renamed, names, t1)
	}

	// Nine and a half years on, the CA expires within a year: new CA, old one still in the bundle.
	t2 := t0.Add(9*365*24*time.Hour + 180*24*time.Hour)
	rotated, changed, err := renewCertificates(renewed, testDNSNames, t2)
	if err != nil || !changed || bytes.Equal(rotated[CAFile], renewed[CAFile]) {
		t.Fatalf("CA near its end: changed %v, err %v", changed, err)
	}
	verify(t, rotated, testDNSNames, t2)
	if bundle := certs(t, rotated[caBundleFile]); len(bundle) != 2 || !bundle[1].Equal(ca) {
		t.Errorf("bundle after the CA rotation holds %d certificates, want the new CA and the old", len(bundle))
	}
	// Once the old CA has expired, it leaves the bundle.
	t3 := t0.Add(caValidity + time.Hour)
	pruned, _, err := renewCertificates(rotated, testDNSNames, t3)
	if err != nil {
		t.Fatal(err)
	}
	if bundle := certs(t, pruned[caBundleFile]); len(bundle) != 1 {
		t.Errorf("bundle still holds %d certificates after the old CA expired", len(bundle))
	}
}

// TestCertRotatorSecret: the Secret is created when missing and written once.
func TestCertRotatorSecret(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
	key := types.NamespacedName{Namespace: "fairway-system", Name: "fairway-webhook-cert"}
	r := &Rotator{client: c, key: key, dnsNames: testDNSNames, now: time.Now, log: logr.Discard()}
	first, err := r.ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	second, err := r.ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first[CertFile], second[CertFile]) {
		t.Errorf("a second ensure made a new certificate")
	}
	var s corev1.Secret
	if err := c.Get(context.Background(), key, &s); err != nil || !bytes.Equal(s.Data[caBundleFile], first[caBundleFile]) {
		t.Errorf("Secret not written: %v", err)
	}
}

// TestCertRotatorRetriesAConflict: a replica that loses the race to write the Secret reads it
// again and writes on the current version.
func TestCertRotatorRetriesAConflict(t *testing.T) {
	key := types.NamespacedName{Namespace: "fairway-system", Name: "fairway-webhook-cert"}
	var updates int
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if updates++; updates == 1 {
				return apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, key.Name, errors.New("the object has been modified"))
			}
			return c.Update(ctx, obj, opts...)
		},
	}).Build()
	r := NewRotator(c, key, testDNSNames, logr.Discard())
	data, err := r.ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if updates != 2 || len(data[CertFile]) == 0 {
		t.Errorf("%d updates, certificate of %d bytes; want 2 updates and a certificate", updates, len(data[CertFile]))
	}
}

func verify(t *testing.T, data map[string][]byte, names []string, at time.Time) {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data[caBundleFile]) {
		t.Fatal("no CA bundle")
	}
	leaf := mustCert(t, data[CertFile])
	for _, n := range names {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: n, Roots: roots, CurrentTime: at}); err != nil {
			t.Errorf("serving certificate for %s: %v", n, err)
		}
	}
	if _, _, err := parsePair(data[CertFile], data[KeyFile]); err != nil {
		t.Errorf("certificate and key do not match: %v", err)
	}
}

func mustCert(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	cs := certs(t, p)
	if len(cs) == 0 {
		t.Fatal("no certificate")
	}
	return cs[0]
}

func certs(t *testing.T, p []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for {
		var b *pem.Block
		if b, p = pem.Decode(p); b == nil {
			return out
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
}
