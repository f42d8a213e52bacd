package server

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"time"

	"github.com/nephele-dev/nephele/internal/atomicfile"
	"github.com/nephele-dev/nephele/internal/pki"
)

// servingValidity bounds the API's certificate: far beyond any run, as nothing renews it
// and a restart makes a new one.
const servingValidity = 365 * 24 * time.Hour

// servingTLS makes the API's TLS configuration for a listener at addr: a certificate
// authority made for this run, which signs only the serving certificate, whose
// certificate goes to caFile (0644: clients of any user verify with it) and whose key
// never leaves memory, so that no file on the machine can sign a certificate the
// clients would take.
func servingTLS(addr net.Addr, caFile string) (*tls.Config, error) {
	ca, err := pki.NewAuthority("nephele-localcloud-ca", servingValidity)
	if err != nil {
		return nil, fmt.Errorf("the API's certificate authority: %w", err)
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1)}
	if tcp, ok := addr.(*net.TCPAddr); ok && !tcp.IP.IsUnspecified() && !tcp.IP.Equal(ips[0]) {
		ips = append(ips, tcp.IP)
	}
	issued, err := ca.Issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "nephele-localcloud"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: ips,
	})
	if err != nil {
		return nil, fmt.Errorf("the API's serving certificate: %w", err)
	}
	cert, err := issued.TLS()
	if err != nil {
		return nil, fmt.Errorf("the API's serving certificate: %w", err)
	}
	if err := atomicfile.Write(caFile, ca.PEM(), 0o644); err != nil {
		return nil, fmt.Errorf("write the API's CA certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
