package provider_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/cloudtest"

	"example.com/cloud-provider-example/examplecloud"
	"example.com/cloud-provider-example/provider"
)

// TestConformance proves the provider against nephele's conformance suite: every clause
// of the provider contract, with test instances made through the cloud's API and the
// cloud's fault knobs for outages, throttling and latency.
func TestConformance(t *testing.T) {
	c, err := examplecloud.Open(filepath.Join(t.TempDir(), "state.json"), "ex-test-1")
	if err != nil {
		t.Fatal(err)
	}
	cloudtest.Run(t, cloudtest.Setup{
		NewProvider:  func(context.Context) (cloud.Provider, error) { return provider.NewForCloud(c), nil },
		Capabilities: cloudtest.AllCapabilities(),
		Instances:    factory{c},
		Failing:      withFaults(c, examplecloud.Faults{Outage: true}),
		Throttling:   withFaults(c, examplecloud.Faults{Throttle: 5 * time.Second}),
		Slow:         withFaults(c, examplecloud.Faults{Latency: time.Minute}),
	})
}

// factory makes test instances through the example cloud's API.
type factory struct{ c *examplecloud.Cloud }

func (f factory) CreateInstance(ctx context.Context, name string) (string, error) {
	inst, err := f.c.CreateInstance(ctx, examplecloud.InstanceSpec{Name: name, Tags: map[string]string{"pool": "conformance"}})
	if err != nil {
		return "", err
	}
	return inst.Name, nil
}

func (f factory) DeleteInstance(ctx context.Context, name string) error {
	inst, err := f.c.FindInstance(ctx, name)
	if err != nil {
		return err
	}
	return f.c.DeleteInstance(ctx, inst.ID)
}

func (f factory) StopInstance(ctx context.Context, name string) error {
	inst, err := f.c.FindInstance(ctx, name)
	if err != nil {
		return err
	}
	return f.c.StopInstance(ctx, inst.ID)
}

// withFaults returns a cloudtest.Fault that turns the cloud's fault knobs to faults
// and back.
func withFaults(c *examplecloud.Cloud, faults examplecloud.Faults) cloudtest.Fault {
	return func(_ context.Context, p cloud.Provider) (cloud.Provider, func(context.Context) error, error) {
		c.SetFaults(faults)
		return p, func(context.Context) error { c.SetFaults(examplecloud.Faults{}); return nil }, nil
	}
}
