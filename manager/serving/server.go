package serving

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
	// certificate (chain) and its private key, read once by New. When both are empty,
	// New generates a self-signed certificate in memory.
	CertFile, KeyFile string
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

// Server is the manager's secure HTTPS server. Build it with New and run it with Serve.
type Server struct {
	listener        net.Listener
	http            *http.Server
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

	var cert tls.Certificate
	var err error
	if cfg.CertFile != "" || cfg.KeyFile != "" {
		cert, err = loadCertificate(cfg.CertFile, cfg.KeyFile)
	} else {
		cert, err = selfSignedCertificate(bindIP, time.Now())
	}
	if err != nil {
		return nil, err
	}

	s := &Server{
		auth:            newDelegatedAuth(cfg.Authn, cfg.AlwaysAllowPaths, time.Now, cfg.Logger),
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
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s (--bind-address, --secure-port): %w", addr, err)
	}
	s.listener = ln
	s.http = &http.Server{
		Handler: s.auth.wrap(mux),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			MinVersion:   tls.VersionTLS12,
			NextProtos:   []string{"h2", "http/1.1"},
		},
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       90 * time.Second,
		// No WriteTimeout: a CPU profile streams for as long as it was asked to run.
		ErrorLog: newServerErrorLog(cfg.Logger),
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
