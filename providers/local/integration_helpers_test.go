package local

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/testkit/servertest"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/server"
)

// realCloud is a real local cloud serving HTTP on a loopback port, with an admin
// client for arranging state and faults, and the provider under test built from a
// cloud config file the way a manager builds it.
type realCloud struct {
	srv      *server.Server
	cfg      server.Config
	admin    *client.Client
	provider cloud.Provider
}

// startRealCloud starts a local cloud on a fresh state file and builds the provider
// with a tokenFile config and the given extra config lines.
func startRealCloud(t *testing.T, extraConfig ...string) *realCloud {
	t.Helper()
	return startRealCloudIn(t, testnet.LoopbackPrefix(108), extraConfig...)
}

// startRealCloudIn is startRealCloud with the cloud's instance range: load balancer
// backends must lie in it, so a test that serves backends before the cloud starts
// picks the range first (backendAddrs).
func startRealCloudIn(t *testing.T, instanceCIDR netip.Prefix, extraConfig ...string) *realCloud {
	t.Helper()
	cfg := server.Config{
		StatePath:    filepath.Join(t.TempDir(), "state.db"),
		Token:        "integration-token",
		VIPPool:      testnet.LoopbackPrefix(107),
		InstanceCIDR: instanceCIDR,
		FaultSeed:    1,
		Logger:       testlog.New(t, 1),
	}
	cfg.DataPlane.HealthInterval = 50 * time.Millisecond
	srv, admin := servertest.Start(t, cfg)
	tokenFile := writeFile(t, "token", cfg.Token+"\n")
	conf := fmt.Sprintf("endpoint: %s\ntokenFile: %s\nrequestTimeout: 20s\n%s", srv.URL(), tokenFile, strings.Join(extraConfig, "\n"))
	p, err := New(strings.NewReader(conf))
	if err != nil {
		t.Fatalf("New with config\n%s\n: %v", conf, err)
	}
	return &realCloud{srv: srv, cfg: cfg, admin: admin, provider: p}
}

func (c *realCloud) instances(t *testing.T) cloud.Instances {
	t.Helper()
	in, ok := c.provider.Instances()
	if !ok {
		t.Fatal("no Instances capability")
	}
	return in
}

func (c *realCloud) lister(t *testing.T) cloud.InstanceLister {
	t.Helper()
	l, ok := c.provider.InstanceLister()
	if !ok {
		t.Fatal("no InstanceLister capability")
	}
	return l
}

func (c *realCloud) lbs(t *testing.T) cloud.LoadBalancers {
	t.Helper()
	l, ok := c.provider.LoadBalancers()
	if !ok {
		t.Fatal("no LoadBalancers capability")
	}
	return l
}

func (c *realCloud) routes(t *testing.T) cloud.Routes {
	t.Helper()
	r, ok := c.provider.Routes()
	if !ok {
		t.Fatal("no Routes capability")
	}
	return r
}

// create creates an instance through the admin client.
func (c *realCloud) create(t *testing.T, spec api.InstanceSpec) *api.Instance {
	t.Helper()
	inst, err := c.admin.CreateInstance(context.Background(), spec)
	if err != nil {
		t.Fatalf("creating instance %s: %v", spec.Name, err)
	}
	return inst
}

// fault installs one fault rule and removes it when the test ends.
func (c *realCloud) fault(t *testing.T, f api.Fault) {
	t.Helper()
	if err := c.admin.PutFault(context.Background(), f); err != nil {
		t.Fatalf("installing fault %+v: %v", f, err)
	}
	t.Cleanup(func() { _ = c.admin.DeleteFault(context.Background(), f.Operation) })
}

// calls returns the calls the cloud answered since before, per operation.
func (c *realCloud) counts(t *testing.T) client.CallCounts {
	t.Helper()
	cc, err := c.admin.CallCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// firstVIP is the VIP the cloud hands out first.
func (c *realCloud) firstVIP() netip.Addr { return c.cfg.VIPPool.Addr().Next() }

// backendAddrs returns two addresses at the top of an instance range (a /24), where a
// test serves node ports: inside the range, as the cloud requires of backends, and above
// the addresses it gives instances, which count up from the bottom.
func backendAddrs(r netip.Prefix) (netip.Addr, netip.Addr) {
	a := r.Addr().As4()
	a[3] = 250
	first := netip.AddrFrom4(a)
	return first, first.Next()
}
