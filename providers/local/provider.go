package local

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/localcloud/client"
)

// ProviderName is the provider's registered name and the scheme of its provider IDs.
const ProviderName = "local"

// userAgent identifies the provider's requests in the local cloud's logs.
const userAgent = "nephele-local-provider"

// Register adds the local provider to r under ProviderName.
func Register(r *cloud.Registry) error {
	return r.Register(ProviderName, New)
}

// New is the provider's cloud.Factory: it reads config (see Config) and returns the
// provider. It does not contact the cloud, so a manager starts while the cloud is down
// and its controllers retry.
func New(config io.Reader) (cloud.Provider, error) {
	cfg, err := LoadConfig(config)
	if err != nil {
		return nil, err
	}
	return NewFromConfig(*cfg)
}

// Provider is the local cloud's cloud.Provider. Every capability is present. It is
// safe for concurrent use.
type Provider struct {
	client   *client.Client
	pageSize int
	cfg      Config
}

var (
	_ cloud.Provider       = (*Provider)(nil)
	_ cloud.PlatformLister = (*Provider)(nil)
	_ cloud.Instances      = instances{}
	_ cloud.InstanceLister = instances{}
	_ cloud.LoadBalancers  = loadBalancers{}
	_ cloud.Routes         = routes{}
	_ cloud.VolumeProvider = (*Provider)(nil)
	_ cloud.Volumes        = volumes{}
)

// NewFromConfig returns the provider for cfg. Zero RequestTimeout, ListPageSize and
// ProxyHealthzPort take the defaults.
func NewFromConfig(cfg Config) (*Provider, error) {
	if cfg.Endpoint == "" {
		return nil, errors.New("local cloud provider: the endpoint is required")
	}
	if cfg.ProviderIDScheme == "" {
		cfg.ProviderIDScheme = ProviderName
	} else if err := checkScheme(cfg.ProviderIDScheme); err != nil {
		return nil, fmt.Errorf("local cloud provider: provider ID scheme: %w", err)
	}
	if cfg.ProxyHealthzPort == 0 {
		cfg.ProxyHealthzPort = cloud.KubeProxyHealthzPort
	}
	if p := cfg.ProxyHealthzPort; p != ProxyHealthzOff && (p < 1 || p > math.MaxUint16) {
		return nil, fmt.Errorf("local cloud provider: kube-proxy healthz port %d: want 1-65535, or %d for none", p, ProxyHealthzOff)
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.ListPageSize <= 0 {
		cfg.ListPageSize = DefaultListPageSize
	}
	if cfg.ListPageSize > maxListPageSize {
		return nil, fmt.Errorf("local cloud provider: list page size %d: at most %d", cfg.ListPageSize, maxListPageSize)
	}
	// The timeout bounds one request, body included; a timed-out request is a temporary
	// error, never a sign that anything is gone.
	c, err := client.New(strings.TrimSpace(cfg.Endpoint), cfg.Token, client.WithTimeout(cfg.RequestTimeout), client.WithUserAgent(userAgent),
		// The provider reads the VIP and the data plane's error from a write's answer,
		// never the thousands of backends it just sent.
		client.WithMinimalAnswers(), client.WithCA(cfg.CA))
	if err != nil {
		return nil, fmt.Errorf("local cloud provider: %w", err)
	}
	return &Provider{client: c, pageSize: cfg.ListPageSize, cfg: cfg}, nil
}

// Config returns the configuration the provider was built from, defaults applied: what
// a conformance fixture needs to reach the same cloud.
func (p *Provider) Config() Config { return p.cfg }

// ProviderName implements cloud.Provider.
func (p *Provider) ProviderName() string { return ProviderName }

// ProviderPlatforms implements cloud.PlatformLister: the scheme of its provider IDs.
func (p *Provider) ProviderPlatforms() []string { return []string{p.cfg.ProviderIDScheme} }

// ConfigFiles implements cloud.ConfigFileLister: the token and CA files the cloud config
// named, so that a rotated token is picked up without a restart.
func (p *Provider) ConfigFiles() []string { return slices.Clone(p.cfg.Files) }

// Instances implements cloud.Provider.
func (p *Provider) Instances() (cloud.Instances, bool) { return instances{p}, true }

// InstanceLister implements cloud.Provider.
func (p *Provider) InstanceLister() (cloud.InstanceLister, bool) { return instances{p}, true }

// LoadBalancers implements cloud.Provider.
func (p *Provider) LoadBalancers() (cloud.LoadBalancers, bool) { return loadBalancers{p}, true }

// Routes implements cloud.Provider.
func (p *Provider) Routes() (cloud.Routes, bool) {
	if p.cfg.NoRouteBatch {
		return routes{p}, true
	}
	return batchRoutes{routes{p}}, true
}

// wrapf prefixes err with what failed. When the cloud refused a request field (a 400
// answer) whose name its message does not already carry, the field is added, so the
// user can tell what to change.
func wrapf(err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	var ce *client.Error
	if errors.As(err, &ce) && ce.Field != "" && !strings.Contains(ce.Message, ce.Field) {
		msg += " (field " + ce.Field + ")"
	}
	return fmt.Errorf("%s: %w", msg, err)
}
