package dataplane

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// Protocol is a listener's transport protocol.
type Protocol string

// Protocols.
const (
	TCP Protocol = "TCP"
	UDP Protocol = "UDP"
)

// Port is one listener: VIP:Port forwards to each backend's address:NodePort.
type Port struct {
	Protocol Protocol
	Port     uint16
	NodePort uint16
}

// Backend is one node to forward to.
type Backend struct {
	NodeName string
	Addr     netip.Addr
}

// LoadBalancer is the data plane's view of a load balancer.
type LoadBalancer struct {
	Name     string
	VIP      netip.Addr
	Ports    []Port
	Backends []Backend
	// HealthCheckNodePort, when not 0, switches health checks to HTTP GET /healthz on it.
	HealthCheckNodePort uint16
	// SourceRanges are the client prefixes allowed; empty allows all.
	SourceRanges []netip.Prefix
	// AffinityTimeout, when positive, keeps a client address on one backend
	// (sessionAffinity ClientIP): the Kernel plane sends its new connections to the
	// backend its last one went to, when that was less than this long ago; the Proxy
	// picks the backend by a hash of the address, stable while the healthy backends are.
	// Zero spreads connections over the backends.
	AffinityTimeout time.Duration
}

// Health is a backend's health.
type Health int

// Health values.
const (
	HealthUnknown Health = iota
	HealthHealthy
	HealthUnhealthy
)

// BackendHealth is the health of one backend across the load balancer's checks.
type BackendHealth struct {
	Backend Backend
	Health  Health
}

// ConflictError reports that a listener's address is in use by something else.
type ConflictError struct {
	Protocol Protocol
	Addr     netip.AddrPort
	Err      error
}

// Error implements error.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s %s is already in use: %v", e.Protocol, e.Addr, e.Err)
}

// Unwrap returns the listen error.
func (e *ConflictError) Unwrap() error { return e.Err }

// Config configures a Plane. Zero durations take the defaults.
type Config struct {
	// HealthInterval is the time between two health checks of a backend (default 2s).
	HealthInterval time.Duration
	// HealthTimeout bounds one health check (default 1s).
	HealthTimeout time.Duration
	// DisableHealthChecks treats every backend as healthy, for clouds whose node
	// addresses lead nowhere.
	DisableHealthChecks bool
	// DialTimeout bounds a connection attempt to a backend (default 3s).
	DialTimeout time.Duration
	// UDPIdleTimeout ends a UDP session after this long without traffic (default 30s).
	UDPIdleTimeout time.Duration
	// Logger receives data plane events.
	Logger logr.Logger
	// Metrics, when set, receives the connection and rejection counters.
	Metrics prometheus.Registerer
}

func (c *Config) defaults() {
	if c.HealthInterval <= 0 {
		c.HealthInterval = 2 * time.Second
	}
	if c.HealthTimeout <= 0 {
		c.HealthTimeout = time.Second
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 3 * time.Second
	}
	if c.UDPIdleTimeout <= 0 {
		c.UDPIdleTimeout = 30 * time.Second
	}
}

// Plane is a load balancer data plane: Proxy (user space, ipMode Proxy) or Kernel (the
// machine's kernel routes connections to the hosts unchanged, ipMode VIP).
type Plane interface {
	// Apply makes lb live, replacing its previous configuration, and calls commit
	// (which may be nil) once the new configuration can serve: when commit fails, or
	// the configuration cannot be made live, the previous one keeps serving.
	Apply(ctx context.Context, lb LoadBalancer, commit func() error) error
	// Remove stops the named load balancer; an unknown name is no error.
	Remove(ctx context.Context, name string) error
	// Health returns the health of each backend of the named load balancer, in backend
	// order, and false when the load balancer is not running.
	Health(name string) ([]BackendHealth, bool)
	// Close stops every load balancer's health checks; a Proxy also closes its
	// listeners.
	Close()
}

// The planes.
var (
	_ Plane = (*Proxy)(nil)
	_ Plane = (*Kernel)(nil)
)
