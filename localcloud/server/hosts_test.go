package server_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/hosts"
	"github.com/nephele-dev/nephele/localcloud/server"
	"github.com/nephele-dev/nephele/localcloud/store"
)

// TestHostRequestsWithoutHosts needs no root: a cloud without host instances refuses a
// host with a 400 naming spec.kind and why, refuses bad host fields naming each field,
// writes nothing for any of them, and serves records as before.
func TestHostRequestsWithoutHosts(t *testing.T) {
	c := startCloud(t)
	tests := []struct {
		name, body, field, says string
	}{
		{"host refused", `{"name":"n1","kind":"host","bootCommand":["sleep","1"]}`, "spec.kind", "--hosts"},
		{"bad kind", `{"name":"n1","kind":"vm"}`, "spec.kind", "want"},
		{"boot command on a record", `{"name":"n1","bootCommand":["sleep","1"]}`, "spec.bootCommand", "only host instances"},
		{"env on a record", `{"name":"n1","kind":"record","env":{"A":"b"}}`, "spec.env", "only host instances"},
		{"host without boot command", `{"name":"n1","kind":"host"}`, "spec.bootCommand", "required"},
		{"relative private path", `{"name":"n1","kind":"host","bootCommand":["x"],"privatePaths":["var/lib/kubelet"]}`, "spec.privatePaths[0]", "absolute"},
		{"private path in /proc", `{"name":"n1","kind":"host","bootCommand":["x"],"privatePaths":["/var/lib/x","/proc/sys"]}`, "spec.privatePaths[1]", "/proc"},
		{"reserved env", `{"name":"n1","kind":"host","bootCommand":["x"],"env":{"NEPHELE_HOST_DIR":"/"}}`, `spec.env["NEPHELE_HOST_DIR"]`, "NEPHELE_"},
		{"host with an InternalIP", `{"name":"n1","kind":"host","bootCommand":["x"],"addresses":[{"type":"InternalIP","address":"10.0.0.1"}]}`, "spec.addresses[0].type", "assigns"},
		{"boot command of the wrong type", `{"name":"n1","kind":"host","bootCommand":"sleep 1"}`, "spec.bootCommand", "JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := c.raw("POST", "/v1/instances", tt.body, nil)
			e := apiError(t, body)
			if status != http.StatusBadRequest || e.Reason != api.ReasonInvalid || e.Field != tt.field || !strings.Contains(e.Message, tt.says) {
				t.Fatalf("%d %+v, want 400 Invalid naming %s and saying %q", status, e, tt.field, tt.says)
			}
		})
	}
	list, err := c.client.ListAllInstances(ctx(), 0)
	if err != nil || len(list) != 0 {
		t.Fatalf("refused creates wrote instances: %v, %v", list, err)
	}
	inst, err := c.client.CreateInstance(ctx(), api.InstanceSpec{Name: "record-1", Kind: api.InstanceRecord})
	if err != nil {
		t.Fatal(err)
	}
	if inst.Kind != "" || inst.Host != nil || inst.Addresses[0].Address != server.DefaultInstanceCIDR.Addr().Next().String() {
		t.Errorf("a record created with kind record: %+v", inst)
	}
	_, err = c.client.Console(ctx(), inst.ID, 0)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != http.StatusConflict {
		t.Errorf("the console of a record: %v, want 409", err)
	}
}

// TestLeftoverHostsRefuseAStartWithoutHosts: a state whose host journal records hosts on
// the machine does not start without --hosts, which would leave them there unseen.
func TestLeftoverHostsRefuseAStartWithoutHosts(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.db")
	dir := server.DefaultHostDir(state)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	journal := `{"version":1,"network":{"bridge":"nphgone0","gateway":"10.250.99.1/24","guardMetric":4242}}`
	if err := os.WriteFile(filepath.Join(dir, "journal.json"), []byte(journal), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := server.Start(ctx(), server.Config{StatePath: state, Token: token})
	if err == nil || !strings.Contains(err.Error(), "--cleanup") {
		t.Fatalf("Start = %v, want a refusal pointing at --cleanup", err)
	}
}

// TestLostStateRefused needs no root: a cloud with hosts whose state file is missing,
// while the host journal beside it records hosts of that state, does not start (it
// would remove them and their directories as strays), says how to recover, and creates
// no state file; a journal of another state file is left to hosts.Open's refusal.
func TestLostStateRefused(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.db")
	dir := server.DefaultHostDir(state)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(state)
	if err != nil {
		t.Fatal(err)
	}
	journal := fmt.Sprintf(`{"version":2,"owner":%q,"hosts":{"i-000000000001":{"id":"i-000000000001","name":"node-1","dir":%q}}}`,
		abs, filepath.Join(dir, "i-000000000001"))
	if err := os.WriteFile(filepath.Join(dir, "journal.json"), []byte(journal), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = server.Start(ctx(), server.Config{StatePath: state, Token: token, Hosts: &hosts.Config{}})
	var lost *server.LostStateError
	if !errors.As(err, &lost) || !slices.Equal(lost.Hosts, []string{"i-000000000001"}) {
		t.Fatalf("Start = %v, want a *LostStateError naming the recorded host", err)
	}
	for _, want := range []string{state, "Restore the state file", "localcloud --cleanup --host-dir " + dir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start = %v, want it to say %q", err, want)
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("a refused start made the state file: %v", err)
	}
}

// TestLostStateKeepsHosts runs as root: a cloud whose state file went missing does not
// remove the hosts its journal records; with the file back, they boot again. Before
// the refusal, such a start removed every host and its directory.
func TestLostStateKeepsHosts(t *testing.T) {
	before := hoststest.Snapshot(t, "nphsrv14", "10.250.14.", "10.251.14.", "nv0afa0e")
	c, markers := hostCloud(t, 14)
	n1 := bootHost(t, c, "node-1")
	c.stop()

	saved := c.cfg.StatePath + ".saved"
	if err := os.Rename(c.cfg.StatePath, saved); err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(ctx(), c.cfg)
	if err == nil {
		_ = srv.Shutdown(ctx())
		_, statErr := os.Stat(n1.Host.Dir)
		t.Fatalf("a cloud whose state file is gone started over its recorded hosts (the host's directory after it: %v)", statErr)
	}
	var lost *server.LostStateError
	if !errors.As(err, &lost) || !slices.Contains(lost.Hosts, n1.ID) {
		t.Errorf("Start = %v, want a *LostStateError naming %s", err, n1.ID)
	}
	if _, err := os.Stat(n1.Host.Dir); err != nil {
		t.Errorf("the host's directory after a refused start: %v", err)
	}

	if err := os.Rename(saved, c.cfg.StatePath); err != nil {
		t.Fatal(err)
	}
	c.start()
	waitConsole(t, c.client, n1.ID, "ready node-1")
	if err := c.client.DeleteInstance(ctx(), n1.ID); err != nil {
		t.Fatal(err)
	}
	c.stop()
	if got := hoststest.Snapshot(t, markers...); got != before {
		t.Errorf("the machine changed:\nbefore:\n%s\nafter:\n%s", before, got)
	}
}

// TestHostInstances runs as root: hosts boot through the API, stop, start, terminate and
// delete; routes to them are programmed into the machine and the hosts; a graceful
// restart of the cloud boots them again; and nothing is left on the machine at the end.
func TestHostInstances(t *testing.T) {
	hoststest.RequireRoot(t)
	rangeCIDR, guard := netip.MustParsePrefix("10.250.11.0/24"), netip.MustParsePrefix("10.251.11.0/24")
	bridge := "nphsrv11"
	markers := []string{bridge, "10.250.11.", "10.251.11.", "nv0afa0b"}
	before := hoststest.Snapshot(t, markers...)
	forward := hoststest.Sysctl(t, "net/ipv4/ip_forward")
	c := startCloud(t, func(cfg *server.Config) {
		cfg.InstanceCIDR = rangeCIDR
		cfg.Hosts = &hosts.Config{
			Bridge: bridge, Guards: []netip.Prefix{guard},
			StopTimeout: 2 * time.Second, RestartBackoff: 100 * time.Millisecond, MaxRestartBackoff: time.Second,
		}
	})
	markers = append(markers, server.DefaultHostDir(c.cfg.StatePath))
	cl := c.client
	boot := []string{"sh", "-c", `ip -4 -o addr show dev eth0; echo "ready $NEPHELE_INSTANCE_NAME"; exec sleep 1000`}

	n1, err := cl.CreateInstance(ctx(), api.InstanceSpec{Name: "node-1", Kind: api.InstanceHost, BootCommand: boot,
		PrivatePaths: []string{"/var/lib/nephele-server-test"}})
	if err != nil {
		t.Fatalf("creating a host: %v", err)
	}
	markers = append(markers, "/var/lib/nephele-server-test")
	if n1.Kind != api.InstanceHost || n1.Addresses[0].Address != "10.250.11.2" || n1.Host == nil || n1.Host.Phase != "running" || n1.Host.BootPID == 0 {
		t.Fatalf("the new host: %+v, host %+v", n1, n1.Host)
	}
	waitConsole(t, cl, n1.ID, "ready node-1")
	if out, _ := cl.Console(ctx(), n1.ID, 0); !strings.Contains(out.Output, "inet 10.250.11.2/24") {
		t.Errorf("the boot command did not see its address:\n%s", out.Output)
	}
	rec, err := cl.CreateInstance(ctx(), api.InstanceSpec{Name: "record-1"})
	if err != nil || rec.Addresses[0].Address != "10.250.11.3" {
		t.Fatalf("a record beside hosts: %+v, %v (want the next free address)", rec, err)
	}
	_, err = cl.CreateInstance(ctx(), api.InstanceSpec{Name: "bad", Kind: api.InstanceHost, BootCommand: boot, PrivatePaths: []string{"/tmp"}})
	if !cloud.IsInvalid(err) || !strings.Contains(err.Error(), "host directory") {
		t.Errorf("a private path over the host directory: %v, want a 400", err)
	}

	// Stop and start.
	if got, err := cl.StopInstance(ctx(), n1.ID); err != nil || got.State != api.InstanceStopped || got.Host == nil || got.Host.Phase != "stopped" || got.Host.BootPID != 0 {
		t.Fatalf("stop: %+v, %v", got, err)
	}
	if _, err := os.Stat(n1.Host.NetNS); !os.IsNotExist(err) {
		t.Errorf("a stopped host's network namespace exists: %v", err)
	}
	got, err := cl.StartInstance(ctx(), n1.ID)
	if err != nil || got.Host == nil || got.Host.Phase != "running" || got.Host.BootPID == n1.Host.BootPID {
		t.Fatalf("start: %+v, %v", got, err)
	}

	// Routes.
	n2, err := cl.CreateInstance(ctx(), api.InstanceSpec{Name: "node-2", Kind: api.InstanceHost, BootCommand: boot})
	if err != nil {
		t.Fatal(err)
	}
	dest := "10.251.11.0/26"
	if _, err := cl.CreateRoute(ctx(), "k", api.RouteSpec{DestinationCIDR: dest, TargetNode: "node-2"}); err != nil {
		t.Fatalf("a route to a host: %v", err)
	}
	want := dest + " via " + n2.Addresses[0].Address
	if out := ipRoutes(t, n1.Host.NetNS); !strings.Contains(out, want) {
		t.Errorf("host node-1's table lacks %q:\n%s", want, out)
	}
	if out := ipRoutes(t, ""); !strings.Contains(out, want) {
		t.Errorf("the machine's table lacks %q:\n%s", want, out)
	}
	_, err = cl.CreateRoute(ctx(), "k", api.RouteSpec{DestinationCIDR: "198.51.100.0/24", TargetNode: "node-2"})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Field != "spec.destinationCIDR" {
		t.Errorf("a route to a host outside every guard CIDR: %v, want a 400 naming spec.destinationCIDR", err)
	}
	if err := cl.DeleteRoute(ctx(), "k", api.RouteName(netip.MustParsePrefix(dest))); err != nil {
		t.Fatal(err)
	}
	if out := ipRoutes(t, n1.Host.NetNS); strings.Contains(out, dest) {
		t.Errorf("host node-1's table keeps a deleted route:\n%s", out)
	}
	// A terminated target's route goes from the data plane.
	if _, err := cl.CreateRoute(ctx(), "k", api.RouteSpec{DestinationCIDR: dest, TargetNode: "node-2"}); err != nil {
		t.Fatal(err)
	}
	term, err := cl.TerminateInstance(ctx(), n2.ID)
	if err != nil || term.State != api.InstanceTerminated || term.Host != nil {
		t.Fatalf("terminate: %+v, %v", term, err)
	}
	if out := ipRoutes(t, ""); strings.Contains(out, dest) {
		t.Errorf("the machine keeps a route to a terminated host:\n%s", out)
	}
	if _, err := os.Stat(n2.Host.Dir); !os.IsNotExist(err) {
		t.Errorf("a terminated host's directory exists: %v", err)
	}

	// A graceful restart takes every host down and boots them again.
	pid := mustGet(t, cl, n1.ID).Host.BootPID
	c.stop()
	if _, err := os.Stat(n1.Host.NetNS); !os.IsNotExist(err) {
		t.Errorf("a host's network namespace outlived the cloud: %v", err)
	}
	c.start()
	cl = c.client
	after := mustGet(t, cl, n1.ID)
	if after.Host == nil || after.Host.Phase != "running" || after.Host.BootPID == 0 || after.Host.BootPID == pid {
		t.Fatalf("after a restart: %+v", after.Host)
	}
	if err := cl.DeleteInstance(ctx(), n1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(after.Host.NetNS); !os.IsNotExist(err) {
		t.Errorf("a deleted host's network namespace exists: %v", err)
	}
	c.stop()
	if got := hoststest.Snapshot(t, markers...); got != before {
		t.Errorf("the machine changed:\nbefore:\n%s\nafter:\n%s", before, got)
	}
	if got := hoststest.Sysctl(t, "net/ipv4/ip_forward"); got != forward {
		t.Errorf("ip_forward is %s, was %s", got, forward)
	}
}

func mustGet(t *testing.T, cl *client.Client, id string) *api.Instance {
	t.Helper()
	inst, err := cl.GetInstance(ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

func waitConsole(t *testing.T, cl *client.Client, id, want string) {
	t.Helper()
	poll.Eventually(t, fmt.Sprintf("the console of %s to say %q", id, want), func() error {
		out, err := cl.Console(ctx(), id, 0)
		if err != nil {
			return err
		}
		if !strings.Contains(out.Output, "\n"+want) {
			return fmt.Errorf("it says:\n%s", out.Output)
		}
		return nil
	})
}

// ipRoutes returns the IPv4 routes of a network namespace file, or of the machine.
func ipRoutes(t *testing.T, netns string) string {
	t.Helper()
	args := []string{"-4", "route", "show"}
	if netns != "" {
		args = append([]string{"-n", filepath.Base(netns)}, args...)
	}
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
	return string(out)
}

// hostCloud starts a cloud with host instances on its own bridge and ranges (n keeps
// tests apart) and returns it with the markers of what it puts on the machine.
func hostCloud(t *testing.T, n int, mutate ...func(*server.Config)) (*testCloud, []string) {
	t.Helper()
	hoststest.RequireRoot(t)
	bridge := fmt.Sprintf("nphsrv%d", n)
	markers := []string{bridge, fmt.Sprintf("10.250.%d.", n), fmt.Sprintf("10.251.%d.", n), fmt.Sprintf("nv0afa%02x", n)}
	c := startCloud(t, append([]func(*server.Config){func(cfg *server.Config) {
		cfg.InstanceCIDR = netip.MustParsePrefix(fmt.Sprintf("10.250.%d.0/24", n))
		cfg.Hosts = &hosts.Config{
			Bridge: bridge, Guards: []netip.Prefix{netip.MustParsePrefix(fmt.Sprintf("10.251.%d.0/24", n))},
			StopTimeout: 2 * time.Second, RestartBackoff: 100 * time.Millisecond, MaxRestartBackoff: time.Second,
		}
	}}, mutate...)...)
	return c, markers
}

// TestBrokenHostIsKept: a host whose record the cloud cannot boot (it lost its
// InternalIP) is kept across a restart, stopped, with its directory, and its status says
// why; deleting it removes it.
func TestBrokenHostIsKept(t *testing.T) {
	before := hoststest.Snapshot(t, "nphsrv12", "10.250.12.", "10.251.12.", "nv0afa0c")
	c, markers := hostCloud(t, 12)
	n1 := bootHost(t, c, "node-1")
	c.stop()

	st, err := store.Open(c.cfg.StatePath)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.UpdateInstance(ctx(), n1.ID, func(inst *api.Instance) error {
		inst.Addresses = nil
		return nil
	})
	if cerr := st.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}

	c.start()
	got := mustGet(t, c.client, n1.ID)
	if got.Host == nil || got.Host.Phase != "stopped" || !strings.Contains(got.Host.Error, "InternalIP") {
		t.Errorf("the broken host after a restart: %+v, want it stopped with the reason", got.Host)
	}
	if _, err := os.Stat(n1.Host.Dir); err != nil {
		t.Errorf("the broken host's directory: %v", err)
	}
	if err := c.client.DeleteInstance(ctx(), n1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(n1.Host.Dir); !os.IsNotExist(err) {
		t.Errorf("a deleted host's directory exists: %v", err)
	}
	c.stop()
	if got := hoststest.Snapshot(t, markers...); got != before {
		t.Errorf("the machine changed:\nbefore:\n%s\nafter:\n%s", before, got)
	}
}

// TestHostDirOfAnotherState: a cloud started on another state file with the same host
// directory is refused, naming --state and --host-dir, and removes none of the hosts of
// the state they belong to, which boot again with it.
func TestHostDirOfAnotherState(t *testing.T) {
	before := hoststest.Snapshot(t, "nphsrv13", "10.250.13.", "10.251.13.", "nv0afa0d")
	dir := filepath.Join(t.TempDir(), "hosts")
	c, markers := hostCloud(t, 13, func(cfg *server.Config) { cfg.Hosts.Dir = dir })
	n1 := bootHost(t, c, "node-1")
	c.stop()

	other := c.cfg
	other.StatePath = filepath.Join(t.TempDir(), "other.db")
	other.Hosts = &hosts.Config{Dir: dir, Bridge: c.cfg.Hosts.Bridge, Guards: c.cfg.Hosts.Guards}
	srv, err := server.Start(ctx(), other)
	if err == nil {
		_ = srv.Shutdown(ctx())
		t.Fatal("a cloud on another state file started on the host directory")
	}
	for _, want := range []string{"--state " + c.cfg.StatePath, "--host-dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start = %v, want it to say %q", err, want)
		}
	}
	if _, err := os.Stat(n1.Host.Dir); err != nil {
		t.Errorf("the host's directory after a refused start on another state: %v", err)
	}

	c.start()
	if got := mustGet(t, c.client, n1.ID); got.Host == nil || got.Host.Phase != "running" {
		t.Errorf("the host with its own state again: %+v", got.Host)
	}
	waitConsole(t, c.client, n1.ID, "ready node-1")
	c.stop()
	if got := hoststest.Snapshot(t, markers...); got != before {
		t.Errorf("the machine changed:\nbefore:\n%s\nafter:\n%s", before, got)
	}
}

// bootHost creates a host instance name whose boot command says it is ready and then
// sleeps, and waits until it has said so.
func bootHost(t *testing.T, c *testCloud, name string) *api.Instance {
	t.Helper()
	boot := []string{"sh", "-c", `echo "ready $NEPHELE_INSTANCE_NAME"; exec sleep 1000`}
	inst, err := c.client.CreateInstance(ctx(), api.InstanceSpec{Name: name, Kind: api.InstanceHost, BootCommand: boot})
	if err != nil {
		t.Fatalf("creating host %s: %v", name, err)
	}
	waitConsole(t, c.client, inst.ID, "ready "+name)
	return inst
}
