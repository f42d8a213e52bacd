package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/cloudtest"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
)

// TestConformance runs the conformance suite against the provider and a real local
// cloud serving HTTP, with every fault the suite knows: a provider built against a
// closed port, a rate limit and injected latency.
func TestConformance(t *testing.T) {
	c := startRealCloud(t)
	cloudtest.Run(t, cloudtest.Setup{
		NewProvider:  func(context.Context) (cloud.Provider, error) { return c.provider, nil },
		Capabilities: cloudtest.AllCapabilities(),
		Instances:    adminInstances{c.admin},
		Failing: func(context.Context, cloud.Provider) (cloud.Provider, func(context.Context) error, error) {
			p, err := New(strings.NewReader(fmt.Sprintf("endpoint: http://%s\ntoken: x\n", closedAddress(t))))
			return p, nil, err
		},
		Throttling: func(ctx context.Context, p cloud.Provider) (cloud.Provider, func(context.Context) error, error) {
			end, err := putFault(ctx, c.admin, api.Fault{Operation: "*", RateLimit: &api.RateLimit{QPS: 0.001, Burst: 1}})
			if err == nil {
				err = drain(ctx, c.admin)
			}
			return p, end, err
		},
		Slow: func(ctx context.Context, p cloud.Provider) (cloud.Provider, func(context.Context) error, error) {
			end, err := putFault(ctx, c.admin, api.Fault{Operation: "*", Latency: &api.Latency{Fixed: api.Duration{Duration: time.Minute}}})
			return p, end, err
		},
	})
}

// adminInstances makes and removes test instances through the local cloud's API.
type adminInstances struct{ admin *client.Client }

func (a adminInstances) CreateInstance(ctx context.Context, nameHint string) (string, error) {
	inst, err := a.admin.CreateInstance(ctx, api.InstanceSpec{Name: nameHint, Labels: map[string]string{"example.com/pool": "conformance"}})
	if err != nil {
		return "", err
	}
	return inst.Name, nil
}

func (a adminInstances) DeleteInstance(ctx context.Context, nodeName string) error {
	inst, err := a.admin.GetInstanceByName(ctx, nodeName)
	if err != nil {
		return err
	}
	return a.admin.DeleteInstance(ctx, inst.ID)
}

func (a adminInstances) StopInstance(ctx context.Context, nodeName string) error {
	inst, err := a.admin.GetInstanceByName(ctx, nodeName)
	if err != nil {
		return err
	}
	_, err = a.admin.StopInstance(ctx, inst.ID)
	return err
}

// putFault installs f and returns the function that removes it.
func putFault(ctx context.Context, admin *client.Client, f api.Fault) (func(context.Context) error, error) {
	end := func(ctx context.Context) error { return admin.DeleteFault(ctx, f.Operation) }
	if err := admin.PutFault(ctx, f); err != nil {
		return end, fmt.Errorf("installing fault %+v: %w", f, err)
	}
	return end, nil
}

// drain spends the rate limit's single token, so that the next call is throttled.
func drain(ctx context.Context, admin *client.Client) error {
	for range 5 {
		_, err := admin.ListRoutes(ctx, "drain")
		if cloud.IsThrottled(err) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return errors.New("the rate limit never throttled")
}

// closedAddress returns a loopback address nothing listens on.
func closedAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
