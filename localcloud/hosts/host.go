package hosts

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nephele-dev/nephele/internal/mountinfo"
)

// validateSpec checks a host spec against the machine.
func (m *Machine) validateSpec(spec *HostSpec) error {
	if err := ValidateID(spec.ID); err != nil {
		return err
	}
	if !spec.Address.Is4() || !m.cfg.Range.Contains(spec.Address) || spec.Address == m.Gateway() ||
		spec.Address == m.cfg.Range.Addr() || !m.cfg.Range.Contains(spec.Address.Next()) {
		return fmt.Errorf("host %s: address %s is not a host address of %s (the gateway is %s)", spec.ID, spec.Address, m.cfg.Range, m.Gateway())
	}
	if len(spec.BootCommand) == 0 || spec.BootCommand[0] == "" {
		return fmt.Errorf("host %s: a boot command is required", spec.ID)
	}
	for _, p := range spec.PrivatePaths {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
			return fmt.Errorf("host %s: private path %q: want a clean absolute path other than /", spec.ID, p)
		}
	}
	return nil
}

// Start makes host spec.ID run: it builds the host (namespaces, veth, address, routes,
// cgroup, private mounts, directory) if it is not up, and boots it. Starting a running
// host does nothing.
func (m *Machine) Start(ctx context.Context, spec HostSpec) error {
	if err := m.validateSpec(&spec); err != nil {
		return err
	}
	h, err := m.lockHost(spec.ID)
	if err != nil {
		return err
	}
	defer h.op.Unlock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return errClosed
	}
	// A Remove that held the host before us dropped it from the map.
	m.hosts[spec.ID] = h
	h.spec = spec
	if h.phase == PhaseRunning {
		m.mu.Unlock()
		return nil
	}
	rec := m.j.Hosts[spec.ID]
	if rec == nil {
		rec = &hostRecord{ID: spec.ID, Name: spec.Name, Dir: m.HostDir(spec.ID)}
		m.j.Hosts[spec.ID] = rec
		if err := m.save(); err != nil {
			m.mu.Unlock()
			return err
		}
	}
	m.mu.Unlock()
	// Left over from a boot that did not finish, or a crash: start from nothing, as a
	// machine powered on again does.
	if err := m.teardownHost(context.WithoutCancel(ctx), rec); err != nil {
		m.setError(h, err)
		return err
	}
	if err := m.buildHost(ctx, h, spec, rec); err != nil {
		if terr := m.teardownHost(context.WithoutCancel(ctx), rec); terr != nil {
			err = errors.Join(err, terr)
		}
		err = fmt.Errorf("building host %s: %w", spec.ID, err)
		m.setError(h, err)
		return err
	}
	m.mu.Lock()
	h.phase, h.backoff, h.lastErr = PhaseRunning, 0, ""
	h.gen++
	m.mu.Unlock()
	if err := m.boot(h, rec); err != nil {
		return err
	}
	m.log.Info("host started", "id", spec.ID, "name", spec.Name, "address", spec.Address, "netns", netnsName(m.cfg.Bridge, spec.ID))
	return nil
}

// errClosed is the answer of a closed machine.
var errClosed = errors.New("the host machine is closed")

// setError records why the host's last operation failed, for its Status.
func (m *Machine) setError(h *host, err error) {
	m.mu.Lock()
	h.lastErr = err.Error()
	m.mu.Unlock()
}

// Stop takes host id down: SIGTERM to its boot process, up to StopTimeout (or until ctx
// ends) for it to exit, then SIGKILL to every process left in the host's cgroup, and the
// host's namespaces, veth, mounts and cgroups are removed. Its directory stays. Stopping
// a stopped or unknown host does nothing.
func (m *Machine) Stop(ctx context.Context, id string) error {
	h := m.lockKnownHost(id)
	defer h.op.Unlock()
	return m.stopHeld(ctx, id, h)
}

// Remove stops host id and removes its directory and every record of it. Removing an
// unknown host does nothing.
func (m *Machine) Remove(ctx context.Context, id string) error {
	h := m.lockKnownHost(id)
	defer h.op.Unlock()
	if err := m.stopHeld(ctx, id, h); err != nil {
		return err
	}
	m.mu.Lock()
	rec := m.j.Hosts[id]
	m.mu.Unlock()
	if rec != nil {
		if err := os.RemoveAll(rec.Dir); err != nil {
			return fmt.Errorf("removing host directory %s: %w", rec.Dir, err)
		}
	}
	return m.record(func() {
		delete(m.j.Hosts, id)
		delete(m.hosts, id)
	})
}

// lockHost returns host id's runtime state with its op lock held, creating it; it
// fails once the machine is closed.
func (m *Machine) lockHost(id string) (*host, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, errClosed
	}
	h := m.hostNamed(id)
	m.mu.Unlock()
	h.op.Lock()
	return h, nil
}

// lockKnownHost returns host id's runtime state with its op lock held, creating it for
// a host known only to the journal (an earlier run's), whose namespaces may exist.
func (m *Machine) lockKnownHost(id string) *host {
	m.mu.Lock()
	h := m.hostNamed(id)
	m.mu.Unlock()
	h.op.Lock()
	return h
}

// stopHeld stops a host whose op lock the caller holds.
func (m *Machine) stopHeld(ctx context.Context, id string, h *host) error {
	m.mu.Lock()
	rec := m.j.Hosts[id]
	if h.phase != PhaseRunning && (rec == nil || rec.Up == nil) {
		m.mu.Unlock()
		return nil
	}
	h.phase = PhaseStopping
	h.gen++
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	p := h.proc
	m.mu.Unlock()

	if p != nil && !p.exited() {
		m.terminate(ctx, p)
	}

	var err error
	if rec != nil {
		err = m.teardownHost(context.WithoutCancel(ctx), rec)
	}
	m.mu.Lock()
	h.phase, h.proc = PhaseStopped, nil
	if p != nil && p.exited() {
		h.lastExit = p.exit
	}
	m.mu.Unlock()
	if err != nil {
		return err
	}
	m.log.Info("host stopped", "id", id)
	return nil
}

// buildHost makes everything of a host but its boot process, recording it first. The
// caller holds h.op.
func (m *Machine) buildHost(ctx context.Context, h *host, spec HostSpec, rec *hostRecord) error {
	m.mu.Lock()
	nsDir := m.j.Network.NSDir
	m.mu.Unlock()
	up := &upRecord{
		NetNS:   netnsName(m.cfg.Bridge, spec.ID),
		Veth:    vethName(spec.Address),
		Address: netip.PrefixFrom(spec.Address, m.cfg.Range.Bits()).String(),
		MountNS: mountNSFile(nsDir, spec.ID),
		UTSNS:   utsNSFile(nsDir, spec.ID),
		Cgroup:  cgroupPath(m.cfg.Bridge, spec.ID),
	}
	if netnsExists(up.NetNS) {
		return fmt.Errorf("network namespace %s exists and this local cloud did not make it", up.NetNS)
	}
	if linkExists(up.Veth) {
		return fmt.Errorf("network interface %s exists and this local cloud did not make it", up.Veth)
	}
	// From here on the journal shares up: its fields change under mu only.
	if err := m.record(func() { rec.Up = up }); err != nil {
		return err
	}
	if err := os.MkdirAll(rec.Dir, 0o755); err != nil {
		return fmt.Errorf("creating host directory: %w", err)
	}
	spec.PrivatePaths = privatePaths(spec.PrivatePaths)
	for _, p := range spec.PrivatePaths {
		if err := os.MkdirAll(privateSource(rec.Dir, p), 0o755); err != nil {
			return fmt.Errorf("creating private directory for %s: %w", p, err)
		}
		// A private path inside another is mounted on a directory of the outer
		// one's private directory, which must have it.
		for _, outer := range spec.PrivatePaths {
			if rel, ok := strings.CutPrefix(p, outer+"/"); ok {
				if err := os.MkdirAll(filepath.Join(privateSource(rec.Dir, outer), rel), 0o755); err != nil {
					return fmt.Errorf("creating mount point for %s: %w", p, err)
				}
			}
		}
	}
	if err := m.ensureMountPoints(&spec); err != nil {
		return err
	}
	if err := m.cg.create(up.Cgroup); err != nil {
		return err
	}
	if _, err := m.exec(ctx, "", "ip", "netns", "add", up.NetNS); err != nil {
		return err
	}
	if _, err := m.exec(ctx, "", "ip", "link", "add", up.Veth, "type", "veth", "peer", "name", "eth0", "netns", up.NetNS); err != nil {
		return err
	}
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+up.Veth+"/disable_ipv6", []byte("1"), 0o644)
	if _, err := m.exec(ctx, "", "ip", "link", "set", up.Veth, "master", m.cfg.Bridge, "up"); err != nil {
		return err
	}
	if err := m.configureHostNetwork(ctx, h, spec, up); err != nil {
		return err
	}
	return m.makeMountNS(ctx, up, &spec, rec.Dir)
}

// configureHostNetwork gives the host's namespace its address, its default route and
// the route table, and marks it ready for SetRoutes: under routesMu, so a table set
// meanwhile is either read here or programmed by SetRoutes after.
func (m *Machine) configureHostNetwork(ctx context.Context, h *host, spec HostSpec, up *upRecord) error {
	m.routesMu.Lock()
	defer m.routesMu.Unlock()
	m.mu.Lock()
	routes := m.hostRoutes(spec.Address)
	m.mu.Unlock()
	inside := []string{
		"link set lo up",
		"addr add " + up.Address + " dev eth0",
		"link set eth0 up",
		"route add default via " + m.Gateway().String() + " dev eth0",
	}
	for _, r := range routes {
		inside = append(inside, routeLine("replace", r, "eth0"))
	}
	if _, err := m.exec(ctx, strings.Join(inside, "\n")+"\n", "ip", "-n", up.NetNS, "-batch", "-"); err != nil {
		return fmt.Errorf("configuring the network of host %s: %w", spec.ID, err)
	}
	return m.record(func() {
		up.Routes = routes
		h.netReady = true
	})
}

// teardownHost kills a host's processes and removes its mounts, namespaces, veth and
// cgroups (not its directory). It goes on after a failure; the record keeps naming the
// host until everything is gone. The caller holds the host's op lock, or has the
// machine to itself.
func (m *Machine) teardownHost(ctx context.Context, rec *hostRecord) error {
	m.mu.Lock()
	if rec.Up == nil {
		m.mu.Unlock()
		return nil
	}
	up := *rec.Up // its names never change
	if h := m.hosts[rec.ID]; h != nil {
		h.netReady = false
	}
	m.mu.Unlock()
	var errs []error
	if n, err := m.cg.kill(up.Cgroup, killTimeout); err != nil {
		errs = append(errs, err)
	} else if n > 0 {
		m.note(rec.ID, "host going down: killed %d processes left in it", n)
	}
	for _, f := range []string{up.MountNS, up.UTSNS} {
		if err := unmount(f); err != nil {
			errs = append(errs, err)
		} else if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if netnsExists(up.NetNS) {
		if _, err := m.exec(ctx, "", "ip", "netns", "del", up.NetNS); err != nil {
			errs = append(errs, err)
		}
	}
	if err := m.deleteLink(ctx, up.Veth); err != nil {
		errs = append(errs, err)
	}
	if err := m.cg.remove(up.Cgroup, killTimeout); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("taking host %s down: %w", rec.ID, errors.Join(errs...))
	}
	return m.record(func() { rec.Up = nil })
}

// adopt takes over host spec.ID from an earlier run when its boot process still runs in
// intact namespaces, reporting whether it did.
func (m *Machine) adopt(spec HostSpec) bool {
	if m.validateSpec(&spec) != nil {
		return false
	}
	h, err := m.lockHost(spec.ID)
	if err != nil {
		return false
	}
	defer h.op.Unlock()
	m.mu.Lock()
	rec := m.j.Hosts[spec.ID]
	var up upRecord
	if rec != nil && rec.Up != nil {
		up = *rec.Up
	}
	running := h.phase == PhaseRunning
	m.mu.Unlock()
	if running {
		return true
	}
	if up.NetNS == "" || !sameProcess(up.BootPID, up.BootStart) || !netnsExists(up.NetNS) || !linkExists(up.Veth) ||
		!m.cg.exists(up.Cgroup) || up.Address != netip.PrefixFrom(spec.Address, m.cfg.Range.Bits()).String() {
		return false
	}
	for _, f := range []string{up.MountNS, up.UTSNS} {
		if ok, err := mountinfo.IsMountPoint(f); err != nil || !ok {
			return false
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.hosts[spec.ID], h.spec = h, spec
	h.phase, h.netReady = PhaseRunning, true
	h.gen++
	p := m.adoptProcess(up.BootPID, up.BootStart)
	h.proc = p
	m.watch(h, h.gen, p)
	m.log.Info("host adopted", "id", spec.ID, "bootPID", up.BootPID)
	return true
}

// implicitPrivate are private paths every host gets: where named network namespaces
// live, so that namespaces made inside a host (a container runtime's pod sandboxes) are
// not left as files on the machine when the host goes.
var implicitPrivate = []string{"/run/netns"}

// privatePaths returns a host's private paths with the implicit ones, parents before
// the paths inside them (the order they are mounted in).
func privatePaths(given []string) []string {
	out := slices.Clone(given)
	for _, p := range implicitPrivate {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out) // a parent sorts before every path inside it
	return out
}

// routeLine is an `ip route` batch line for r through dev.
func routeLine(op string, r Route, dev string) string {
	return "route " + op + " " + r.Destination.String() + " via " + r.Via.String() + " dev " + dev
}

// hostRoutes returns the routes a host with address self gets: every route but its own.
// The caller holds mu.
func (m *Machine) hostRoutes(self netip.Addr) []Route {
	var out []Route
	for _, r := range m.routes {
		if r.Via != self {
			out = append(out, r)
		}
	}
	return out
}

// bootEnv returns the boot command's environment.
func bootEnv(spec *HostSpec, dir, cgroup string) []string {
	env := map[string]string{
		"PATH": defaultPath,
		"HOME": "/root",
	}
	for k, v := range spec.Env {
		env[k] = v
	}
	env["NEPHELE_INSTANCE_ID"] = spec.ID
	env["NEPHELE_INSTANCE_NAME"] = spec.Name
	env["NEPHELE_INSTANCE_ADDRESS"] = spec.Address.String()
	env["NEPHELE_HOST_DIR"] = dir
	env["NEPHELE_HOST_CGROUP"] = cgroup
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// termResend is how often a stop sends SIGTERM to a boot process that has not exited.
const termResend = time.Second

// terminate sends SIGTERM to a host's boot process and waits up to StopTimeout (or until
// ctx ends) for it to exit, sending it again every termResend: the boot process is PID 1
// of the host's PID namespace, and the kernel drops a signal that reaches it before its
// init has set its traps. The init passes only the first on to the boot command.
func (m *Machine) terminate(ctx context.Context, p *bootProc) {
	deadline := time.Now().Add(m.cfg.StopTimeout)
	for !p.exited() && ctx.Err() == nil {
		if sameProcess(p.pid, p.start) {
			_ = signal(p.pid, syscall.SIGTERM)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		p.wait(ctx, min(left, termResend))
	}
}
