package serving

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

// selfSignedValidity is how long a generated certificate is valid. It lives only in
// memory, so a restart makes a new one.
const selfSignedValidity = 365 * 24 * time.Hour

// loadCertificate reads the serving certificate and key named by --tls-cert-file and
// --tls-private-key-file.
func loadCertificate(certFile, keyFile string) (tls.Certificate, error) {
	switch {
	case certFile == "" && keyFile != "":
		return tls.Certificate{}, errors.New("--tls-private-key-file is set but --tls-cert-file is not; set both or neither")
	case certFile != "" && keyFile == "":
		return tls.Certificate{}, errors.New("--tls-cert-file is set but --tls-private-key-file is not; set both or neither")
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("reading --tls-cert-file: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("reading --tls-private-key-file: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("loading --tls-cert-file %s with --tls-private-key-file %s: %w", certFile, keyFile, err)
	}
	return cert, nil
}

// selfSignedCertificate makes an ECDSA P-256 certificate, signed by its own key, for
// localhost, 127.0.0.1, ::1, the host name and bindIP when it names one address.
func selfSignedCertificate(bindIP net.IP, now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating self-signed serving key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating self-signed serving certificate serial: %w", err)
	}
	dns := []string{"localhost"}
	if host, err := os.Hostname(); err == nil && host != "" && host != "localhost" {
		dns = append(dns, host)
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if bindIP != nil && !bindIP.IsUnspecified() && !bindIP.IsLoopback() {
		ips = append(ips, bindIP)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: fmt.Sprintf("%s@%d", dns[len(dns)-1], now.Unix())},
		// An hour back so that a client whose clock is a little behind accepts it.
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(selfSignedValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              dns,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("creating self-signed serving certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("parsing self-signed serving certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}
