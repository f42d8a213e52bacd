package serving

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/nephele-dev/nephele/internal/pki"
)

// newCA makes a CA for a test and writes its certificate to dir/name.crt.
func newCA(t *testing.T, dir, name string) (*pki.Authority, string) {
	t.Helper()
	ca, err := pki.NewAuthority(name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, name+".crt")
	if err := os.WriteFile(file, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	return ca, file
}

// issue signs a certificate for subject with usage.
func issue(t *testing.T, ca *pki.Authority, subject pkix.Name, usage x509.ExtKeyUsage, dns ...string) tls.Certificate {
	t.Helper()
	iss, err := ca.Issue(&x509.Certificate{Subject: subject, ExtKeyUsage: []x509.ExtKeyUsage{usage}, DNSNames: dns})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := iss.TLS()
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// clientWith returns a client of r that presents cert (none when cert is nil).
func (r *running) clientWith(t *testing.T, cert *tls.Certificate) *http.Client {
	t.Helper()
	cfg := &tls.Config{RootCAs: serverRoots(t, r.server)}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: time.Minute}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func getWith(t *testing.T, c *http.Client, url string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, readBody(t, resp)
}

func TestClientCertificateAuthentication(t *testing.T) {
	dir := t.TempDir()
	clientCA, clientCAFile := newCA(t, dir, "client-ca")
	proxyCA, proxyCAFile := newCA(t, dir, "front-proxy-ca")
	otherCA, _ := newCA(t, dir, "other-ca")

	api := newFakeAPI()
	api.addUser("scraper-token", authenticationv1.UserInfo{Username: "scraper"}, "get", "/metrics")
	api.allow("alice", "get", "/metrics")
	api.allow("bob", "get", "/metrics")
	cfg := testConfig(api)
	cfg.Gatherer = prometheus.NewRegistry()
	cfg.ClientCAFile = clientCAFile
	cfg.RequestHeader = RequestHeaderConfig{
		ClientCAFile:        proxyCAFile,
		AllowedNames:        []string{"front-proxy"},
		UsernameHeaders:     []string{"X-Remote-User"},
		GroupHeaders:        []string{"X-Remote-Group"},
		ExtraHeaderPrefixes: []string{"X-Remote-Extra-"},
	}
	r := start(t, mustNew(t, cfg))

	alice := issue(t, clientCA, pkix.Name{CommonName: "alice", Organization: []string{"monitoring"}}, x509.ExtKeyUsageClientAuth)
	aliceServing := issue(t, clientCA, pkix.Name{CommonName: "alice"}, x509.ExtKeyUsageServerAuth)
	mallory := issue(t, otherCA, pkix.Name{CommonName: "alice"}, x509.ExtKeyUsageClientAuth)
	proxy := issue(t, proxyCA, pkix.Name{CommonName: "front-proxy"}, x509.ExtKeyUsageClientAuth)
	strangeProxy := issue(t, proxyCA, pkix.Name{CommonName: "someone-else"}, x509.ExtKeyUsageClientAuth)
	bobHeaders := http.Header{"X-Remote-User": {"bob"}, "X-Remote-Group": {"g1", "g2"}, "X-Remote-Extra-Scopes%2fa": {"x"}}

	tests := []struct {
		name     string
		cert     *tls.Certificate
		header   http.Header
		want     int
		wantUser string
	}{
		{name: "client certificate of the client CA", cert: &alice, want: http.StatusOK, wantUser: "alice"},
		{name: "a server certificate is no client certificate", cert: &aliceServing, want: http.StatusUnauthorized},
		{name: "client certificate of another CA", cert: &mallory, want: http.StatusUnauthorized},
		{name: "front proxy with the user in headers", cert: &proxy, header: bobHeaders, want: http.StatusOK, wantUser: "bob"},
		{name: "front proxy not among the allowed names", cert: &strangeProxy, header: bobHeaders, want: http.StatusUnauthorized},
		{name: "front proxy without a user header", cert: &proxy, want: http.StatusUnauthorized},
		// mallory may not read /metrics: believing the header would answer 403.
		{name: "headers from a client certificate are not believed", cert: &alice, header: http.Header{"X-Remote-User": {"mallory"}}, want: http.StatusOK, wantUser: "alice"},
		{name: "headers without a certificate are not believed", header: bobHeaders, want: http.StatusUnauthorized},
		{name: "a bearer token still works beside certificates", header: http.Header{"Authorization": {"Bearer scraper-token"}}, want: http.StatusOK, wantUser: "scraper"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, sars := api.lastReviews()
			before := len(sars)
			code, body := getWith(t, r.clientWith(t, tt.cert), r.base+"/metrics", tt.header)
			if code != tt.want {
				t.Fatalf("GET /metrics = %d %s, want %d", code, body, tt.want)
			}
			if tt.wantUser == "" {
				return
			}
			_, sars = api.lastReviews()
			if len(sars) == before {
				// Cached from an earlier case of the same user: nothing more to see.
				return
			}
			got := sars[len(sars)-1].Spec
			if got.User != tt.wantUser {
				t.Errorf("SubjectAccessReview for user %q, want %q", got.User, tt.wantUser)
			}
			if tt.cert != nil && !slices.Contains(got.Groups, "system:authenticated") {
				t.Errorf("certificate user %q has groups %v, without system:authenticated", got.User, got.Groups)
			}
			switch tt.wantUser {
			case "alice":
				if !slices.Contains(got.Groups, "monitoring") {
					t.Errorf("alice's groups %v lack her certificate's organization", got.Groups)
				}
			case "bob":
				if !slices.Contains(got.Groups, "g1") || !slices.Contains(got.Groups, "g2") || !slices.Equal(got.Extra["scopes/a"], []string{"x"}) {
					t.Errorf("bob's groups %v and extra %v, want g1, g2 and scopes/a=[x]", got.Groups, got.Extra)
				}
			}
		})
	}
}

func TestCertificateAuthenticationConfigErrors(t *testing.T) {
	dir := t.TempDir()
	_, caFile := newCA(t, dir, "ca")
	empty := filepath.Join(dir, "empty.crt")
	if err := os.WriteFile(empty, []byte("no certificate here"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{name: "client CA missing", mutate: func(c *Config) { c.ClientCAFile = filepath.Join(dir, "missing") }, wantErr: "--client-ca-file"},
		{name: "client CA without a certificate", mutate: func(c *Config) { c.ClientCAFile = empty }, wantErr: "--client-ca-file: no PEM certificate"},
		{name: "proxy CA without user headers", mutate: func(c *Config) { c.RequestHeader = RequestHeaderConfig{ClientCAFile: caFile} }, wantErr: "--requestheader-username-headers"},
		{name: "cipher suites without HTTP/2's", mutate: func(c *Config) { c.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384} }, wantErr: "--tls-cipher-suites"},
		{name: "negative HTTP/2 streams", mutate: func(c *Config) { c.HTTP2MaxStreamsPerConnection = -1 }, wantErr: "--http2-max-streams-per-connection"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(newFakeAPI())
			tt.mutate(&cfg)
			s, err := New(cfg)
			if err == nil {
				_ = s.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not name %q", err, tt.wantErr)
			}
		})
	}
}

func TestTLSVersionAndCipherSuites(t *testing.T) {
	cfg := testConfig(newFakeAPI())
	cfg.MinTLSVersion = tls.VersionTLS13
	r := start(t, mustNew(t, cfg))
	dial := func(max uint16, suites []uint16) error {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", r.server.Addr().String(), &tls.Config{RootCAs: serverRoots(t, r.server), MaxVersion: max, CipherSuites: suites})
		if err == nil {
			conn.Close()
		}
		return err
	}
	if err := dial(tls.VersionTLS12, nil); err == nil {
		t.Errorf("a TLS 1.2 client got through --tls-min-version=VersionTLS13")
	}
	if err := dial(tls.VersionTLS13, nil); err != nil {
		t.Errorf("a TLS 1.3 client: %v", err)
	}

	cfg = testConfig(newFakeAPI())
	cfg.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}
	r = start(t, mustNew(t, cfg))
	if err := dial(tls.VersionTLS12, []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}); err == nil {
		t.Errorf("a client offering only a suite outside --tls-cipher-suites got through")
	}
	if err := dial(tls.VersionTLS12, []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}); err != nil {
		t.Errorf("a client offering the configured suite: %v", err)
	}
}

// servedCertificate returns the certificate r serves to a client asking for name.
func servedCertificate(t *testing.T, addr, name string) *x509.Certificate {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, ServerName: name}) //nolint:gosec // the test reads the certificate, it does not trust it
	if err != nil {
		t.Fatalf("TLS handshake: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

func TestServingCertificateIsReloaded(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, first := writeKeyPair(t, dir, "serving")
	cfg := testConfig(newFakeAPI())
	cfg.CertFile, cfg.KeyFile = certFile, keyFile
	r := start(t, mustNew(t, cfg))
	if got := servedCertificate(t, r.server.Addr().String(), ""); !slices.Equal(got.Raw, first) {
		t.Fatal("server does not present --tls-cert-file")
	}

	// A rotation writes both files; the next handshakes present the new certificate.
	_, _, second := writeKeyPair(t, dir, "serving")
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := servedCertificate(t, r.server.Addr().String(), "")
		if slices.Equal(got.Raw, second) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rotated certificate was not served within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestReloadingKeepsTheLastGoodValue(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, first := writeKeyPair(t, dir, "serving")
	clock := &fakeClock{now: time.Now()}
	r, err := reloadingKeyPair("test pair", certFile, keyFile, clock.Now, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	// Within the check interval nothing is read again.
	_, _, second := writeKeyPair(t, dir, "serving")
	if got := r.get().Certificate[0]; !slices.Equal(got, first) {
		t.Fatal("reloaded before the check interval passed")
	}
	clock.Step(reloadCheckInterval)
	if got := r.get().Certificate[0]; !slices.Equal(got, second) {
		t.Fatal("not reloaded after the check interval")
	}
	// A half-written pair (garbage) and a missing file keep the last good certificate.
	if err := os.WriteFile(certFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock.Step(reloadCheckInterval)
	if got := r.get().Certificate[0]; !slices.Equal(got, second) {
		t.Fatal("a garbage certificate replaced the good one")
	}
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	clock.Step(reloadCheckInterval)
	if got := r.get().Certificate[0]; !slices.Equal(got, second) {
		t.Fatal("a missing key replaced the good certificate")
	}
}

func TestSNICertificates(t *testing.T) {
	dir := t.TempDir()
	ca, _ := newCA(t, dir, "sni-ca")
	write := func(name string, dns ...string) (string, string) {
		iss, err := ca.Issue(&x509.Certificate{Subject: pkix.Name{CommonName: name}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, DNSNames: dns})
		if err != nil {
			t.Fatal(err)
		}
		c, k := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		if err := os.WriteFile(c, iss.CertPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(k, iss.KeyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	fooCert, fooKey := write("foo", "foo.example.com")
	wildCert, wildKey := write("wild", "*.example.com")
	explicitCert, explicitKey := write("explicit", "foo.example.com")
	cfg := testConfig(newFakeAPI())
	cfg.SNICertKeys = []SNICertKey{
		{CertFile: fooCert, KeyFile: fooKey},
		{CertFile: wildCert, KeyFile: wildKey},
		// Explicit patterns win over the names a certificate holds.
		{CertFile: explicitCert, KeyFile: explicitKey, Names: []string{"bar.example.com", "foo.example.com"}},
	}
	r := start(t, mustNew(t, cfg))
	addr := r.server.Addr().String()
	for name, want := range map[string]string{
		"foo.example.com": "explicit",
		"bar.example.com": "explicit",
		"baz.example.com": "wild",
		"a.b.example.com": r.server.certs.def().Leaf.Subject.CommonName, // a wildcard matches one label
		"":                r.server.certs.def().Leaf.Subject.CommonName,
	} {
		if got := servedCertificate(t, addr, name).Subject.CommonName; got != want {
			t.Errorf("server name %q: served %q, want %q", name, got, want)
		}
	}
}

func TestCertDirKeepsTheSelfSignedCertificate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	cfg := testConfig(newFakeAPI())
	cfg.CertDir, cfg.PairName = dir, "cloud-controller-manager"
	first := mustNew(t, cfg)
	der := first.certs.def().Certificate[0]
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dir, "cloud-controller-manager.key"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", info.Mode().Perm())
	}
	second := mustNew(t, cfg)
	defer second.Close()
	if !slices.Equal(second.certs.def().Certificate[0], der) {
		t.Error("the second start made a new certificate instead of using the one in --cert-dir")
	}
}

func TestHTTP2AndPortSharing(t *testing.T) {
	cfg := testConfig(newFakeAPI())
	cfg.DisableHTTP2 = true
	r := start(t, mustNew(t, cfg))
	c := r.clientWith(t, nil)
	c.Transport.(*http.Transport).ForceAttemptHTTP2 = true
	resp, err := c.Get(r.base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 1 {
		t.Errorf("--disable-http2-serving: served %s", resp.Proto)
	}

	cfg = testConfig(newFakeAPI())
	cfg.PermitPortSharing = true
	a := mustNew(t, cfg)
	defer a.Close()
	cfg.Port = a.Addr().(*net.TCPAddr).Port
	b, err := New(cfg)
	if err != nil {
		t.Fatalf("a second server on port %d with --permit-port-sharing: %v", cfg.Port, err)
	}
	b.Close()
}

// TestClientCAFromTheCluster authenticates with a CA given as content (the cluster's
// extension-apiserver-authentication ConfigMap) instead of a file.
func TestClientCAFromTheCluster(t *testing.T) {
	ca, _ := newCA(t, t.TempDir(), "cluster-ca")
	api := newFakeAPI()
	api.allow("kubelet", "get", "/metrics")
	cfg := testConfig(api)
	cfg.Gatherer = prometheus.NewRegistry()
	cfg.ClientCA = ca.PEM()
	r := start(t, mustNew(t, cfg))
	kubelet := issue(t, ca, pkix.Name{CommonName: "kubelet"}, x509.ExtKeyUsageClientAuth)
	if code, body := getWith(t, r.clientWith(t, &kubelet), r.base+"/metrics", nil); code != http.StatusOK {
		t.Errorf("GET /metrics with the cluster CA's client certificate = %d %s", code, body)
	}
	cfg = testConfig(api)
	cfg.ClientCA = []byte("no certificate")
	if s, err := New(cfg); err == nil || !strings.Contains(err.Error(), "--client-ca-file from the cluster's extension-apiserver-authentication ConfigMap") {
		if s != nil {
			_ = s.Close()
		}
		t.Errorf("New with a CA bundle that holds no certificate = %v", err)
	}
}

// TestOneCAForProxiesAndClients: a certificate of a CA that signs both front proxies and
// clients, whose name is not an allowed proxy's, authenticates as a client, as upstream's
// chain of authenticators does.
func TestOneCAForProxiesAndClients(t *testing.T) {
	dir := t.TempDir()
	ca, caFile := newCA(t, dir, "shared-ca")
	api := newFakeAPI()
	api.allow("carol", "get", "/metrics")
	cfg := testConfig(api)
	cfg.Gatherer = prometheus.NewRegistry()
	cfg.ClientCAFile = caFile
	cfg.RequestHeader = RequestHeaderConfig{ClientCAFile: caFile, AllowedNames: []string{"front-proxy"}, UsernameHeaders: []string{"X-Remote-User"}}
	r := start(t, mustNew(t, cfg))
	carol := issue(t, ca, pkix.Name{CommonName: "carol"}, x509.ExtKeyUsageClientAuth)
	if code, body := getWith(t, r.clientWith(t, &carol), r.base+"/metrics", http.Header{"X-Remote-User": {"mallory"}}); code != http.StatusOK {
		t.Errorf("GET /metrics as carol = %d %s, want 200", code, body)
	}
}

func TestTLS13IgnoresCipherSuites(t *testing.T) {
	cfg := testConfig(newFakeAPI())
	cfg.MinTLSVersion = tls.VersionTLS13
	cfg.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384} // no HTTP/2 suite: irrelevant at TLS 1.3
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New with TLS 1.3 and cipher suites: %v", err)
	}
	_ = s.Close()
}

func TestSNIByAddress(t *testing.T) {
	dir := t.TempDir()
	ca, _ := newCA(t, dir, "ip-ca")
	iss, err := ca.Issue(&x509.Certificate{Subject: pkix.Name{CommonName: "by-address"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "ip.crt"), filepath.Join(dir, "ip.key")
	if err := os.WriteFile(certFile, iss.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, iss.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(newFakeAPI())
	cfg.SNICertKeys = []SNICertKey{{CertFile: certFile, KeyFile: keyFile, Names: []string{"127.0.0.1"}}}
	r := start(t, mustNew(t, cfg))
	if got := servedCertificate(t, r.server.Addr().String(), "").Subject.CommonName; got != "by-address" {
		t.Errorf("a client of 127.0.0.1 sending no name got %q, want the certificate of pattern 127.0.0.1", got)
	}
}
