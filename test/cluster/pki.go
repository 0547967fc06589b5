package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the files of the cluster's credentials. Everything is generated in Go at start
// (ECDSA P-256, which is fast to generate, unlike RSA) and lives only in the work directory.
type pki struct {
	dir string

	caCert, caKey           string // cluster CA: signs the serving and client certs; the root CA of pods
	servingCert, servingKey string // kube-apiserver's serving cert for 127.0.0.1 and kubernetes.default
	adminCert, adminKey     string // client cert of the admin user (group system:masters)
	saKey, saPub            string // service-account token signing key pair
	tokenFile               string // static token file with the admin token

	caPEM, adminCertPEM, adminKeyPEM []byte
	adminToken                       string

	// ca and caKeyPriv sign the client certificates ClientCertificate makes after start.
	ca        *x509.Certificate
	caKeyPriv *ecdsa.PrivateKey
}

// AdminUser is the user name of the cluster's admin credentials (client cert and token). It is
// in the group system:masters, so it bypasses RBAC; tests that exercise RBAC impersonate or make
// their own users.
const AdminUser = "fairway-admin"

// newPKI generates the cluster's credentials into dir. serviceIP is the first IP of the service
// range (the kubernetes.default Service), which the serving cert must name.
func newPKI(dir string, serviceIP net.IP) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the pki directory: %w", err)
	}
	p := &pki{
		dir:         dir,
		caCert:      filepath.Join(dir, "ca.crt"),
		caKey:       filepath.Join(dir, "ca.key"),
		servingCert: filepath.Join(dir, "apiserver.crt"),
		servingKey:  filepath.Join(dir, "apiserver.key"),
		adminCert:   filepath.Join(dir, "admin.crt"),
		adminKey:    filepath.Join(dir, "admin.key"),
		saKey:       filepath.Join(dir, "sa.key"),
		saPub:       filepath.Join(dir, "sa.pub"),
		tokenFile:   filepath.Join(dir, "tokens.csv"),
	}
	now := time.Now().Add(-time.Hour) // tolerate small clock skew between processes
	ca, caKey, caPEM, err := selfSignedCA(now)
	if err != nil {
		return nil, err
	}
	p.caPEM = caPEM
	p.ca, p.caKeyPriv = ca, caKey
	if err := writeKeyPair(p.caCert, p.caKey, caPEM, caKey); err != nil {
		return nil, err
	}

	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), serviceIP},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	certPEM, key, err := signLeaf(serving, ca, caKey, now)
	if err != nil {
		return nil, fmt.Errorf("signing the serving certificate: %w", err)
	}
	if err := writeKeyPair(p.servingCert, p.servingKey, certPEM, key); err != nil {
		return nil, err
	}

	admin := &x509.Certificate{
		Subject:     pkix.Name{CommonName: AdminUser, Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if p.adminCertPEM, key, err = signLeaf(admin, ca, caKey, now); err != nil {
		return nil, fmt.Errorf("signing the admin client certificate: %w", err)
	}
	if p.adminKeyPEM, err = keyPEM(key); err != nil {
		return nil, err
	}
	if err := writeKeyPair(p.adminCert, p.adminKey, p.adminCertPEM, key); err != nil {
		return nil, err
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("encoding the service-account public key: %w", err)
	}
	if err := writePEM(p.saPub, "PUBLIC KEY", pub); err != nil {
		return nil, err
	}
	saKeyPEM, err := keyPEM(saKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.saKey, saKeyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("writing the service-account key: %w", err)
	}

	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, fmt.Errorf("generating the admin token: %w", err)
	}
	p.adminToken = hex.EncodeToString(tok)
	line := fmt.Sprintf("%s,%s,%s-uid,\"system:masters\"\n", p.adminToken, AdminUser, AdminUser)
	if err := os.WriteFile(p.tokenFile, []byte(line), 0o600); err != nil {
		return nil, fmt.Errorf("writing the token file: %w", err)
	}
	return p, nil
}

func selfSignedCA(now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generating the CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "fairway-test-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("creating the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("parsing the CA certificate: %w", err)
	}
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// signLeaf fills in serial, validity and key usage of tmpl, and signs it with the CA.
func signLeaf(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, now time.Time) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now
	tmpl.NotAfter = now.Add(10 * 24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key, nil
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding a private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func writeKeyPair(certPath, keyPath string, certPEM []byte, key *ecdsa.PrivateKey) error {
	if err := os.WriteFile(certPath, certPEM, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", certPath, err)
	}
	kp, err := keyPEM(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, kp, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", keyPath, err)
	}
	return nil
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// ClientCertificate signs a client certificate of user in groups with the cluster CA, for
// clients that must authenticate as themselves rather than impersonate: a real kubelet is
// system:node:<name> in system:nodes, which the Node authorizer and the NodeRestriction admission
// plugin read from its credentials.
func (c *Cluster) ClientCertificate(user string, groups ...string) (certPEM, keyOut []byte, err error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	certPEM, key, err := signLeaf(tmpl, c.pki.ca, c.pki.caKeyPriv, time.Now().Add(-time.Hour))
	if err != nil {
		return nil, nil, fmt.Errorf("signing the client certificate of %s: %w", user, err)
	}
	if keyOut, err = keyPEM(key); err != nil {
		return nil, nil, err
	}
	return certPEM, keyOut, nil
}
