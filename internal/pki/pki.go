package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// Authority is a self-signed certificate authority made for one purpose.
type Authority struct {
	validity time.Duration
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	pem      []byte
}

// NewAuthority makes a self-signed CA named name (its subject's common name), valid for
// validity, as is every certificate it issues: nothing renews them, so validity must
// outlast what they serve.
func NewAuthority(name string, validity time.Duration) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate %s key: %w", name, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create %s certificate: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse %s certificate: %w", name, err)
	}
	return &Authority{validity: validity, cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// PEM returns the authority's certificate, PEM-encoded: what clients trust.
func (a *Authority) PEM() []byte { return a.pem }

// Pool returns a pool holding only the authority's certificate.
func (a *Authority) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(a.cert)
	return p
}

// Issued is a certificate an Authority signed, with its key.
type Issued struct {
	// CertPEM and KeyPEM are the certificate and its private key, PEM-encoded.
	CertPEM, KeyPEM []byte
}

// TLS returns the certificate as crypto/tls takes it.
func (i Issued) TLS() (tls.Certificate, error) { return tls.X509KeyPair(i.CertPEM, i.KeyPEM) }

// Issue signs tmpl (its subject, extended key usages and names; serial, validity and key
// usage are filled in) with a new key.
func (a *Authority) Issue(tmpl *x509.Certificate) (Issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Issued{}, fmt.Errorf("certificate %s: generate key: %w", tmpl.Subject.CommonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return Issued{}, fmt.Errorf("certificate %s: serial: %w", tmpl.Subject.CommonName, err)
	}
	now := time.Now()
	tmpl.SerialNumber = serial.Add(serial, big.NewInt(2)) // 1 is the CA's
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(a.validity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return Issued{}, fmt.Errorf("certificate %s: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Issued{}, fmt.Errorf("certificate %s: encode key: %w", tmpl.Subject.CommonName, err)
	}
	return Issued{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}
