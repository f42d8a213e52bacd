package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/proctest"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
)

// TestMain lets the test binary act as the localcloud command, so a test can run it
// as a real process and send it signals.
func TestMain(m *testing.M) {
	proctest.Main(func() int { main(); return 0 })
	os.Exit(m.Run())
}

// pollTimeout is how long the tests wait for the cloud; generous for loaded machines.
const pollTimeout = 30 * time.Second

// readAddress waits for the address file and returns a client for the cloud in it.
func readAddress(t *testing.T, file, token string) *client.Client {
	t.Helper()
	var addr string
	poll.Eventually(t, "the address file", func() error {
		raw, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if addr = strings.TrimSpace(string(raw)); addr == "" {
			return fmt.Errorf("%s is empty", file)
		}
		return nil
	})
	c, err := client.New("http://"+addr, token)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeToken(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "token")
	if err := os.WriteFile(path, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunServesUntilCanceled(t *testing.T) {
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "addr")
	args := []string{
		"--state", filepath.Join(dir, "state.db"),
		"--token-file", writeToken(t, dir),
		"--listen", "127.0.0.1:0",
		"--address-file", addrFile,
		"--vip-pool", "127.103.7.0/24",
		"--zones", "z1,z2",
		"--fault", "lb.ensure:outage",
		"--fault", "instances.list:latency=1ms-2ms",
	}
	for round := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		var stdout, stderr bytes.Buffer
		done := make(chan error, 1)
		go func() { done <- run(ctx, args, &stdout, &stderr) }()
		c := readAddress(t, addrFile, "s3cret")
		if err := c.Healthy(ctx); err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			inst, err := c.CreateInstance(ctx, api.InstanceSpec{Name: "node-1"})
			if err != nil {
				t.Fatal(err)
			}
			if inst.Zone != "z1" {
				t.Errorf("zone %q, want z1 from --zones", inst.Zone)
			}
		} else if _, err := c.GetInstanceByName(ctx, "node-1"); err != nil {
			t.Errorf("instance from the first run: %v", err)
		}
		_, err := c.EnsureLoadBalancer(ctx, "web", api.LoadBalancerSpec{Ports: []api.Port{{Protocol: api.ProtocolTCP, Port: 1, NodePort: 30001}}})
		var ce *client.Error
		if !errors.As(err, &ce) || ce.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("lb.ensure under --fault lb.ensure:outage: %v", err)
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run after cancel: %v (stderr: %s)", err, stderr.String())
			}
		case <-time.After(pollTimeout):
			t.Fatal("run did not return after its context was canceled")
		}
		if !strings.Contains(stdout.String(), "localcloud serving on http://127.0.0.1:") {
			t.Errorf("stdout %q does not announce the address", stdout.String())
		}
		if _, err := os.Stat(addrFile); !os.IsNotExist(err) {
			t.Errorf("address file left behind: %v", err)
		}
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	tokenFile := writeToken(t, dir)
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "no state", args: []string{"--token-file", tokenFile}, want: "--state"},
		{name: "no token", args: []string{"--state", state}, want: "--token"},
		{name: "a token on the command line", args: []string{"--state", state, "--token", "x", "--token-file", tokenFile}, want: "/proc/*/cmdline"},
		{name: "the CCM's token is the administrator's", args: []string{"--state", state, "--token-file", tokenFile, "--ccm-token-file", tokenFile}, want: "token of its own"},
		{name: "empty CCM token file", args: []string{"--state", state, "--token-file", tokenFile, "--ccm-token-file", empty}, want: "--ccm-token-file"},
		{name: "empty token file", args: []string{"--state", state, "--token-file", empty}, want: "empty"},
		{name: "missing token file", args: []string{"--state", state, "--token-file", filepath.Join(dir, "nope")}, want: "--token-file"},
		{name: "bad fault", args: []string{"--state", state, "--token-file", tokenFile, "--fault", "lb.ensure:latency=soon"}, want: "--fault"},
		{name: "duplicate fault", args: []string{"--state", state, "--token-file", tokenFile, "--fault", "*:outage", "--fault", "*:errors=1"}, want: "--fault"},
		{name: "bad pool", args: []string{"--state", state, "--token-file", tokenFile, "--vip-pool", "127.100.0.0"}, want: "--vip-pool"},
		{name: "bad interval", args: []string{"--state", state, "--token-file", tokenFile, "--health-interval", "0s"}, want: "--health-interval"},
		{name: "bad zone", args: []string{"--state", state, "--token-file", tokenFile, "--zones", "a/b"}, want: "zone"},
		{name: "bad log format", args: []string{"--state", state, "--token-file", tokenFile, "--logging-format", "xml"}, want: "--logging-format"},
		{name: "unknown flag", args: []string{"--state", state, "--token-file", tokenFile, "--colour"}, want: "colour"},
		{name: "extra argument", args: []string{"--state", state, "--token-file", tokenFile, "serve"}, want: "unexpected arguments"},
		{name: "volume size not a quantity", args: []string{"--state", state, "--token-file", tokenFile, "--max-volume-size", "big"}, want: "--max-volume-size"},
		{name: "volume size not whole MiB", args: []string{"--state", state, "--token-file", tokenFile, "--max-volume-size", "1500Ki"}, want: "--max-volume-size"},
		{name: "no volume per instance", args: []string{"--state", state, "--token-file", tokenFile, "--volume-attach-limit", "0"}, want: "--volume-attach-limit"},
		{name: "bad listen address", args: []string{"--state", state, "--token-file", tokenFile, "--listen", "256.0.0.1:1"}, want: "listening"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run(%q) = %v, want an error mentioning %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestSIGTERMStopsTheProcess(t *testing.T) {
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "addr")
	p := proctest.Start(t, "localcloud",
		"--state", filepath.Join(dir, "state.db"), "--token-file", writeToken(t, dir), "--listen", "127.0.0.1:0", "--address-file", addrFile)
	c := readAddress(t, addrFile, "s3cret")
	if _, err := c.GetInstance(context.Background(), "i-000000000001"); !cloud.IsNotFound(err) {
		t.Fatalf("the process does not serve the API: %v", err)
	}
	p.Stop(t, pollTimeout)
	if !strings.Contains(p.Output(), "local cloud stopped") {
		t.Errorf("no clean stop in the log: %s", p.Output())
	}
	if _, err := os.Stat(addrFile); !os.IsNotExist(err) {
		t.Errorf("address file left behind: %v", err)
	}
}
