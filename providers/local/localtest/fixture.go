package localtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/conformance"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/providers/local"
)

// Fixture makes test instances through the local cloud's API (the endpoint and token
// of the provider's own cloud config) and induces throttling and latency with its fault
// knobs, putting the rules back afterwards. The failing cloud is a provider built
// against a closed port, which disturbs nothing.
func Fixture(cfg local.Config) (conformance.Fixture, error) {
	c, err := client.New(strings.TrimSpace(cfg.Endpoint), cfg.Token, client.WithUserAgent("nephele-conformance"), client.WithCA(cfg.CA))
	if err != nil {
		return conformance.Fixture{}, err
	}
	fx := conformance.Fixture{
		Instances: localInstances{c},
		Failing: func(context.Context, cloud.Provider) (cloud.Provider, func(context.Context) error, error) {
			addr, err := closedLoopbackAddress()
			if err != nil {
				return nil, nil, err
			}
			p, err := local.NewFromConfig(local.Config{Endpoint: "http://" + addr, Token: "conformance", RequestTimeout: cfg.RequestTimeout})
			return p, nil, err
		},
	}
	fx.Throttling = func(ctx context.Context, p cloud.Provider) (cloud.Provider, func(context.Context) error, error) {
		// One token that the drain takes: every call after it is throttled for
		// the next thousand seconds, or until the fault ends.
		end, err := withLocalFault(ctx, c, api.Fault{Operation: "*", RateLimit: &api.RateLimit{QPS: 0.001, Burst: 1}})
		if err != nil {
			return nil, end, err
		}
		for range 5 {
			_, err := c.ListRoutes(ctx, "nephele-conformance-drain")
			if cloud.IsThrottled(err) {
				return p, end, nil
			}
			if err != nil {
				return nil, end, err
			}
		}
		return nil, end, errors.New("the local cloud's rate limit never throttled")
	}
	fx.Slow = func(ctx context.Context, p cloud.Provider) (cloud.Provider, func(context.Context) error, error) {
		end, err := withLocalFault(ctx, c, api.Fault{Operation: "*", Latency: &api.Latency{Fixed: api.Duration{Duration: time.Minute}}})
		return p, end, err
	}
	return fx, nil
}

// withLocalFault adds rule f to the local cloud's fault rules and returns the
// function that puts the rules back as they were.
func withLocalFault(ctx context.Context, c *client.Client, f api.Fault) (func(context.Context) error, error) {
	saved, err := c.Faults(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the local cloud's fault rules: %w", err)
	}
	restore := func(ctx context.Context) error {
		if err := c.SetFaults(ctx, saved); err != nil {
			return fmt.Errorf("restoring the local cloud's fault rules: %w", err)
		}
		return nil
	}
	if err := c.PutFault(ctx, f); err != nil {
		return restore, fmt.Errorf("adding fault rule for %q: %w", f.Operation, err)
	}
	return restore, nil
}

// localInstances creates, stops and deletes instances through the local cloud's API.
type localInstances struct{ c *client.Client }

func (l localInstances) CreateInstance(ctx context.Context, nameHint string) (string, error) {
	inst, err := l.c.CreateInstance(ctx, api.InstanceSpec{Name: nameHint, Labels: map[string]string{"nephele.dev/conformance": "true"}})
	if err != nil {
		return "", err
	}
	return inst.Name, nil
}

func (l localInstances) DeleteInstance(ctx context.Context, nodeName string) error {
	inst, err := l.c.GetInstanceByName(ctx, nodeName)
	if err != nil {
		return err
	}
	return l.c.DeleteInstance(ctx, inst.ID)
}

func (l localInstances) StopInstance(ctx context.Context, nodeName string) error {
	inst, err := l.c.GetInstanceByName(ctx, nodeName)
	if err != nil {
		return err
	}
	_, err = l.c.StopInstance(ctx, inst.ID)
	return err
}

// closedLoopbackAddress returns a loopback address nothing listens on a moment ago.
func closedLoopbackAddress() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}
