package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/nephele-dev/nephele/cloud"

	"example.com/cloud-provider-example/examplecloud"
)

// Name is the provider's registered name and the scheme of its provider IDs.
const Name = "example"

// Config is the cloud config (--cloud-config), a JSON document:
//
//	{
//	  "region": "ex-central-1",
//	  "stateFile": "/var/lib/example-cloud/state.json",
//	  "instances": [{"name": "node-1", "zone": "ex-central-1a", "type": "ex.large"}]
//	}
type Config struct {
	// Region is the cloud region the cluster runs in. Required.
	Region string `json:"region"`
	// StateFile is where the example cloud keeps its state; empty keeps it in memory,
	// which is lost when the process ends.
	StateFile string `json:"stateFile,omitempty"`
	// Instances are created at start unless an instance of that name exists: a toy
	// cloud has no console to create machines in.
	Instances []examplecloud.InstanceSpec `json:"instances,omitempty"`
}

// LoadConfig reads a cloud config strictly: unknown fields and trailing data are errors.
func LoadConfig(r io.Reader) (*Config, error) {
	if r == nil {
		return nil, errors.New("example cloud config: no --cloud-config given; at least the region is required")
	}
	raw, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("example cloud config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("example cloud config: %w", err)
	}
	if dec.More() {
		return nil, errors.New("example cloud config: trailing data after the JSON document")
	}
	if cfg.Region == "" {
		return nil, errors.New("example cloud config: region is required")
	}
	return &cfg, nil
}

// Register adds the provider to r under Name.
func Register(r *cloud.Registry) error { return r.Register(Name, New) }

// New is the provider's cloud.Factory: it reads the cloud config, opens the region and
// creates the configured instances that do not exist yet.
func New(config io.Reader) (cloud.Provider, error) {
	cfg, err := LoadConfig(config)
	if err != nil {
		return nil, err
	}
	c, err := examplecloud.Open(cfg.StateFile, cfg.Region)
	if err != nil {
		return nil, err
	}
	for _, spec := range cfg.Instances {
		_, err := c.CreateInstance(context.Background(), spec)
		if err != nil && examplecloud.Code(err) != http.StatusConflict {
			return nil, fmt.Errorf("example cloud config: creating instance %s: %w", spec.Name, err)
		}
	}
	return NewForCloud(c), nil
}

// Provider is the example cloud's cloud.Provider. It has every capability.
type Provider struct {
	cloud *examplecloud.Cloud
}

var (
	_ cloud.Provider       = (*Provider)(nil)
	_ cloud.Instances      = instances{}
	_ cloud.InstanceLister = instances{}
	_ cloud.LoadBalancers  = loadBalancers{}
	_ cloud.Routes         = routes{}
)

// NewForCloud returns the provider for an open region, for tests and tools that own
// the cloud.
func NewForCloud(c *examplecloud.Cloud) *Provider { return &Provider{cloud: c} }

// ProviderName implements cloud.Provider.
func (p *Provider) ProviderName() string { return Name }

// Instances implements cloud.Provider.
func (p *Provider) Instances() (cloud.Instances, bool) { return instances{p.cloud}, true }

// InstanceLister implements cloud.Provider.
func (p *Provider) InstanceLister() (cloud.InstanceLister, bool) { return instances{p.cloud}, true }

// LoadBalancers implements cloud.Provider.
func (p *Provider) LoadBalancers() (cloud.LoadBalancers, bool) { return loadBalancers{p.cloud}, true }

// Routes implements cloud.Provider.
func (p *Provider) Routes() (cloud.Routes, bool) { return routes{p.cloud}, true }

// mapError turns an API error about the object the call asked for into the contract's
// errors. notFound says whether a 404 means that object is gone; callers pass false
// when a 404 could be about something else.
func mapError(err error, notFound bool, format string, args ...any) error {
	if err == nil {
		return nil
	}
	what := fmt.Sprintf(format, args...)
	var apiErr *examplecloud.APIError
	if !errors.As(err, &apiErr) {
		// Context errors and anything that is not an answer: temporary.
		return fmt.Errorf("%s: %w", what, err)
	}
	switch apiErr.Code {
	case http.StatusNotFound:
		if notFound {
			return fmt.Errorf("%s: %w: %w", what, err, cloud.ErrNotFound)
		}
	case http.StatusTooManyRequests:
		return cloud.Throttled(apiErr.RetryAfter, fmt.Errorf("%s: %w", what, err))
	case http.StatusBadRequest:
		return fmt.Errorf("%s: %w: %w", what, err, cloud.ErrInvalid)
	}
	return fmt.Errorf("%s: %w", what, err)
}
