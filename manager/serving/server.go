package serving

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"
	"k8s.io/client-go/kubernetes"
)

// DefaultShutdownTimeout is how long Serve waits for requests in flight to finish once
// its context is done, when Config.ShutdownTimeout is zero.
const DefaultShutdownTimeout = 5 * time.Second

// Config configures a Server. Fields mirror the upstream controller-manager flags named
// in their comments.
type Config struct {
	// BindAddress is --bind-address: the IP address to listen on; empty or "0.0.0.0"
	// means every interface.
	BindAddress string
	// Port is --secure-port. Upstream treats 0 as "do not serve": that is for the caller
	// to honour by not calling New. Here 0 asks the kernel for a free port, which Addr
	// reports; tests use it.
	Port int
	// CertFile and KeyFile are --tls-cert-file and --tls-private-key-file: a PEM
	// certificate (chain) and its private key, read by New and again whenever they
	// change. When both are empty the server uses a self-signed certificate: kept in
	// CertDir when that is set, else made in memory.
	CertFile, KeyFile string
	// CertDir is --cert-dir: where the self-signed certificate is written
	// (PairName.crt and .key) and found again at the next start.
	CertDir string
	// PairName names the files in CertDir; empty is "serving".
	PairName string
	// SNICertKeys are --tls-sni-cert-key: certificates chosen by the name the client
	// asks for, read again when they change.
	SNICertKeys []SNICertKey
	// MinTLSVersion is --tls-min-version (a crypto/tls version); zero is TLS 1.2.
	MinTLSVersion uint16
	// CipherSuites is --tls-cipher-suites (crypto/tls IDs); empty is Go's defaults.
	CipherSuites []uint16
	// CurvePreferences is --tls-curve-preferences; empty is Go's defaults.
	CurvePreferences []tls.CurveID
	// DisableHTTP2 is --disable-http2-serving: HTTP/1.1 only.
	DisableHTTP2 bool
	// HTTP2MaxStreamsPerConnection is --http2-max-streams-per-connection; zero is Go's
	// default.
	HTTP2MaxStreamsPerConnection int
	// PermitPortSharing is --permit-port-sharing: bind with SO_REUSEPORT, so that
	// another process can listen on the same port.
	PermitPortSharing bool
	// ClientCAFile is --client-ca-file: client certificates it signed authenticate as
	// their common name, with their organizations as groups. Read again when it changes.
	ClientCAFile string
	// ClientCA is that CA bundle (PEM) when it comes from the cluster instead of a file
	// (extension-apiserver-authentication's client-ca-file), used when ClientCAFile is
	// empty.
	ClientCA []byte
	// RequestHeader is --requestheader-*: front-proxy authentication.
	RequestHeader RequestHeaderConfig
	// TokenCacheTTL, AllowedCacheTTL and DeniedCacheTTL are
	// --authentication-token-webhook-cache-ttl and
	// --authorization-webhook-cache-authorized-ttl / -unauthorized-ttl; zero is the
	// default (10s, 10s and 1s; a rejected token is kept at most 1s).
	TokenCacheTTL, AllowedCacheTTL, DeniedCacheTTL time.Duration
	// Authn is the client that asks the kube-apiserver to review bearer tokens
	// (TokenReview) and to authorize requests (SubjectAccessReview): upstream's
	// --authentication-kubeconfig and --authorization-kubeconfig. Required.
	Authn kubernetes.Interface
	// AlwaysAllowPaths is --authorization-always-allow-paths: requests for these paths
	// skip authentication and authorization. An entry ending in "*" matches every path
	// with that prefix. The health endpoints (/healthz, /livez, /readyz and their
	// single-check sub-paths) need no authentication whatever this holds.
	AlwaysAllowPaths []string
	// Gatherer provides /metrics. When nil there is no /metrics.
	Gatherer prometheus.Gatherer
	// EnableProfiling is --profiling: serve /debug/pprof/*.
	EnableProfiling bool
	// ShutdownTimeout bounds how long Serve waits for requests in flight after its
	// context is done; zero means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Logger receives the server's logs; the zero Logger discards them.
	Logger logr.Logger
}

func (c Config) pairName() string { return cmp.Or(c.PairName, "serving") }

// listen listens on addr, with SO_REUSEPORT when sharePort is set (Go sets SO_REUSEADDR
// on every listener already, which is what upstream's --permit-address-sharing asks).
func listen(ctx context.Context, addr string, sharePort bool) (net.Listener, error) {
	lc := net.ListenConfig{}
	if sharePort {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var sockErr error
			if err := c.Control(func(fd uintptr) {
				sockErr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			}); err != nil {
				return err
			}
			if sockErr != nil {
				return fmt.Errorf("setting SO_REUSEPORT (--permit-port-sharing): %w", sockErr)
			}
			return nil
		}
	}
	return lc.Listen(ctx, "tcp", addr)
}

// Server is the manager's secure HTTPS server. Build it with New and run it with Serve.
type Server struct {
	listener        net.Listener
	http            *http.Server
	certs           *servingCerts
	auth            *delegatedAuth
	health          healthChecks
	shutdownTimeout time.Duration
	logger          logr.Logger

	mu    sync.Mutex
	state serverState
}

type serverState int

const (
	stateNew serverState = iota
	stateServing
	stateDone
)

// New validates cfg, loads or generates the serving certificate and binds the listening
// socket, so that a bad flag or a port in use is reported before anything else starts.
// The caller must call Serve, or Close to release the port.
func New(cfg Config) (*Server, error) {
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("--secure-port %d: must be between 0 and 65535", cfg.Port)
	}
	var bindIP net.IP
	if cfg.BindAddress != "" {
		if bindIP = net.ParseIP(cfg.BindAddress); bindIP == nil {
			return nil, fmt.Errorf("--bind-address %q: not an IP address", cfg.BindAddress)
		}
	}
	if cfg.Authn == nil {
		return nil, errors.New("serving: no client for delegated authentication and authorization")
	}
	if err := validateAlwaysAllowPaths(cfg.AlwaysAllowPaths); err != nil {
		return nil, err
	}
	if cfg.ShutdownTimeout < 0 {
		return nil, fmt.Errorf("serving: shutdown timeout %s is negative", cfg.ShutdownTimeout)
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}

	if cfg.HTTP2MaxStreamsPerConnection < 0 {
		return nil, fmt.Errorf("--http2-max-streams-per-connection %d: must be 0 (Go's default) or more", cfg.HTTP2MaxStreamsPerConnection)
	}

	minVersion := cmp.Or(cfg.MinTLSVersion, tls.VersionTLS12)
	if !cfg.DisableHTTP2 && len(cfg.CipherSuites) > 0 && minVersion < tls.VersionTLS13 &&
		!slices.Contains(cfg.CipherSuites, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256) &&
		!slices.Contains(cfg.CipherSuites, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) {
		// Go's HTTP/2 server refuses to start without one below TLS 1.3 (RFC 7540,
		// 9.2.2): say so here, naming the flags, instead of failing later in Serve.
		return nil, errors.New("--tls-cipher-suites: HTTP/2 requires TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 or TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 among them: add one, or set --disable-http2-serving")
	}

	certs, err := newServingCerts(cfg, bindIP, time.Now)
	if err != nil {
		return nil, err
	}
	certAuth, err := newCertAuth(cfg.ClientCAFile, cfg.ClientCA, cfg.RequestHeader, time.Now, cfg.Logger)
	if err != nil {
		return nil, err
	}
	ttls := cacheTTLs{token: cfg.TokenCacheTTL, allowed: cfg.AllowedCacheTTL, denied: cfg.DeniedCacheTTL}

	s := &Server{
		certs:           certs,
		auth:            newDelegatedAuth(cfg.Authn, certAuth, cfg.AlwaysAllowPaths, ttls, time.Now, cfg.Logger),
		shutdownTimeout: cfg.ShutdownTimeout,
		logger:          cfg.Logger,
	}
	mux := http.NewServeMux()
	for _, ep := range []string{endpointHealthz, endpointLivez, endpointReadyz} {
		mux.Handle("/"+ep, s.healthHandler(ep))
		mux.Handle("/"+ep+"/", s.singleCheckHandler(ep))
	}
	if cfg.Gatherer != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{
			ErrorLog:      promLog{cfg.Logger},
			ErrorHandling: promhttp.ContinueOnError,
		}))
	}
	if cfg.EnableProfiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}

	addr := net.JoinHostPort(cfg.BindAddress, strconv.Itoa(cfg.Port))
	ln, err := listen(context.Background(), addr, cfg.PermitPortSharing)
	if err != nil {
		return nil, fmt.Errorf("listening on %s (--bind-address, --secure-port): %w", addr, err)
	}
	s.listener = ln
	tlsConfig := &tls.Config{
		GetCertificate:   certs.getCertificate,
		MinVersion:       minVersion,
		CipherSuites:     cfg.CipherSuites,
		CurvePreferences: cfg.CurvePreferences,
		NextProtos:       []string{"h2", "http/1.1"},
	}
	if certAuth != nil {
		// Ask for a certificate but let the handshake through without one or with one
		// no CA here signed: the authenticators verify it against the CA of each (both
		// re-read when they change), and a bearer token can still authenticate.
		tlsConfig.ClientAuth = tls.RequestClientCert
	}
	s.http = &http.Server{
		Handler:           s.auth.wrap(mux),
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       90 * time.Second,
		// No WriteTimeout: a CPU profile streams for as long as it was asked to run.
		ErrorLog: newServerErrorLog(cfg.Logger),
	}
	if cfg.DisableHTTP2 {
		tlsConfig.NextProtos = []string{"http/1.1"}
		s.http.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	if cfg.HTTP2MaxStreamsPerConnection > 0 {
		s.http.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: cfg.HTTP2MaxStreamsPerConnection}
	}
	return s, nil
}

// Addr returns the address the server listens on, with the real port when Config.Port
// was 0.
func (s *Server) Addr() net.Addr { return s.listener.Addr() }

// Serve serves HTTPS until ctx is done, then stops accepting connections and waits up to
// the shutdown timeout for requests in flight; requests still running after that are cut
// off and logged. It returns nil after such a stop and an error when serving fails. A
// Server is served at most once.
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	if s.state != stateNew {
		s.mu.Unlock()
		return errors.New("serving: Serve called on a server that was already served or closed")
	}
	s.state = stateServing
	s.mu.Unlock()

	s.logger.Info("Serving securely", "address", s.listener.Addr().String())
	served := make(chan error, 1)
	go func() { served <- s.http.ServeTLS(s.listener, "", "") }()

	select {
	case err := <-served:
		s.setDone()
		return fmt.Errorf("serving on %s: %w", s.listener.Addr(), err)
	case <-ctx.Done():
	}

	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.shutdownTimeout)
	defer cancel()
	err := s.http.Shutdown(shutdownCtx)
	if err != nil {
		s.logger.Info("Requests still running after the shutdown timeout were cut off", "timeout", s.shutdownTimeout, "err", err)
		_ = s.http.Close() // the requests are abandoned; there is nothing else to do with this error
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.setDone()
		return fmt.Errorf("serving on %s: %w", s.listener.Addr(), err)
	}
	s.setDone()
	s.logger.Info("Stopped serving", "address", s.listener.Addr().String())
	return nil
}

// Close releases the port of a Server that will not be served. Once Serve has been
// called it does nothing: Serve stops when its context is done.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateNew {
		return nil
	}
	s.state = stateDone
	if err := s.listener.Close(); err != nil {
		return fmt.Errorf("closing listener on %s: %w", s.listener.Addr(), err)
	}
	return nil
}

func (s *Server) setDone() {
	s.mu.Lock()
	s.state = stateDone
	s.mu.Unlock()
}

// promLog passes promhttp's errors (a metric that could not be gathered) to the logger.
type promLog struct{ logger logr.Logger }

func (l promLog) Println(v ...any) {
	l.logger.Error(errors.New(strings.TrimSpace(fmt.Sprintln(v...))), "Gathering metrics")
}
