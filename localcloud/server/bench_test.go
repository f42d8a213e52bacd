package server_test

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"

	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/dataplane"
	"github.com/nephele-dev/nephele/localcloud/server"
)

// The benchmarks below measure how many calls the local cloud itself serves per second
// when many clients call at once, at the sizes of the large benchmark scale
// (bench/harness): load balancers with one backend per node of a 5,000-node cluster,
// and route creations into a table that already holds thousands of routes. The
// controllers' benchmarks assume the cloud answers at its configured latency and quota;
// these show it can. Run them with
//
//	go test -run XXX -bench 'LoadBalancer|Route' -benchtime 200x ./localcloud/server/

// benchClients is how many clients call at once per CPU: about what the controllers'
// workers put in flight.
const benchClients = 16

// startBenchCloud starts a local cloud for a benchmark, with a VIP pool big enough for
// thousands of load balancers and no health checks (the backends do not exist).
func startBenchCloud(b *testing.B) *client.Client {
	b.Helper()
	srv, err := server.Start(context.Background(), server.Config{
		StatePath: filepath.Join(b.TempDir(), "state.db"),
		Token:     token,
		VIPPool:   netip.MustParsePrefix("127.104.0.0/16"),
		Logger:    logr.Discard(),
		DataPlane: dataplane.Config{DisableHealthChecks: true},
	})
	if err != nil {
		b.Fatalf("starting the local cloud: %v", err)
	}
	b.Cleanup(func() {
		ctx, cancel := contextWithTimeout(30e9)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			b.Errorf("shutting down: %v", err)
		}
	})
	c, err := client.New(srv.URL(), token)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// benchBackends returns n backends (n below 65,534), as a load balancer of an n-node
// cluster has, with addresses the cloud accepts as an instance's: inside its default
// instance range, past the network address and the bridge's (.0 and .1).
func benchBackends(n int) []api.Backend {
	base := server.DefaultInstanceCIDR.Addr().As4()
	out := make([]api.Backend, n)
	for i := range out {
		a := i + 2
		out[i] = api.Backend{NodeName: fmt.Sprintf("node-%05d", i), Address: netip.AddrFrom4([4]byte{base[0], base[1], byte(a >> 8), byte(a)}).String()}
	}
	return out
}

func benchLBSpec(backends []api.Backend) api.LoadBalancerSpec {
	return api.LoadBalancerSpec{
		ClusterName: "bench",
		Ports:       []api.Port{{Name: "http", Protocol: api.ProtocolTCP, Port: 80, NodePort: 30080}},
		Backends:    backends,
	}
}

// runParallel runs op b.N times from benchClients clients per CPU, handing each call
// its sequence number, and reports calls per second.
func runParallel(b *testing.B, op func(ctx context.Context, i int) error) {
	b.Helper()
	var next atomic.Int64
	b.SetParallelism(benchClients)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(context.Background(), int(next.Add(1)-1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// BenchmarkLoadBalancerCalls measures creating new load balancers and replacing the
// backends of existing ones, with 5,000 backends each.
func BenchmarkLoadBalancerCalls(b *testing.B) {
	backends := benchBackends(5000)
	b.Run("ensure-new", func(b *testing.B) {
		c := startBenchCloud(b)
		runParallel(b, func(ctx context.Context, i int) error {
			_, err := c.EnsureLoadBalancer(ctx, fmt.Sprintf("lb-%06d", i), benchLBSpec(backends))
			return err
		})
	})
	b.Run("update-backends", func(b *testing.B) {
		c := startBenchCloud(b)
		const lbs = 64
		for i := range lbs {
			if _, err := c.EnsureLoadBalancer(context.Background(), fmt.Sprintf("lb-%06d", i), benchLBSpec(backends)); err != nil {
				b.Fatal(err)
			}
		}
		// Each update changes the set, as a node joining does.
		grown := benchBackends(len(backends) + 1)
		runParallel(b, func(ctx context.Context, i int) error {
			set := backends
			if i%2 == 0 {
				set = grown
			}
			_, err := c.UpdateLoadBalancerBackends(ctx, fmt.Sprintf("lb-%06d", i%lbs), set)
			return err
		})
	})
}

// BenchmarkCreateRoute measures creating routes into a cluster's table that already
// holds 5,000 routes.
func BenchmarkCreateRoute(b *testing.B) {
	c := startBenchCloud(b)
	const existing = 5000
	ids := make([]string, existing+b.N)
	inParallel(b, len(ids), func(ctx context.Context, i int) error {
		inst, err := c.CreateInstance(ctx, api.InstanceSpec{Name: fmt.Sprintf("node-%06d", i)})
		if err == nil {
			ids[i] = inst.ID
		}
		return err
	})
	route := func(ctx context.Context, i int) error {
		_, err := c.CreateRoute(ctx, "bench", api.RouteSpec{
			DestinationCIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(64 + i>>16), byte(i >> 8), byte(i)}), 32).String(),
			TargetInstance:  ids[i],
		})
		return err
	}
	inParallel(b, existing, route)
	runParallel(b, func(ctx context.Context, i int) error { return route(ctx, existing+i) })
}

// inParallel calls fn for 0..n-1 from 32 goroutines, failing b on the first error: the
// set-up of a benchmark's state.
func inParallel(b *testing.B, n int, fn func(ctx context.Context, i int) error) {
	b.Helper()
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(32)
	for i := range n {
		g.Go(func() error { return fn(ctx, i) })
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}
