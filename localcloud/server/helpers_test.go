package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/server"
)

const token = "test-token"

func TestMain(m *testing.M) {
	// Hosts of the tests run this binary as a stand-in for a node serving VIPs.
	hoststest.Serve()
	os.Exit(m.Run())
}

// testCloud is a running local cloud under test.
type testCloud struct {
	t      *testing.T
	cfg    server.Config
	srv    *server.Server
	client *client.Client
}

// startCloud starts a local cloud on a fresh state file.
func startCloud(t *testing.T, mutate ...func(*server.Config)) *testCloud {
	t.Helper()
	cfg := server.Config{
		StatePath: filepath.Join(t.TempDir(), "state.db"),
		Token:     token,
		VIPPool:   testnet.LoopbackPrefix(102),
		FaultSeed: 7,
		Logger:    testlog.New(t, 1),
	}
	cfg.DataPlane.HealthInterval = 50 * time.Millisecond
	cfg.DataPlane.UDPIdleTimeout = 10 * time.Second
	for _, m := range mutate {
		m(&cfg)
	}
	c := &testCloud{t: t, cfg: cfg}
	c.start()
	t.Cleanup(func() { c.stop() })
	return c
}

func (c *testCloud) start() {
	c.t.Helper()
	srv, err := server.Start(context.Background(), c.cfg)
	if err != nil {
		c.t.Fatalf("starting the local cloud: %v", err)
	}
	c.srv = srv
	c.client, err = client.New(srv.URL(), token)
	if err != nil {
		c.t.Fatal(err)
	}
}

func (c *testCloud) stop() {
	c.t.Helper()
	if c.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.srv.Shutdown(ctx); err != nil {
		c.t.Errorf("shutting down: %v", err)
	}
	c.srv = nil
}

// firstVIP is the VIP the cloud hands out first.
func (c *testCloud) firstVIP() netip.Addr { return c.cfg.VIPPool.Addr().Next() }

// raw sends a request with the test token (or the given Authorization header value
// when auth is not nil) and returns the status and body.
func (c *testCloud) raw(method, path, body string, auth *string) (int, http.Header, []byte) {
	c.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.srv.URL()+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	if auth == nil {
		req.Header.Set("Authorization", "Bearer "+token)
	} else if *auth != "" {
		req.Header.Set("Authorization", *auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, out
}

// apiError decodes an error body.
func apiError(t *testing.T, body []byte) api.Error {
	t.Helper()
	var e api.Error
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", body, err)
	}
	return e
}

func ctx() context.Context { return context.Background() }

// result holds a call's two results until a test checks them: must(f()).of(t).
type result[T any] struct {
	v   T
	err error
}

func must[T any](v T, err error) result[T] { return result[T]{v, err} }

// of returns the value, failing the test on an error.
func (r result[T]) of(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

// Backends serve on addresses of the test cloud's instance range (the default,
// 127.200.0.0/16: the cloud refuses a backend outside it), above the addresses it gives
// instances, which count up from the bottom. other is a client's address, not a backend.
var (
	nodeA = netip.MustParseAddr("127.200.255.1")
	nodeB = netip.MustParseAddr("127.200.255.3")
	dead  = netip.MustParseAddr("127.200.255.4") // nothing listens there
	other = netip.MustParseAddr("127.0.0.2")
)

func contains(body []byte, s string) bool { return strings.Contains(string(body), s) }

// metricsShow is a condition for poll: the cloud's /metrics holds every one of lines.
func metricsShow(c *testCloud, lines ...string) error {
	_, _, body := c.raw("GET", "/metrics", "", nil)
	for _, l := range lines {
		if !contains(body, l) {
			return fmt.Errorf("/metrics lacks %s", l)
		}
	}
	return nil
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
