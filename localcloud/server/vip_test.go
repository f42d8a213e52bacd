package server_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/hosts"
	"github.com/nephele-dev/nephele/localcloud/server"
)

// TestHostLoadBalancersAreVIPs runs a cloud with hosts and a VIP pool outside the
// loopback range: its load balancers are the kernel's (ipMode VIP), need no node ports,
// send connections to the hosts unchanged (the client seen is the machine's source
// address, outside the instance range), pin a client with ClientIP affinity, refuse once
// deleted, and come back after a restart; a cloud killed with its load balancers is
// cleaned up by hosts.Cleanup, leaving the machine as before.
func TestHostLoadBalancersAreVIPs(t *testing.T) {
	pool := netip.MustParsePrefix("10.253.22.0/24")
	before := hoststest.Snapshot(t, "nphsrv22", "10.250.22.", "10.251.22.", "10.253.22.", "nv0afa16")
	c, markers := hostCloud(t, 22, func(cfg *server.Config) { cfg.VIPPool = pool })
	markers = append(markers, "10.253.22.", server.DefaultHostDir(c.cfg.StatePath))
	cl := c.client
	vip := pool.Addr().Next()
	src := hosts.VIPSource(pool)
	boot, env := hoststest.Serving(vip)
	for _, name := range []string{"node-1", "node-2"} {
		n, err := cl.CreateInstance(ctx(), api.InstanceSpec{Name: name, Kind: api.InstanceHost, BootCommand: boot, Env: env})
		if err != nil {
			t.Fatal(err)
		}
		waitConsole(t, cl, n.ID, "hoststest server serving")
	}
	spec := api.LoadBalancerSpec{
		ClusterName: "k", Service: "default/web", RequestedIP: vip.String(),
		Ports:    []api.Port{{Protocol: api.ProtocolTCP, Port: 80}, {Protocol: api.ProtocolUDP, Port: 80}},
		Backends: []api.Backend{{NodeName: "node-1", Address: "10.250.22.2"}, {NodeName: "node-2", Address: "10.250.22.3"}},
	}
	lb, err := cl.EnsureLoadBalancer(ctx(), "web", spec)
	if err != nil {
		t.Fatalf("a load balancer without node ports: %v", err)
	}
	if lb.Status.VIP != vip.String() || lb.Status.IPMode != api.IPModeVIP {
		t.Fatalf("status %+v, want VIP %s, ipMode VIP", lb.Status, vip)
	}
	at80 := netip.AddrPortFrom(vip, 80)
	if got := hoststest.Answers(t, at80, 30, src); len(got) != 2 {
		t.Errorf("30 connections went to %v, want both hosts", got)
	}
	spec.SessionAffinity = api.SessionAffinityClientIP
	if _, err := cl.EnsureLoadBalancer(ctx(), "web", spec); err != nil {
		t.Fatal(err)
	}
	if got := hoststest.Answers(t, at80, 15, src); len(got) != 1 {
		t.Errorf("with ClientIP affinity, 15 connections went to %v, want one host", got)
	}
	_, err = cl.EnsureLoadBalancer(ctx(), "other", api.LoadBalancerSpec{Ports: spec.Ports, RequestedIP: src.String()})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Field != "spec.requestedIP" {
		t.Errorf("the machine's source address requested as a VIP: %v, want a 400 naming spec.requestedIP", err)
	}

	// A restart programs the stored load balancer again.
	c.stop()
	c.start()
	cl = c.client
	// The hosts boot again with the cloud: wait for both servers.
	spec.SessionAffinity = ""
	if _, err := cl.EnsureLoadBalancer(ctx(), "web", spec); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	poll.Eventually(t, "both hosts answering after a restart", func() error {
		host, _, err := hoststest.Ask(at80)
		if err != nil {
			return err
		}
		if seen[host] = true; len(seen) < 2 {
			return fmt.Errorf("only %v answered", seen)
		}
		return nil
	})
	if err := cl.DeleteLoadBalancer(ctx(), "web"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := hoststest.Ask(at80); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a deleted load balancer's VIP: %v, want connection refused", err)
	}

	// Killed with a load balancer: it keeps serving, and Cleanup removes everything.
	if _, err := cl.EnsureLoadBalancer(ctx(), "web", spec); err != nil {
		t.Fatal(err)
	}
	if err := c.srv.Release(ctx(), errors.New("the test kills the cloud")); err == nil {
		t.Error("Release returned no error")
	}
	c.srv = nil
	cleanup := func() error { return hosts.Cleanup(ctx(), server.DefaultHostDir(c.cfg.StatePath), testlog.New(t, 0)) }
	t.Cleanup(func() { _ = cleanup() }) // should the test stop before
	hoststest.Answers(t, at80, 3, src)
	if err := cleanup(); err != nil {
		t.Fatal(err)
	}
	if got := hoststest.Snapshot(t, markers...); got != before {
		t.Errorf("the machine changed:\nbefore:\n%s\nafter:\n%s", before, got)
	}
}

// TestProxyLoadBalancersNeedNodePorts: a cloud on loopback VIPs (the user-space proxy)
// reports ipMode Proxy and refuses a port without a node port, saying what would serve
// it.
func TestProxyLoadBalancersNeedNodePorts(t *testing.T) {
	c := startCloud(t)
	spec := api.LoadBalancerSpec{Ports: []api.Port{{Protocol: api.ProtocolTCP, Port: 80, NodePort: 30080}, {Protocol: api.ProtocolTCP, Port: 81}}}
	_, err := c.client.EnsureLoadBalancer(ctx(), "web", spec)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != http.StatusBadRequest || ce.Field != "spec.ports[1].nodePort" || !strings.Contains(err.Error(), "host instances") {
		t.Fatalf("a port without a node port: %v, want a 400 naming spec.ports[1].nodePort", err)
	}
	spec.Ports = spec.Ports[:1]
	lb, err := c.client.EnsureLoadBalancer(ctx(), "web", spec)
	if err != nil || lb.Status.IPMode != api.IPModeProxy {
		t.Fatalf("ensure: %+v, %v; want ipMode Proxy", lb, err)
	}
	if got, err := c.client.GetLoadBalancer(ctx(), "web"); err != nil || got.Status.IPMode != api.IPModeProxy {
		t.Errorf("get: %+v, %v; want ipMode Proxy", got, err)
	}
}

// TestVIPPoolOutsideLoopbackNeedsHosts: without hosts, nothing would route such VIPs.
func TestVIPPoolOutsideLoopbackNeedsHosts(t *testing.T) {
	_, err := server.Start(ctx(), server.Config{StatePath: t.TempDir() + "/state.db", Token: token, VIPPool: netip.MustParsePrefix("10.89.0.0/16")})
	if err == nil || !strings.Contains(err.Error(), "--hosts") {
		t.Fatalf("Start = %v, want a refusal naming --hosts", err)
	}
}
