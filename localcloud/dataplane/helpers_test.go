package dataplane

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
)

var (
	tcpEcho   = testnet.TCPEcho
	udpEcho   = testnet.UDPEcho
	healthz   = testnet.Healthz
	askTCP    = testnet.AskTCP
	listening = testnet.Listening
	isTimeout = testnet.IsTimeout
	tagOf     = testnet.Tag
)

func freePort(t *testing.T, proto Protocol, addrs ...netip.Addr) uint16 {
	t.Helper()
	network := "tcp"
	if proto == UDP {
		network = "udp"
	}
	return testnet.FreePort(t, network, addrs...)
}

func newUDPClient(t *testing.T, local netip.Addr, to netip.AddrPort) testnet.UDPClient {
	t.Helper()
	return testnet.NewUDPClient(t, local, to)
}

// testVIP returns a VIP in 127.101.0.0/16, away from the pools other tests use.
func testVIP() netip.Addr {
	return netip.AddrFrom4([4]byte{127, 101, byte(1 + rand.IntN(250)), byte(1 + rand.IntN(250))})
}

// newTestPlane returns a Proxy with fast health checks and its metrics registry.
func newTestPlane(t *testing.T, mutate ...func(*Config)) (*Proxy, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := Config{
		HealthInterval: 50 * time.Millisecond,
		HealthTimeout:  time.Second,
		DialTimeout:    2 * time.Second,
		UDPIdleTimeout: 5 * time.Second,
		Logger:         testlog.New(t, 2),
		Metrics:        reg,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	p, err := NewProxy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, reg
}

func rejected(p *Proxy, lb string, proto Protocol, reason string) float64 {
	return testutil.ToFloat64(p.metrics.rejected.WithLabelValues(lb, string(proto), reason))
}

func apply(t *testing.T, p *Proxy, lb LoadBalancer) {
	t.Helper()
	if err := p.Apply(context.Background(), lb, nil); err != nil {
		t.Fatalf("Apply(%s): %v", lb.Name, err)
	}
}

// healthy is a condition for poll: the backends at addrs are healthy.
func healthy(p *Proxy, lb string, want Health, addrs ...netip.Addr) func() error {
	return func() error {
		for _, a := range addrs {
			if got := healthOf(p, lb, a); got != want {
				return fmt.Errorf("the backend at %s has health %d, want %d", a, got, want)
			}
		}
		return nil
	}
}

// healthOf returns the health the plane reports for the backend at addr.
func healthOf(p *Proxy, lb string, addr netip.Addr) Health {
	hs, _ := p.Health(lb)
	for _, h := range hs {
		if h.Backend.Addr == addr {
			return h.Health
		}
	}
	return HealthUnknown
}

var (
	nodeA  = netip.MustParseAddr("127.0.0.1")
	nodeB  = netip.MustParseAddr("127.0.0.3")
	client = netip.MustParseAddr("127.0.0.1")
	other  = netip.MustParseAddr("127.0.0.2")
)
