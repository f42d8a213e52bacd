package local

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/cloudtest"
	"github.com/nephele-dev/nephele/localcloud/api"
)

// TestConformance runs nephele's conformance suite against the provider over a real
// local cloud, with every capability and every fault the suite can induce, made with
// the cloud's own knobs.
func TestConformance(t *testing.T) {
	c := startRealCloud(t)
	admin := c.admin
	instanceID := func(ctx context.Context, nodeName string) (string, error) {
		inst, err := admin.GetInstanceByName(ctx, nodeName)
		if err != nil {
			return "", err
		}
		return inst.ID, nil
	}
	// knob installs a fault rule for every operation and returns the provider under
	// test, which sees it, and the function that removes it.
	knob := func(f api.Fault) cloudtest.Fault {
		return func(ctx context.Context, p cloud.Provider) (cloud.Provider, func(context.Context) error, error) {
			f.Operation = "*"
			if err := admin.PutFault(ctx, f); err != nil {
				return nil, nil, err
			}
			return p, func(ctx context.Context) error { return admin.DeleteFault(ctx, "*") }, nil
		}
	}
	throttle := func(ctx context.Context, p cloud.Provider) (cloud.Provider, func(context.Context) error, error) {
		// The bucket holds at least one token; one call takes it, and the refill is
		// far slower than the suite, so every later call is refused.
		faulty, end, err := knob(api.Fault{RateLimit: &api.RateLimit{QPS: 0.001, Burst: 1}})(ctx, p)
		if err != nil {
			return nil, nil, err
		}
		r, _ := p.Routes()
		if _, err := r.ListRoutes(ctx, cloudtest.DefaultClusterName); err != nil {
			_ = end(ctx)
			return nil, nil, fmt.Errorf("taking the rate limit's only token: %w", err)
		}
		return faulty, end, nil
	}

	rep := cloudtest.Run(t, cloudtest.Setup{
		NewProvider:  func(context.Context) (cloud.Provider, error) { return c.provider, nil },
		Capabilities: cloudtest.AllCapabilities(),
		Instances: cloudtest.InstanceFuncs{
			Create: func(ctx context.Context, hint string) (string, error) {
				inst, err := admin.CreateInstance(ctx, api.InstanceSpec{Name: hint, Labels: map[string]string{"example.com/suite": "conformance"}})
				if err != nil {
					return "", err
				}
				return inst.Name, nil
			},
			Delete: func(ctx context.Context, nodeName string) error {
				id, err := instanceID(ctx, nodeName)
				if err != nil {
					return err
				}
				return admin.DeleteInstance(ctx, id)
			},
			Stop: func(ctx context.Context, nodeName string) error {
				id, err := instanceID(ctx, nodeName)
				if err != nil {
					return err
				}
				_, err = admin.StopInstance(ctx, id)
				return err
			},
		},
		Failing:    knob(api.Fault{Outage: true}),
		Throttling: throttle,
		Slow:       knob(api.Fault{Latency: &api.Latency{Fixed: api.Duration{Duration: time.Minute}}}),
	})

	passed, failed, skipped := rep.Counts()
	if failed != 0 || skipped != 0 {
		var sb strings.Builder
		_ = rep.WriteText(&sb)
		t.Errorf("conformance: %d passed, %d failed, %d skipped; want every clause passed:\n%s", passed, failed, skipped, sb.String())
	}

	// The suite removes what it made.
	ctx := context.Background()
	if insts, err := admin.ListAllInstances(ctx, 0); err != nil || len(insts) != 0 {
		t.Errorf("instances left after the suite: %d, %v", len(insts), err)
	}
	if lbs, err := admin.ListLoadBalancers(ctx, ""); err != nil || len(lbs) != 0 {
		t.Errorf("load balancers left after the suite: %d, %v", len(lbs), err)
	}
	if rs, err := admin.ListRoutes(ctx, cloudtest.DefaultClusterName); err != nil || len(rs) != 0 {
		t.Errorf("routes left after the suite: %v, %v", rs, err)
	}
}
