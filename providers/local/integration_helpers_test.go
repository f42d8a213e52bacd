package local

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/server"
	"github.com/nephele-dev/nephele/localcloud/servertest"
)

// pollTimeout is how long a test waits for something that should happen soon; it is
// generous so that a loaded machine does not fail a test.
const pollTimeout = 60 * time.Second

// realCloud is a real local cloud serving HTTP on a loopback port, with an admin
// client for arranging state and faults, and the provider under test built from a
// cloud config file the way a manager builds it.
type realCloud struct {
	srv      *server.Server
	cfg      server.Config
	admin    *client.Client
	provider cloud.Provider
}

// randomPrefix returns a random /24 inside 127.second.0.0/16, so test binaries running
// at the same time rarely share addresses.
func randomPrefix(second byte) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, second, byte(rand.IntN(256)), 0}), 24)
}

// startRealCloud starts a local cloud on a fresh state file and builds the provider
// with a tokenFile config and the given extra config lines.
func startRealCloud(t *testing.T, extraConfig ...string) *realCloud {
	t.Helper()
	cfg := server.Config{
		StatePath:    filepath.Join(t.TempDir(), "state.db"),
		Token:        "integration-token",
		VIPPool:      randomPrefix(107),
		InstanceCIDR: randomPrefix(108),
		FaultSeed:    1,
		Logger:       testr.NewWithOptions(t, testr.Options{Verbosity: 1}),
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

// freePort returns a TCP port free on every one of addrs a moment ago.
func freePort(t *testing.T, addrs ...netip.Addr) uint16 {
	t.Helper()
	for range 200 {
		port := uint16(20000 + rand.IntN(40000))
		var lns []net.Listener
		ok := true
		for _, a := range addrs {
			ln, err := net.Listen("tcp", netip.AddrPortFrom(a, port).String())
			if err != nil {
				ok = false
				break
			}
			lns = append(lns, ln)
		}
		for _, ln := range lns {
			_ = ln.Close()
		}
		if ok {
			return port
		}
	}
	t.Fatalf("no free port on %v", addrs)
	return 0
}

// echo serves addr until the test ends, answering each line with "tag line".
func echo(t *testing.T, addr netip.AddrPort, tag string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr.String())
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() {
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					_ = c.Close()
				}()
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
			})
		}
	})
}

// ask connects to addr, sends msg and returns the answer line.
func ask(addr netip.AddrPort, msg string) (string, error) {
	c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "%s\n", msg); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

// eventually polls cond until it holds, failing the test after pollTimeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", pollTimeout, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}
