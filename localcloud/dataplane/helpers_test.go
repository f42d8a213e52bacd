package dataplane

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// pollTimeout is how long a test waits for something that should happen soon; it is
// generous so a loaded machine does not fail the test.
const pollTimeout = 20 * time.Second

// eventually polls cond until it holds or pollTimeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testVIP returns a VIP in 127.101.0.0/16, away from the pools other tests use.
func testVIP() netip.Addr {
	return netip.AddrFrom4([4]byte{127, 101, byte(1 + rand.IntN(250)), byte(1 + rand.IntN(250))})
}

// freePort returns a port that is free for proto on every one of addrs.
func freePort(t *testing.T, proto Protocol, addrs ...netip.Addr) uint16 {
	t.Helper()
	for range 200 {
		port := uint16(20000 + rand.IntN(40000))
		ok := true
		var closers []func()
		for _, a := range addrs {
			ap := netip.AddrPortFrom(a, port).String()
			if proto == TCP {
				ln, err := net.Listen("tcp", ap)
				if err != nil {
					ok = false
					break
				}
				closers = append(closers, func() { _ = ln.Close() })
			} else {
				pc, err := net.ListenPacket("udp", ap)
				if err != nil {
					ok = false
					break
				}
				closers = append(closers, func() { _ = pc.Close() })
			}
		}
		for _, c := range closers {
			c()
		}
		if ok {
			return port
		}
	}
	t.Fatalf("no free %s port on %v", proto, addrs)
	return 0
}

// tcpEcho serves addr, answering each line with "tag line". It stops with the test.
func tcpEcho(t *testing.T, addr netip.AddrPort, tag string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr.String())
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { _ = c.Close() }()
				_ = c.SetDeadline(time.Now().Add(pollTimeout))
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := fmt.Fprintf(c, "%s %s", tag, line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln
}

// udpEcho serves addr, answering each datagram with "tag payload".
func udpEcho(t *testing.T, addr netip.AddrPort, tag string) {
	t.Helper()
	pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatalf("listening on udp %s: %v", addr, err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { _ = pc.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteToUDPAddrPort([]byte(tag+" "+string(buf[:n])), from)
		}
	}()
}

// healthz serves GET /healthz on addr with the given status.
func healthz(t *testing.T, addr netip.AddrPort, status int) {
	t.Helper()
	ln, err := net.Listen("tcp", addr.String())
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// askTCP connects to addr from local (any source when invalid), sends msg and returns
// the answer line.
func askTCP(addr netip.AddrPort, local netip.Addr, msg string) (string, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	if local.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: local.AsSlice()}
	}
	c, err := d.Dial("tcp", addr.String())
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(pollTimeout))
	if _, err := fmt.Fprintf(c, "%s\n", msg); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

// udpClient is a UDP socket bound to a source address.
type udpClient struct{ *net.UDPConn }

func newUDPClient(t *testing.T, local netip.Addr, to netip.AddrPort) udpClient {
	t.Helper()
	c, err := net.DialUDP("udp", &net.UDPAddr{IP: local.AsSlice()}, net.UDPAddrFromAddrPort(to))
	if err != nil {
		t.Fatalf("udp client from %s: %v", local, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return udpClient{c}
}

// ask sends msg and waits up to wait for an answer.
func (c udpClient) ask(msg string, wait time.Duration) (string, error) {
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// askUntil retries ask until an answer comes: UDP has no connection to wait for.
func (c udpClient) askUntil(t *testing.T, msg string) string {
	t.Helper()
	var answer string
	eventually(t, "a UDP answer to "+msg, func() bool {
		a, err := c.ask(msg, 500*time.Millisecond)
		answer = a
		return err == nil
	})
	return answer
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// newTestPlane returns a Plane with fast health checks and its metrics registry.
func newTestPlane(t *testing.T, mutate ...func(*Config)) (*Plane, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := Config{
		HealthInterval: 50 * time.Millisecond,
		HealthTimeout:  time.Second,
		DialTimeout:    2 * time.Second,
		UDPIdleTimeout: 5 * time.Second,
		Logger:         testr.NewWithOptions(t, testr.Options{Verbosity: 2}),
		Metrics:        reg,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, reg
}

func rejected(p *Plane, lb string, proto Protocol, reason string) float64 {
	return testutil.ToFloat64(p.metrics.rejected.WithLabelValues(lb, string(proto), reason))
}

func apply(t *testing.T, p *Plane, lb LoadBalancer) {
	t.Helper()
	if err := p.Apply(context.Background(), lb, nil); err != nil {
		t.Fatalf("Apply(%s): %v", lb.Name, err)
	}
}

// healthOf returns the health the plane reports for the backend at addr.
func healthOf(p *Plane, lb string, addr netip.Addr) Health {
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
