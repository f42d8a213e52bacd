package serving

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nephele-dev/nephele/internal/atomicfile"

	"github.com/go-logr/logr"
)

// selfSignedValidity is how long a generated certificate is valid.
const selfSignedValidity = 365 * 24 * time.Hour

// SNICertKey is one --tls-sni-cert-key: a certificate and key served to clients that ask
// for one of Names (a name may start with "*." to match one label), or for the names the
// certificate itself holds when Names is empty.
type SNICertKey struct {
	CertFile, KeyFile string
	Names             []string
}

// servingCerts chooses the certificate of each TLS handshake: an SNI certificate whose
// names match the name the client asked for (exact names before wildcards, explicit
// names before a certificate's own, as upstream), else the default one. Certificates read
// from files are read again when the files change (reloading); the names an SNI
// certificate serves are taken once, at start: a rotated certificate with other names
// needs a restart (upstream rebuilds them on reload).
type servingCerts struct {
	def   func() *tls.Certificate
	exact map[string]*reloading[*tls.Certificate]
	wild  map[string]*reloading[*tls.Certificate] // by the suffix after "*."
}

// newServingCerts loads the default certificate (cfg's files, else the pair in CertDir,
// else a self-signed one, written to CertDir when it is set) and the SNI certificates.
func newServingCerts(cfg Config, bindIP net.IP, now func() time.Time) (*servingCerts, error) {
	c := &servingCerts{exact: map[string]*reloading[*tls.Certificate]{}, wild: map[string]*reloading[*tls.Certificate]{}}
	switch {
	case cfg.CertFile == "" && cfg.KeyFile != "":
		return nil, errors.New("--tls-private-key-file is set but --tls-cert-file is not; set both or neither")
	case cfg.CertFile != "" && cfg.KeyFile == "":
		return nil, errors.New("--tls-cert-file is set but --tls-private-key-file is not; set both or neither")
	case cfg.CertFile != "":
		r, err := reloadingKeyPair(fmt.Sprintf("--tls-cert-file %s with --tls-private-key-file %s", cfg.CertFile, cfg.KeyFile), cfg.CertFile, cfg.KeyFile, now, cfg.Logger)
		if err != nil {
			return nil, err
		}
		c.def = r.get
	case cfg.CertDir != "":
		certFile, keyFile, err := selfSignedInDir(cfg.CertDir, cfg.pairName(), bindIP, now())
		if err != nil {
			return nil, err
		}
		r, err := reloadingKeyPair("--cert-dir "+cfg.CertDir, certFile, keyFile, now, cfg.Logger)
		if err != nil {
			return nil, err
		}
		c.def = r.get
	default:
		certPEM, keyPEM, err := selfSignedPEM(bindIP, now())
		if err != nil {
			return nil, err
		}
		cert, err := parseKeyPair([][]byte{certPEM, keyPEM})
		if err != nil {
			return nil, err
		}
		c.def = func() *tls.Certificate { return cert }
	}
	// As upstream: explicit domain patterns before the names certificates hold, and
	// among those of one kind the earlier flag; the first to claim a name keeps it.
	type claim struct {
		names []string
		cert  *reloading[*tls.Certificate]
	}
	var explicit, extracted []claim
	for _, sni := range cfg.SNICertKeys {
		r, err := reloadingKeyPair(fmt.Sprintf("--tls-sni-cert-key %s,%s", sni.CertFile, sni.KeyFile), sni.CertFile, sni.KeyFile, now, cfg.Logger)
		if err != nil {
			return nil, err
		}
		if len(sni.Names) > 0 {
			explicit = append(explicit, claim{sni.Names, r})
			continue
		}
		names := certificateNames(r.get().Leaf)
		if len(names) == 0 {
			return nil, fmt.Errorf("--tls-sni-cert-key %s: the certificate names no host and the flag gives no domain patterns", sni.CertFile)
		}
		extracted = append(extracted, claim{names, r})
	}
	for _, cl := range append(explicit, extracted...) {
		for _, n := range cl.names {
			m, key := c.exact, strings.ToLower(n)
			if suffix, ok := strings.CutPrefix(key, "*."); ok {
				m, key = c.wild, suffix
			}
			if _, taken := m[key]; !taken {
				m[key] = cl.cert
			}
		}
	}
	return c, nil
}

// getCertificate is the tls.Config's GetCertificate.
func (c *servingCerts) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))
	if name == "" && hello.Conn != nil {
		// Clients send no IP address as the server name: as upstream, an explicit IP
		// pattern matches the address the client connected to.
		if host, _, err := net.SplitHostPort(hello.Conn.LocalAddr().String()); err == nil {
			if r, ok := c.exact[host]; ok {
				return r.get(), nil
			}
		}
	}
	if name != "" {
		if r, ok := c.exact[name]; ok {
			return r.get(), nil
		}
		if _, parent, ok := strings.Cut(name, "."); ok {
			if r, ok := c.wild[parent]; ok {
				return r.get(), nil
			}
		}
	}
	return c.def(), nil
}

// certificateNames are the names a certificate serves by SNI: its DNS names, or its common
// name when it has none. Its IP addresses are not, as upstream: only an explicit pattern
// selects a certificate by address.
func certificateNames(leaf *x509.Certificate) []string {
	names := slices.Clone(leaf.DNSNames)
	if len(names) == 0 && leaf.Subject.CommonName != "" {
		names = append(names, leaf.Subject.CommonName)
	}
	return names
}

func reloadingKeyPair(what, certFile, keyFile string, now func() time.Time, logger logr.Logger) (*reloading[*tls.Certificate], error) {
	return newReloading(what, []string{certFile, keyFile}, parseKeyPair, now, logger)
}

// parseKeyPair parses a PEM certificate (chain) and its key.
func parseKeyPair(contents [][]byte) (*tls.Certificate, error) {
	cert, err := tls.X509KeyPair(contents[0], contents[1])
	if err != nil {
		return nil, err
	}
	return &cert, nil
}

// selfSignedInDir returns the pair name.crt and name.key in dir, making a self-signed
// pair there first when there is none, as upstream's --cert-dir: the certificate then
// survives restarts, so clients that pinned it keep trusting it.
func selfSignedInDir(dir, name string, bindIP net.IP, now time.Time) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	_, certErr := os.Stat(certFile)
	_, keyErr := os.Stat(keyFile)
	if certErr == nil && keyErr == nil {
		return certFile, keyFile, nil
	}
	if !errors.Is(certErr, fs.ErrNotExist) && certErr != nil {
		return "", "", fmt.Errorf("--cert-dir: %w", certErr)
	}
	if !errors.Is(keyErr, fs.ErrNotExist) && keyErr != nil {
		return "", "", fmt.Errorf("--cert-dir: %w", keyErr)
	}
	certPEM, keyPEM, err := selfSignedPEM(bindIP, now)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("--cert-dir: %w", err)
	}
	// The key first, so that a certificate never exists without its key.
	if err := atomicfile.Write(keyFile, keyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("--cert-dir: %w", err)
	}
	if err := atomicfile.Write(certFile, certPEM, 0o644); err != nil {
		return "", "", fmt.Errorf("--cert-dir: %w", err)
	}
	return certFile, keyFile, nil
}

// selfSignedPEM makes an ECDSA P-256 certificate, signed by its own key, for localhost,
// 127.0.0.1, ::1, the host name and bindIP when it names one address, and returns it and
// its key in PEM.
func selfSignedPEM(bindIP net.IP, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating self-signed serving key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, fmt.Errorf("generating self-signed serving certificate serial: %w", err)
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
		return nil, nil, fmt.Errorf("creating self-signed serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding self-signed serving key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}
