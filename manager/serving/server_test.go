package serving

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

func TestSelfSignedCertificate(t *testing.T) {
	s := mustNew(t, testConfig(newFakeAPI()))
	r := start(t, s)
	roots := serverRoots(t, s)

	for _, serverName := range []string{"localhost", "127.0.0.1"} {
		conn, err := tls.Dial("tcp", s.Addr().String(), &tls.Config{RootCAs: roots, ServerName: serverName})
		if err != nil {
			t.Fatalf("TLS handshake verifying %s: %v", serverName, err)
		}
		leaf := conn.ConnectionState().PeerCertificates[0]
		_ = conn.Close()
		if _, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok {
			t.Errorf("self-signed key is %T, want ECDSA", leaf.PublicKey)
		}
		if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
			t.Errorf("self-signed certificate lacks server auth usage: %v", leaf.ExtKeyUsage)
		}
		if host, err := os.Hostname(); err == nil && host != "" && !slices.Contains(leaf.DNSNames, host) {
			t.Errorf("self-signed DNS names %v lack the host name %q", leaf.DNSNames, host)
		}
	}
	// A client that does not trust the certificate must fail: the TLS is real.
	if _, err := tls.Dial("tcp", s.Addr().String(), &tls.Config{ServerName: "localhost"}); err == nil {
		t.Errorf("TLS handshake without trusting the self-signed certificate succeeded")
	}
	if code, body := r.get(t, "/healthz", ""); code != http.StatusOK {
		t.Errorf("GET /healthz over TLS = %d: %s", code, body)
	}
}

func TestSelfSignedCertificateNamesBindAddress(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		bind    string
		wantIPs []string
	}{
		{bind: "", wantIPs: []string{"127.0.0.1", "::1"}},
		{bind: "0.0.0.0", wantIPs: []string{"127.0.0.1", "::1"}},
		{bind: "10.1.2.3", wantIPs: []string{"127.0.0.1", "::1", "10.1.2.3"}},
	} {
		cert := selfSigned(t, net.ParseIP(tt.bind))
		var got []string
		for _, ip := range cert.Leaf.IPAddresses {
			got = append(got, ip.String())
		}
		if !slices.Equal(got, tt.wantIPs) {
			t.Errorf("bind %q: certificate IPs %v, want %v", tt.bind, got, tt.wantIPs)
		}
		if err := cert.Leaf.VerifyHostname("localhost"); err != nil {
			t.Errorf("bind %q: %v", tt.bind, err)
		}
		if !cert.Leaf.NotBefore.Before(now) || !cert.Leaf.NotAfter.After(now.Add(300*24*time.Hour)) {
			t.Errorf("bind %q: certificate valid %s to %s", tt.bind, cert.Leaf.NotBefore, cert.Leaf.NotAfter)
		}
	}
}

// writeKeyPair writes a fresh certificate and key as PEM files and returns their paths
// and the certificate's DER bytes.
func writeKeyPair(t *testing.T, dir, name string) (certFile, keyFile string, der []byte) {
	t.Helper()
	cert := selfSigned(t, nil)
	keyDER, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert.Certificate[0]
}

func TestCertificateFiles(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, der := writeKeyPair(t, dir, "serving")
	cfg := testConfig(newFakeAPI())
	cfg.CertFile, cfg.KeyFile = certFile, keyFile
	s := mustNew(t, cfg)
	start(t, s)

	conn, err := tls.Dial("tcp", s.Addr().String(), &tls.Config{RootCAs: serverRoots(t, s), ServerName: "localhost"})
	if err != nil {
		t.Fatalf("TLS handshake: %v", err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().PeerCertificates[0].Raw; !slices.Equal(got, der) {
		t.Errorf("server presented a certificate other than the one in --tls-cert-file")
	}
}

func TestCertificateFileErrors(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := writeKeyPair(t, dir, "a")
	_, otherKey, _ := writeKeyPair(t, dir, "b")
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")

	tests := []struct {
		name      string
		cert, key string
		wantErr   []string
	}{
		{name: "cert unreadable", cert: missing, key: keyFile, wantErr: []string{"--tls-cert-file", "missing.pem", "no such file"}},
		{name: "key unreadable", cert: certFile, key: missing, wantErr: []string{"--tls-private-key-file", "missing.pem"}},
		{name: "only cert", cert: certFile, wantErr: []string{"--tls-cert-file is set but --tls-private-key-file is not"}},
		{name: "only key", key: keyFile, wantErr: []string{"--tls-private-key-file is set but --tls-cert-file is not"}},
		{name: "mismatched", cert: certFile, key: otherKey, wantErr: []string{"--tls-cert-file", "--tls-private-key-file", "private key does not match public key"}},
		{name: "not PEM", cert: garbage, key: keyFile, wantErr: []string{"--tls-cert-file " + garbage}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(newFakeAPI())
			cfg.CertFile, cfg.KeyFile = tt.cert, tt.key
			s, err := New(cfg)
			if err == nil {
				_ = s.Close()
				t.Fatalf("New succeeded, want an error")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestPortInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := testConfig(newFakeAPI())
	cfg.Port = taken.Addr().(*net.TCPAddr).Port
	s, err := New(cfg)
	if err == nil {
		_ = s.Close()
		t.Fatalf("New on a port in use succeeded")
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("error %v is not EADDRINUSE", err)
	}
	if !strings.Contains(err.Error(), taken.Addr().String()) || !strings.Contains(err.Error(), "--secure-port") {
		t.Errorf("error %q does not name the address %s and the flag", err, taken.Addr())
	}
}

func TestConfigValidation(t *testing.T) {
	api := newFakeAPI()
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{name: "negative port", mutate: func(c *Config) { c.Port = -1 }, wantErr: "--secure-port -1"},
		{name: "port too big", mutate: func(c *Config) { c.Port = 65536 }, wantErr: "--secure-port 65536"},
		{name: "bind address not an IP", mutate: func(c *Config) { c.BindAddress = "localhost" }, wantErr: `--bind-address "localhost"`},
		{name: "no client", mutate: func(c *Config) { c.Authn = nil }, wantErr: "no client"},
		{name: "negative shutdown timeout", mutate: func(c *Config) { c.ShutdownTimeout = -time.Second }, wantErr: "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(api)
			tt.mutate(&cfg)
			s, err := New(cfg)
			if err == nil {
				_ = s.Close()
				t.Fatalf("New succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

// blockingCheck is a readiness check that waits for release, reporting when a request
// is inside it.
func blockingCheck(name string) (c Check, entered <-chan struct{}, release func()) {
	in := make(chan struct{})
	out := make(chan struct{})
	var enterOnce, releaseOnce sync.Once
	c = Check{Name: name, Fn: func(*http.Request) error {
		enterOnce.Do(func() { close(in) })
		<-out
		return nil
	}}
	return c, in, func() { releaseOnce.Do(func() { close(out) }) }
}

type result struct {
	code int
	body string
	err  error
}

func getAsync(r *running, path string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		resp, err := r.client.Get(r.base + path)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		ch <- result{code: resp.StatusCode, body: string(body), err: err}
	}()
	return ch
}

func TestGracefulShutdown(t *testing.T) {
	s := mustNew(t, testConfig(newFakeAPI()))
	check, entered, release := blockingCheck("slow")
	t.Cleanup(release)
	if err := s.AddReadyzChecks(check); err != nil {
		t.Fatal(err)
	}
	r := start(t, s)

	inFlight := getAsync(r, "/readyz/slow")
	<-entered
	r.cancel()
	// Shutdown has begun once new connections are refused; the request is still running.
	poll.Eventually(t, "the listener to close", func() error {
		conn, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			return nil
		}
		_ = conn.Close()
		return errors.New("it still accepts connections")
	})
	release()
	res := <-inFlight
	if res.err != nil || res.code != http.StatusOK || res.body != "ok" {
		t.Errorf("request in flight at shutdown = %d %q, %v; want it to finish with 200 ok", res.code, res.body, res.err)
	}
	if err := r.wait(); err != nil {
		t.Errorf("Serve after graceful shutdown = %v, want nil", err)
	}
}

func TestShutdownTimeoutCutsOffRequests(t *testing.T) {
	cfg := testConfig(newFakeAPI())
	cfg.ShutdownTimeout = 50 * time.Millisecond
	s := mustNew(t, cfg)
	check, entered, release := blockingCheck("stuck")
	t.Cleanup(release)
	if err := s.AddReadyzChecks(check); err != nil {
		t.Fatal(err)
	}
	r := start(t, s)

	inFlight := getAsync(r, "/readyz/stuck")
	<-entered
	r.cancel()
	if err := r.wait(); err != nil {
		t.Errorf("Serve after a shutdown timeout = %v, want nil", err)
	}
	if res := <-inFlight; res.err == nil {
		t.Errorf("request stuck past the shutdown timeout got %d %q, want its connection closed", res.code, res.body)
	}
}

func TestServeOnlyOnce(t *testing.T) {
	s := mustNew(t, testConfig(newFakeAPI()))
	r := start(t, s)
	if code, _ := r.get(t, "/livez", ""); code != http.StatusOK {
		t.Fatalf("GET /livez = %d", code)
	}
	if err := s.Serve(context.Background()); err == nil {
		t.Errorf("second Serve succeeded, want an error")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close while serving = %v, want nil (no-op)", err)
	}
	if code, _ := r.get(t, "/livez", ""); code != http.StatusOK {
		t.Errorf("GET /livez after Close while serving = %d, want 200", code)
	}
}

func TestCloseReleasesPort(t *testing.T) {
	s := mustNew(t, testConfig(newFakeAPI()))
	addr := s.Addr().String()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port of a closed server still taken: %v", err)
	}
	_ = ln.Close()
	if err := s.Serve(context.Background()); err == nil {
		t.Errorf("Serve after Close succeeded, want an error")
	}
}

func TestServeWithDoneContext(t *testing.T) {
	s := mustNew(t, testConfig(newFakeAPI()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Serve(ctx); err != nil {
		t.Errorf("Serve with a done context = %v, want nil", err)
	}
	if _, err := net.Dial("tcp", s.Addr().String()); err == nil {
		t.Errorf("server still accepts connections after Serve returned")
	}
}

func TestAddrReportsEphemeralPort(t *testing.T) {
	s := mustNew(t, testConfig(newFakeAPI()))
	t.Cleanup(func() { _ = s.Close() })
	host, port, err := net.SplitHostPort(s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := strconv.Atoi(port); host != "127.0.0.1" || p == 0 {
		t.Errorf("Addr = %s, want 127.0.0.1 with a real port", s.Addr())
	}
}
