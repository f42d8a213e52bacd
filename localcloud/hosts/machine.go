package hosts

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// ErrNotRoot is returned by Open when the process is not root: hosts need namespaces,
// a bridge, routes, iptables, mounts and cgroups.
var ErrNotRoot = errors.New("host instances need root (namespaces, a bridge, routes, iptables, mounts and cgroups)")

// OwnerError is Open's answer for a directory whose journal records another owner than
// Config.Owner.
type OwnerError struct {
	// Dir is the machine directory; Recorded the owner its journal names; Owner the
	// one given.
	Dir, Recorded, Owner string
}

func (e *OwnerError) Error() string {
	return fmt.Sprintf("host directory %s holds the hosts of %s, not of %s", e.Dir, e.Recorded, e.Owner)
}

// killTimeout bounds killing a host's processes and removing its cgroups.
const killTimeout = 10 * time.Second

// HostSpec is what a host is made from: the instance it is, its address and what it boots.
type HostSpec struct {
	// ID is the instance ID; it names the host's namespaces, cgroup and directory.
	ID string
	// Name is the instance name; it is the host's host name when it fits (64 bytes).
	Name string
	// Address is the host's address, inside the range and not the gateway.
	Address netip.Addr
	// BootCommand is the argv the host runs, its init: started when the host boots,
	// started again (after the host's other processes are killed) when it exits.
	BootCommand []string
	// Env is added to the boot command's environment.
	Env map[string]string
	// PrivatePaths are absolute directories that get a private directory of the host's
	// bind-mounted over them in the host's mount namespace.
	PrivatePaths []string
}

// Desired is a host and the state it should be in; see Reconcile.
type Desired struct {
	Spec    HostSpec
	Running bool
	// Broken, when set, says why the caller cannot describe the host, of which Spec
	// then holds the ID alone: the host is kept, stopped, with its directory, and its
	// Status reports why.
	Broken error
}

// Route sends a destination to a host's address, like a VPC route table entry.
type Route struct {
	Destination netip.Prefix `json:"destination"`
	Via         netip.Addr   `json:"via"`
}

// Phase is where a host is in its life.
type Phase string

// Phases.
const (
	// PhaseRunning: the host is up and its boot command runs, or waits to run again
	// after it exited.
	PhaseRunning Phase = "running"
	// PhaseStopping: the boot command got SIGTERM; the host goes down.
	PhaseStopping Phase = "stopping"
	// PhaseStopped: the host is down; its directory is kept.
	PhaseStopped Phase = "stopped"
)

// Status is what a Machine reports about a host.
type Status struct {
	Phase Phase
	// Dir is the host's state directory (NEPHELE_HOST_DIR); Log its boot log.
	Dir, Log string
	// NetNS, MountNS and UTSNS are the namespace files, while up (with the PID
	// namespace of BootPID, what a process inside the host is in).
	NetNS, MountNS, UTSNS string
	// Cgroup is the host's cgroup path relative to each hierarchy's root.
	Cgroup string
	// BootPID is the running boot process, the host's init (PID 1 of its PID
	// namespace), 0 when none runs.
	BootPID int
	// Boots counts the boot command's starts since the cloud started.
	Boots int
	// LastExit says how the boot process last ended: as its boot command did (exit
	// status 128+N after signal N), or "signal: killed" when it was killed itself.
	LastExit string
	// Error is the last failure to boot the host, cleared by a successful boot.
	Error string
}

// Machine makes and supervises the hosts of one local cloud. Its methods are safe for
// concurrent use.
//
// Locking: mu guards the journal and the in-memory state (the host map, each host's
// runtime fields, the route table, closed) and is held only while they are read or
// changed, never while a command runs or a process is waited for or killed, so Status
// answers while hosts start and stop. A host's op lock serializes its lifecycle (start,
// stop, remove, adopt, the restart after its boot process exits); the commands and kill
// loops of a host run under it. routesMu serializes programming routes, diskMu the
// volumes' devices. The order is op, then routesMu or diskMu, then mu.
type Machine struct {
	cfg  Config
	log  logr.Logger
	cg   *cgroups
	lock *os.File
	// exec runs a command (run; a test may hold commands back).
	exec func(ctx context.Context, stdin string, name string, args ...string) (string, error)

	// routesMu serializes SetRoutes, a host's network setup and the network's
	// teardown, so a host never misses a route table set while it was being built.
	routesMu sync.Mutex
	// vipMu serializes SetLoadBalancers.
	vipMu sync.Mutex
	// diskMu serializes attaching, detaching and resizing volumes' devices.
	diskMu sync.Mutex

	mu     sync.Mutex
	j      *journal
	hosts  map[string]*host
	routes []Route
	closed bool

	// stop is closed once the machine is closed: the goroutines watching boot
	// processes (and polling adopted ones) end.
	stop chan struct{}
	// wg counts the goroutines watching and polling boot processes.
	wg sync.WaitGroup
}

// newMachine returns a machine over a loaded journal.
func newMachine(cfg Config, cg *cgroups, lock *os.File, j *journal) *Machine {
	return &Machine{cfg: cfg, log: cfg.Logger, cg: cg, lock: lock, exec: run, j: j, hosts: map[string]*host{}, stop: make(chan struct{})}
}

// host is one host's runtime state, guarded by Machine.mu except op and id.
type host struct {
	// op serializes the host's lifecycle operations (start, stop, remove, adopt, the
	// watcher's restart), including their commands and waits.
	op sync.Mutex
	// id is the host's instance ID; it never changes.
	id string

	spec  HostSpec
	phase Phase
	// gen changes whenever the host is started or stopped; a watcher or a restart
	// timer of an older generation does nothing.
	gen      uint64
	proc     *bootProc
	timer    *time.Timer
	backoff  time.Duration
	boots    int
	lastExit string
	lastErr  string
	// netReady is set while the host's network namespace is configured: SetRoutes
	// programs only such hosts.
	netReady bool
}

// Open prepares the machine for hosts: it takes the directory's lock, reads its journal,
// creates (or takes back from an earlier run of the same directory) the bridge, the guard
// routes and the forward chain. Hosts an earlier run left are adopted or removed by
// Reconcile, which the caller runs next.
func Open(ctx context.Context, cfg Config) (*Machine, error) {
	if err := cfg.complete(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if err := lookTools(); err != nil {
		return nil, err
	}
	cg, err := discoverCgroups()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating host directory %s: %w", cfg.Dir, err)
	}
	lock, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	j, err := loadJournal(cfg.Dir)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	if cfg.Owner != "" && j.Owner != "" && j.Owner != cfg.Owner {
		_ = lock.Close()
		return nil, &OwnerError{Dir: cfg.Dir, Recorded: j.Owner, Owner: cfg.Owner}
	}
	// Nothing else can reach m yet: its steps lock mu only to record.
	m := newMachine(cfg, cg, lock, j)
	if cfg.Owner != "" && j.Owner == "" {
		if err := m.record(func() { j.Owner = cfg.Owner }); err != nil {
			_ = lock.Close()
			return nil, err
		}
	}
	if err := m.setupNetwork(ctx); err != nil {
		return nil, m.failOpen(err)
	}
	if err := m.setupNSDir(); err != nil {
		return nil, m.failOpen(err)
	}
	m.keepLogs()
	m.log.Info("host network ready", "bridge", cfg.Bridge, "gateway", Gateway(cfg.Range), "range", cfg.Range, "guards", cfg.Guards, "vipPool", cfg.VIPPool, "dir", cfg.Dir)
	return m, nil
}

// failOpen undoes a half-made machine (what the journal records) and releases the lock.
func (m *Machine) failOpen(err error) error {
	if m.j.Network != nil {
		if terr := m.teardownAll(context.Background(), false); terr != nil {
			err = errors.Join(err, terr)
		}
	}
	_ = m.lock.Close()
	return err
}

// Dir returns the machine's directory.
func (m *Machine) Dir() string { return m.cfg.Dir }

// Gateway returns the bridge's address, every host's default gateway.
func (m *Machine) Gateway() netip.Addr { return Gateway(m.cfg.Range) }

// Range returns the instance range.
func (m *Machine) Range() netip.Prefix { return m.cfg.Range }

// Guards returns the guard CIDRs.
func (m *Machine) Guards() []netip.Prefix { return slices.Clone(m.cfg.Guards) }

// Bridge returns the bridge's name.
func (m *Machine) Bridge() string { return m.cfg.Bridge }

// HostDir returns the state directory of host id.
func (m *Machine) HostDir(id string) string { return HostDir(m.cfg.Dir, id) }

// LogPath returns the boot log of host id: the boot command's standard output and
// error, and a line from the cloud for each start and exit.
func (m *Machine) LogPath(id string) string { return LogPath(m.cfg.Dir, id) }

// HostDir returns the state directory of host id in a machine directory.
func HostDir(dir, id string) string { return filepath.Join(dir, id) }

// MountNSPath returns the mount namespace file of host id in a machine directory, there
// while the host is up: every process of the host's init and boot command is in it,
// which tells them from another host's (procstat.ByInnerPID).
func MountNSPath(dir, id string) string { return mountNSFile(filepath.Join(dir, nsDirName), id) }

// mountNSFile is host id's mount namespace file in the namespace directory.
func mountNSFile(nsDir, id string) string { return filepath.Join(nsDir, id+".mnt") }

// utsNSFile is host id's UTS namespace file in the namespace directory.
func utsNSFile(nsDir, id string) string { return filepath.Join(nsDir, id+".uts") }

// LogPath returns the boot log of host id in a machine directory.
func LogPath(dir, id string) string { return filepath.Join(dir, id, bootLogName) }

// Recorded reports whether the journal in dir records anything on the machine (not
// only host directories): what a local cloud killed while running hosts leaves, for
// Cleanup or the next Open to remove. A missing directory records nothing.
func Recorded(dir string) (bool, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	j, err := loadJournal(dir)
	if err != nil {
		return false, err
	}
	return !j.empty(), nil
}

// RecordedHosts returns the owner the journal in dir records (Config.Owner, empty when
// none was given) and the IDs of the hosts it records, up or not: a host's directory is
// its state, and a Machine opened without the host in Reconcile's desired set removes
// it. A missing directory records none.
func RecordedHosts(dir string) (owner string, ids []string, err error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return "", nil, nil
	}
	j, err := loadJournal(dir)
	if err != nil {
		return "", nil, err
	}
	ids = slices.Collect(maps.Keys(j.Hosts))
	slices.Sort(ids)
	return j.Owner, ids, nil
}

// save writes the journal; the caller holds mu.
func (m *Machine) save() error { return m.j.save(m.cfg.Dir) }

// record makes change to the journal and writes it, under mu: every change to the
// machine is recorded before it is made.
func (m *Machine) record(change func()) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	change()
	return m.save()
}

// hostNamed returns the runtime state of host id, creating it; the caller holds mu.
func (m *Machine) hostNamed(id string) *host {
	h := m.hosts[id]
	if h == nil {
		h = &host{id: id, phase: PhaseStopped}
		m.hosts[id] = h
	}
	return h
}

// hostFor returns the runtime state of spec's host, creating it, with spec; the caller
// holds mu.
func (m *Machine) hostFor(spec HostSpec) *host {
	h := m.hostNamed(spec.ID)
	h.spec = spec
	return h
}

// Status returns what the machine knows about host id; false when it knows nothing.
func (m *Machine) Status(id string) (Status, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, rec := m.hosts[id], m.j.Hosts[id]
	if h == nil && rec == nil {
		return Status{}, false
	}
	st := Status{Phase: PhaseStopped, Dir: m.HostDir(id), Log: m.LogPath(id)}
	if h != nil {
		st.Phase, st.Boots, st.LastExit, st.Error = h.phase, h.boots, h.lastExit, h.lastErr
		if h.proc != nil && !h.proc.exited() {
			st.BootPID = h.proc.pid
		}
	}
	if rec != nil && rec.Up != nil {
		st.NetNS, st.MountNS, st.UTSNS, st.Cgroup = netnsPath(rec.Up.NetNS), rec.Up.MountNS, rec.Up.UTSNS, rec.Up.Cgroup
	}
	return st, true
}

// Reconcile brings the machine to the desired hosts, after Open: a host that should run
// and whose boot process from an earlier run still lives in intact namespaces is adopted;
// one that should run otherwise is (re)built and booted; one that should be stopped, or
// is broken, is taken down; hosts the journal knows and desired does not name are
// removed with their directories, so desired must name every host the caller knows. It
// goes on after a failure and returns every error, broken hosts' included; a host that
// failed shows the error in its Status.
func (m *Machine) Reconcile(ctx context.Context, desired []Desired) error {
	want := map[string]bool{}
	for _, d := range desired {
		want[d.Spec.ID] = true
	}
	m.mu.Lock()
	var gone []string
	for id := range m.j.Hosts {
		if !want[id] {
			gone = append(gone, id)
		}
	}
	m.mu.Unlock()
	var errs []error
	for _, id := range gone {
		if err := m.Remove(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range desired {
		var err error
		switch {
		case d.Broken != nil:
			err = fmt.Errorf("host %s is kept stopped, with its directory: %w", d.Spec.ID, d.Broken)
			if serr := m.Stop(ctx, d.Spec.ID); serr != nil {
				err = errors.Join(err, serr)
			}
			m.mu.Lock()
			m.hostNamed(d.Spec.ID).lastErr = err.Error()
			m.mu.Unlock()
		case !d.Running:
			err = m.Stop(ctx, d.Spec.ID)
			m.mu.Lock()
			m.hostFor(d.Spec)
			m.mu.Unlock()
		case m.adopt(d.Spec):
		default:
			err = m.Start(ctx, d.Spec)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close stops every host (SIGTERM, StopTimeout, then SIGKILL of all that is left) and
// removes everything the machine made but the hosts' directories and the journal, which
// then records only those directories. It goes on after failures and returns them all.
// When ctx ends, hosts still stopping are killed without waiting any longer, and Close
// returns without waiting for its goroutines.
func (m *Machine) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	ids := make([]string, 0, len(m.hosts))
	for id := range m.hosts {
		ids = append(ids, id)
	}
	m.mu.Unlock()

	errc := make(chan error, len(ids))
	for _, id := range ids {
		go func() { errc <- m.Stop(ctx, id) }()
	}
	var errs []error
	for range ids {
		if err := <-errc; err != nil {
			errs = append(errs, err)
		}
	}
	if err := m.teardownAll(context.WithoutCancel(ctx), false); err != nil {
		errs = append(errs, err)
	}
	// Only now: a stop waits for an adopted boot process through its poller.
	close(m.stop)
	if err := m.waitGoroutines(ctx); err != nil {
		errs = append(errs, err)
	}
	_ = m.lock.Close()
	if len(errs) == 0 {
		m.log.Info("host network removed", "bridge", m.cfg.Bridge)
	}
	return errors.Join(errs...)
}

// Release lets go of the machine without stopping its hosts: supervision ends (no
// restarts; the goroutines watching boot processes end, or ctx does), the directory's
// lock is released, and everything stays on the machine, recorded in the journal, for
// the next Open to adopt (hosts whose boot process lives on) or Cleanup to remove. It is
// what a cloud that fails to start does with the hosts it adopted or booted. Close or
// Release a second time does nothing.
func (m *Machine) Release(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	for _, h := range m.hosts {
		if h.timer != nil {
			h.timer.Stop()
			h.timer = nil
		}
	}
	m.mu.Unlock()
	close(m.stop)
	err := m.waitGoroutines(ctx)
	_ = m.lock.Close()
	m.log.Info("host machine released; its hosts keep running", "dir", m.cfg.Dir)
	return err
}

// waitGoroutines waits until the goroutines watching boot processes have ended, or ctx
// ends. They end soon after stop is closed; a watcher may be killing what its boot
// process left (killTimeout).
func (m *Machine) waitGoroutines(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("goroutines watching boot processes still run: %w", context.Cause(ctx))
	}
}

// teardownAll takes every host down (removing its directory too when removeDirs) and
// removes the shared network, the namespace directory, the shared cgroups and the mount
// points the machine created. The caller has the machine to itself: it is being opened,
// closed or cleaned up, and no host operation runs.
func (m *Machine) teardownAll(ctx context.Context, removeDirs bool) error {
	m.routesMu.Lock()
	defer m.routesMu.Unlock()
	m.mu.Lock()
	recs := maps.Clone(m.j.Hosts)
	m.mu.Unlock()
	// Hosts first: a volume still mounted in a host's mount namespace (a cloud killed
	// while pods used it) keeps its device busy until the namespace is gone. Then the
	// disks, whose links are in the hosts' directories, then those.
	var errs []error
	down := map[string]bool{}
	for id, rec := range recs {
		if err := m.teardownHost(ctx, rec); err != nil {
			errs = append(errs, err)
			continue
		}
		down[id] = true
	}
	errs = append(errs, m.teardownDisks(ctx)...)
	for id, rec := range recs {
		if removeDirs && down[id] {
			if err := os.RemoveAll(rec.Dir); err != nil {
				errs = append(errs, fmt.Errorf("removing host directory %s: %w", rec.Dir, err))
				continue
			}
			if err := m.record(func() { delete(m.j.Hosts, id) }); err != nil {
				errs = append(errs, err)
			}
		}
	}
	m.mu.Lock()
	n, created := m.j.Network, slices.Clone(m.j.CreatedDirs)
	m.mu.Unlock()
	if n != nil {
		errs = append(errs, m.teardownNetwork(ctx, n)...)
		if n.NSDir != "" {
			errs = append(errs, teardownNSDir(n.NSDir)...)
		}
		for _, rel := range []string{cgroupRoot + "/" + n.Bridge, cgroupRoot} {
			if err := m.cg.removeIfEmpty(rel); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := removeEmptyTree(created[i]); err != nil {
			m.log.Info("leaving a mount point directory the local cloud created: it is not empty", "dir", created[i], "err", err.Error())
		}
	}
	err := m.record(func() {
		if len(errs) == 0 {
			m.j.Network, m.j.CreatedDirs = nil, nil
		}
	})
	if err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Cleanup removes everything the journal in dir records: the hosts' processes,
// namespaces, mounts, veths and cgroups, the bridge, the routes, the guard routes and the
// forward chain, the hosts' directories and the journal. It is what a caller runs for a
// directory whose local cloud was killed and will not be started again; it fails when a
// running local cloud holds the directory. A missing directory is not an error.
func Cleanup(ctx context.Context, dir string, log logr.Logger) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	lock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer func() { _ = lock.Close() }()
	j, err := loadJournal(dir)
	if err != nil {
		return err
	}
	if !j.empty() && os.Geteuid() != 0 {
		return fmt.Errorf("cleaning up host directory %s: %w", dir, ErrNotRoot)
	}
	m := newMachine(Config{Dir: dir, Logger: log}, nil, nil, j)
	if !j.empty() {
		if m.cg, err = discoverCgroups(); err != nil {
			return err
		}
	}
	if err := m.teardownAll(ctx, true); err != nil {
		return fmt.Errorf("cleaning up host directory %s: %w", dir, err)
	}
	for _, name := range []string{journalName, lockName, nsDirName} {
		_ = os.Remove(filepath.Join(dir, name))
	}
	_ = os.Remove(dir) // only when nothing else is left in it
	log.Info("host directory cleaned up", "dir", dir)
	return nil
}
