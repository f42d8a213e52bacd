package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/hosts"
	"github.com/nephele-dev/nephele/localcloud/store"
)

// Console sizes: how much of a host's boot log a console request returns.
const (
	DefaultConsoleBytes = 64 << 10
	MaxConsoleBytes     = 8 << 20
)

// hostsOff says why host instances are refused when they are disabled.
const hostsOff = "host instances are disabled in this local cloud: start it as root with --hosts (records need neither)"

// DefaultHostDir is where a cloud keeps its hosts' journal, namespace files and state
// directories when Config.Hosts.Dir is empty: beside the state file.
func DefaultHostDir(statePath string) string { return statePath + ".hosts" }

// hostsDefaults completes the host configuration; the caller holds a copy.
func (c *Config) hostsDefaults() error {
	if c.Hosts == nil {
		return nil
	}
	h := *c.Hosts
	c.Hosts = &h
	if !c.InstanceCIDR.IsValid() {
		c.InstanceCIDR = hosts.DefaultRange
	}
	if !c.VIPPool.IsValid() {
		// Hosts have a kernel data plane: VIPs routed to them, outside the loopback.
		c.VIPPool = hosts.DefaultVIPPool
	}
	if err := hosts.ValidateRange(c.InstanceCIDR); err != nil {
		return fmt.Errorf("the instance CIDR: %w", err)
	}
	if h.Dir == "" {
		h.Dir = DefaultHostDir(c.StatePath)
	}
	h.Range = c.InstanceCIDR
	h.Logger = c.Logger.WithName("hosts")
	// The hosts belong to this state file: another one does not name them.
	owner, err := filepath.Abs(c.StatePath)
	if err != nil {
		return fmt.Errorf("state file %s: %w", c.StatePath, err)
	}
	h.Owner = owner
	return nil
}

// LostStateError says the state file is missing while the host journal beside it
// records hosts: starting would make a new, empty state, and bringing the machine to it
// would remove those hosts and their directories (their disks) as strays.
type LostStateError struct {
	StatePath, HostDir string
	Hosts              []string
}

func (e *LostStateError) Error() string {
	return fmt.Sprintf("state file %s does not exist, but the host journal in %s records %d hosts of an earlier run (%s): "+
		"starting would remove them and their directories. Restore the state file (or give --state the one they belong to), "+
		"or remove the hosts with localcloud --cleanup --host-dir %s",
		e.StatePath, e.HostDir, len(e.Hosts), strings.Join(e.Hosts, ", "), e.HostDir)
}

// checkLostState refuses to start a cloud with hosts whose state file is gone while
// its host journal still records hosts (a deleted or moved state file, a wrong
// --state): nothing is created or removed.
func checkLostState(cfg Config) error {
	if cfg.Hosts == nil {
		return nil
	}
	if _, err := os.Stat(cfg.StatePath); !errors.Is(err, fs.ErrNotExist) {
		return nil // there, or unreadable: store.Open says which
	}
	owner, ids, err := hosts.RecordedHosts(cfg.Hosts.Dir)
	if err != nil {
		return fmt.Errorf("host instances: %w", err)
	}
	// Hosts of another state file are hosts.Open's to refuse, naming that file.
	if len(ids) > 0 && (owner == "" || owner == cfg.Hosts.Owner) {
		return &LostStateError{StatePath: cfg.StatePath, HostDir: cfg.Hosts.Dir, Hosts: ids}
	}
	return nil
}

// openHosts prepares the machine for hosts and brings the hosts the state records to
// their recorded states: adopted if their boot process outlived a crash of the cloud,
// booted again otherwise, or taken down. Without hosts it refuses a directory whose
// journal records hosts still on the machine.
func (s *Server) openHosts(ctx context.Context) error {
	if s.cfg.Hosts == nil {
		dir := DefaultHostDir(s.cfg.StatePath)
		left, err := hosts.Recorded(dir)
		if err != nil {
			return err
		}
		if left {
			return fmt.Errorf("%s records hosts of an earlier run still on this machine: start with --hosts to take them back, or remove them with localcloud --cleanup", dir)
		}
		return nil
	}
	m, err := hosts.Open(ctx, *s.cfg.Hosts)
	var owner *hosts.OwnerError
	if errors.As(err, &owner) {
		// Another state's hosts: this state does not name them, so they would be
		// removed with their directories.
		return fmt.Errorf("host instances: %w: start with --state %s, or give this state file a host directory of its own with --host-dir", err, owner.Recorded)
	}
	if err != nil {
		return fmt.Errorf("host instances: %w", err)
	}
	s.machine = m
	var desired []hosts.Desired
	after := ""
	for {
		items, next, err := s.store.ListInstances(ctx, after, MaxPageSize, (*api.Instance).IsHost)
		if err != nil {
			return s.releaseHosts(context.WithoutCancel(ctx), err)
		}
		for i := range items {
			inst := &items[i]
			if inst.State == api.InstanceTerminated {
				continue
			}
			spec, err := hostSpec(inst)
			if err != nil {
				// Kept, not forgotten: a host Reconcile is not told of is removed.
				desired = append(desired, hosts.Desired{Spec: hosts.HostSpec{ID: inst.ID, Name: inst.Name}, Broken: err})
				continue
			}
			desired = append(desired, hosts.Desired{Spec: spec, Running: inst.State == api.InstanceRunning})
		}
		if next == "" {
			break
		}
		after = next
	}
	// A host that cannot be brought back does not stop the cloud: its status says why,
	// and a start retries.
	if err := m.Reconcile(ctx, desired); err != nil {
		s.log.Error(err, "bringing hosts to their recorded states")
	}
	if err := s.syncRoutes(ctx); err != nil {
		s.log.Error(err, "programming routes")
	}
	s.log.Info("hosts restored", "count", len(desired))
	return nil
}

// hostSpec is what the machine needs to make an instance's host.
func hostSpec(inst *api.Instance) (hosts.HostSpec, error) {
	addr, ok := internalIP(inst)
	if !ok {
		return hosts.HostSpec{}, fmt.Errorf("host %s has no InternalIP", inst.ID)
	}
	return hosts.HostSpec{
		ID:           inst.ID,
		Name:         inst.Name,
		Address:      addr,
		BootCommand:  inst.BootCommand,
		Env:          inst.Env,
		PrivatePaths: inst.PrivatePaths,
	}, nil
}

func internalIP(inst *api.Instance) (netip.Addr, bool) {
	for _, a := range inst.Addresses {
		if a.Type == api.AddressInternalIP {
			ip, err := netip.ParseAddr(a.Address)
			return ip, err == nil
		}
	}
	return netip.Addr{}, false
}

// checkHost refuses a host the cloud cannot make: hosts disabled, or a private path
// that would hide the cloud's host directory from the host.
func (s *Server) checkHost(spec *api.InstanceSpec) error {
	if spec.Kind != api.InstanceHost {
		return nil
	}
	if s.machine == nil {
		return invalid("spec.kind", hostsOff)
	}
	dir := s.machine.Dir()
	for i, p := range spec.PrivatePaths {
		if p == dir || strings.HasPrefix(dir, p+"/") {
			return invalid(fmt.Sprintf("spec.privatePaths[%d]", i), "%q holds the cloud's host directory %s, which the host needs", p, dir)
		}
	}
	return nil
}

// applyHost brings an instance's host to the instance's state. The caller checked that
// the instance is a host and hosts are enabled.
func (s *Server) applyHost(ctx context.Context, inst *api.Instance) error {
	switch inst.State {
	case api.InstanceRunning:
		spec, err := hostSpec(inst)
		if err != nil {
			return err
		}
		return s.machine.Start(ctx, spec)
	case api.InstanceStopped:
		return s.machine.Stop(ctx, inst.ID)
	default:
		if err := s.machine.Remove(ctx, inst.ID); err != nil {
			return err
		}
		// Routes to it are blackholes now.
		return s.syncRoutes(ctx)
	}
}

// decorate adds a host's machine side to an answer.
func (s *Server) decorate(inst *api.Instance) {
	if !inst.IsHost() || s.machine == nil {
		return
	}
	st, ok := s.machine.Status(inst.ID)
	if !ok {
		return
	}
	inst.Host = &api.HostStatus{
		Phase: string(st.Phase), Dir: st.Dir, Log: st.Log,
		NetNS: st.NetNS, MountNS: st.MountNS, UTSNS: st.UTSNS, Cgroup: st.Cgroup,
		BootPID: st.BootPID, Boots: st.Boots, LastExit: st.LastExit, Error: st.Error,
	}
}

// syncRoutes programs every live route to a host into the machine, like a VPC route
// table. A destination routed in two clusters goes to the route created first; a route
// the machine may not program (its destination outside every guard CIDR, after a
// restart with other guards) is left out and logged.
func (s *Server) syncRoutes(ctx context.Context) error {
	if s.machine == nil {
		return nil
	}
	s.routeMu.Lock()
	defer s.routeMu.Unlock()
	routes, err := s.store.ListAllRoutes(ctx)
	if err != nil {
		return err
	}
	slices.SortStableFunc(routes, func(a, b api.Route) int { return a.CreatedAt.Compare(b.CreatedAt) })
	targets := map[string]*api.Instance{}
	var want []hosts.Route
	for _, r := range routes {
		if r.Blackhole {
			continue
		}
		inst, ok := targets[r.TargetInstance]
		if !ok {
			got, err := s.store.GetInstance(ctx, r.TargetInstance)
			if err != nil && !isNotFound(err) {
				return err
			}
			if err == nil {
				inst = &got
			}
			targets[r.TargetInstance] = inst
		}
		if inst == nil || !inst.IsHost() {
			continue
		}
		via, ok := internalIP(inst)
		dest, err := netip.ParsePrefix(r.DestinationCIDR)
		if !ok || err != nil {
			continue
		}
		hr := hosts.Route{Destination: dest, Via: via}
		if !s.machine.Guarded(hr) {
			s.log.Info("not programming a route outside every guard CIDR", "cluster", r.ClusterName, "route", r.Name, "destination", dest)
			continue
		}
		want = append(want, hr)
	}
	return s.machine.SetRoutes(ctx, want)
}

// checkRouteToHost refuses a route to a host whose destination the machine may not
// program: outside every guard CIDR.
func (s *Server) checkRouteToHost(ctx context.Context, spec *api.RouteSpec) error {
	if s.machine == nil {
		return nil
	}
	var inst api.Instance
	var err error
	if spec.TargetNode != "" {
		inst, err = s.store.GetInstanceByName(ctx, spec.TargetNode)
	} else {
		inst, err = s.store.GetInstance(ctx, spec.TargetInstance)
	}
	if err != nil || !inst.IsHost() {
		return nil // the store's answer (a conflict) or a record: nothing to program
	}
	dest, perr := netip.ParsePrefix(spec.DestinationCIDR)
	via, ok := internalIP(&inst)
	if perr != nil || !ok {
		return nil
	}
	if !s.machine.Guarded(hosts.Route{Destination: dest, Via: via}) {
		return invalid("spec.destinationCIDR", "%s is outside every guard CIDR of this cloud (%v): routes to host instances may only send ranges that cannot leave the machine (localcloud --guard-cidr)", dest, s.machine.Guards())
	}
	return nil
}

// instanceConsole answers the end of a host's boot log.
func (s *Server) instanceConsole(c *call) (int, any, error) {
	q, err := query(c, "tailBytes")
	if err != nil {
		return 0, nil, err
	}
	n := DefaultConsoleBytes
	if v, ok := q["tailBytes"]; ok {
		n, err = strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxConsoleBytes {
			return 0, nil, invalid("tailBytes", "%q: want 1-%d", v, MaxConsoleBytes)
		}
	}
	inst, err := s.lookup(c)
	if err != nil {
		return 0, nil, err
	}
	if !inst.IsHost() {
		return 0, nil, fmt.Errorf("instance %s is a record: only host instances have a console: %w", inst.ID, store.ErrConflict)
	}
	dir := DefaultHostDir(s.cfg.StatePath)
	if s.cfg.Hosts != nil {
		dir = s.cfg.Hosts.Dir
	}
	path := hosts.LogPath(dir, inst.ID)
	out := api.ConsoleOutput{Path: path}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return http.StatusOK, out, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("reading the console of %s: %w", inst.ID, err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return 0, nil, fmt.Errorf("reading the console of %s: %w", inst.ID, err)
	}
	off := max(fi.Size()-int64(n), 0)
	raw, err := io.ReadAll(io.NewSectionReader(f, off, int64(n)))
	if err != nil {
		return 0, nil, fmt.Errorf("reading the console of %s: %w", inst.ID, err)
	}
	out.Output, out.Truncated = string(raw), off > 0
	return http.StatusOK, out, nil
}
