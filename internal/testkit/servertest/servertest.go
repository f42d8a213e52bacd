// Package servertest starts a local cloud for a test and stops it when the test ends, as
// net/http/httptest does for HTTP servers, so tests of providers, proxies and binaries
// that talk to the local cloud share one way of running it.
package servertest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/server"
)

// Token is the API token a Start without one gives the cloud.
const Token = "servertest-token"

// stopTimeout bounds the shutdown when the test ends: load balancers' listeners and
// in-flight requests drain within it.
const stopTimeout = 20 * time.Second

// Start starts a local cloud with cfg, whose StatePath defaults to a file in the test's
// temporary directory and whose Token defaults to Token, and returns it with a client
// holding its token (and, with ServingCAFile, verifying the cloud with its CA). The
// cloud is shut down when the test ends; a shutdown that fails fails the test.
func Start(t testing.TB, cfg server.Config) (*server.Server, *client.Client) {
	t.Helper()
	if cfg.StatePath == "" {
		cfg.StatePath = filepath.Join(t.TempDir(), "cloud.db")
	}
	if cfg.Token == "" {
		cfg.Token = Token
	}
	srv, err := server.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("starting the local cloud: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("stopping the local cloud: %v", err)
		}
	})
	var ca []byte
	if cfg.ServingCAFile != "" {
		var err error
		if ca, err = os.ReadFile(cfg.ServingCAFile); err != nil {
			t.Fatalf("the local cloud's CA certificate: %v", err)
		}
	}
	c, err := client.New(srv.URL(), cfg.Token, client.WithCA(ca))
	if err != nil {
		t.Fatalf("a client for the local cloud at %s: %v", srv.URL(), err)
	}
	return srv, c
}
