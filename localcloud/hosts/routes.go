package hosts

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// SetRoutes makes the route table exactly routes, like a VPC route table: each
// destination is sent to its host's address on the machine and inside every host that
// is up (but the target itself); hosts booted later get the table too. Every destination
// must lie inside a guard CIDR, so a route can never send traffic meant for somewhere
// else to a host; a destination given twice keeps its first route. Routes that already
// exist are written again, which repairs any that were removed behind the cloud's back.
func (m *Machine) SetRoutes(ctx context.Context, routes []Route) error {
	var want []Route
	seen := map[string]bool{}
	for _, r := range routes {
		r.Destination = r.Destination.Masked()
		if !m.Guarded(r) {
			return fmt.Errorf("route %s via %s: the destination must lie inside a guard CIDR (%v) and the target inside %s", r.Destination, r.Via, m.cfg.Guards, m.cfg.Range)
		}
		if seen[r.Destination.String()] {
			continue
		}
		seen[r.Destination.String()] = true
		want = append(want, r)
	}
	m.routesMu.Lock()
	defer m.routesMu.Unlock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return errClosed
	}
	m.routes = want
	var up []*hostRecord
	for _, rec := range m.j.Hosts {
		if h := m.hosts[rec.ID]; h != nil && h.netReady && rec.Up != nil {
			up = append(up, rec)
		}
	}
	m.mu.Unlock()
	var errs []error
	if err := m.syncMachineRoutes(ctx, want); err != nil {
		errs = append(errs, err)
	}
	for _, rec := range up {
		if err := m.syncHostRoutes(ctx, rec); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Routes returns the route table last set.
func (m *Machine) Routes() []Route {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.routes)
}

// Guarded reports whether SetRoutes may program a route: its destination inside a guard
// CIDR, its target a host address of the instance range.
func (m *Machine) Guarded(r Route) bool {
	if !r.Destination.IsValid() || !r.Via.Is4() || !m.cfg.Range.Contains(r.Via) || r.Via == m.Gateway() {
		return false
	}
	for _, g := range m.cfg.Guards {
		if g.Bits() <= r.Destination.Bits() && g.Contains(r.Destination.Addr()) {
			return true
		}
	}
	return false
}

// stale returns the routes of have that want does not hold.
func stale(have, want []Route) []Route {
	var out []Route
	for _, r := range have {
		if !slices.Contains(want, r) {
			out = append(out, r)
		}
	}
	return out
}

// union returns a's routes and those of b not in a.
func union(a, b []Route) []Route {
	out := slices.Clone(a)
	for _, r := range b {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// syncMachineRoutes programs the machine's table. The caller holds routesMu, under
// which alone the network record's routes change.
func (m *Machine) syncMachineRoutes(ctx context.Context, want []Route) error {
	n := m.j.Network
	// Record what is about to exist before it does.
	if err := m.record(func() { n.Routes = union(n.Routes, want) }); err != nil {
		return err
	}
	var errs []error
	for _, r := range stale(n.Routes, want) {
		if err := m.delRoute(ctx, "", r.Destination.String()+" via "+r.Via.String()); err != nil {
			errs = append(errs, fmt.Errorf("removing route %s: %w", r.Destination, err))
		}
	}
	table := strconv.FormatUint(uint64(n.Table), 10)
	for _, r := range stale(n.Routes, want) {
		if err := m.delRoute(ctx, "", r.Destination.String()+" via "+r.Via.String()+" table "+table); err != nil {
			errs = append(errs, fmt.Errorf("removing route %s from the bridge's table: %w", r.Destination, err))
		}
	}
	if len(want) > 0 {
		// In the main table for the machine's own traffic, in the bridge's table for
		// hosts that send through the gateway what they have no route for.
		var lines []string
		for _, r := range want {
			lines = append(lines, routeLine("replace", r, m.cfg.Bridge), routeLine("replace", r, m.cfg.Bridge)+" table "+table)
		}
		if _, err := m.exec(ctx, strings.Join(lines, "\n")+"\n", "ip", "-batch", "-"); err != nil {
			errs = append(errs, fmt.Errorf("programming routes on the machine: %w", err))
		}
	}
	return errors.Join(append(errs, m.record(func() {
		if len(errs) == 0 {
			n.Routes = want
		}
	}))...)
}

// syncHostRoutes programs one host's table. The caller holds routesMu. A host taken
// down meanwhile is no error: its routes went with its namespace.
func (m *Machine) syncHostRoutes(ctx context.Context, rec *hostRecord) error {
	m.mu.Lock()
	up := rec.Up
	if up == nil {
		m.mu.Unlock()
		return nil
	}
	self, err := addrOf(up.Address)
	if err != nil {
		m.mu.Unlock()
		return err
	}
	want := m.hostRoutes(self)
	up.Routes = union(up.Routes, want)
	have, netns := up.Routes, up.NetNS
	err = m.save()
	m.mu.Unlock()
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range stale(have, want) {
		if err := m.delRoute(ctx, netns, r.Destination.String()+" via "+r.Via.String()); err != nil {
			errs = append(errs, fmt.Errorf("removing route %s in host %s: %w", r.Destination, rec.ID, err))
		}
	}
	if len(want) > 0 {
		var lines []string
		for _, r := range want {
			lines = append(lines, routeLine("replace", r, "eth0"))
		}
		if _, err := m.exec(ctx, strings.Join(lines, "\n")+"\n", "ip", "-n", netns, "-batch", "-"); err != nil {
			errs = append(errs, fmt.Errorf("programming routes in host %s: %w", rec.ID, err))
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.hosts[rec.ID]; rec.Up != up || h == nil || !h.netReady {
		return nil
	}
	if len(errs) == 0 {
		up.Routes = want
	}
	return errors.Join(append(errs, m.save())...)
}

// addrOf returns the address of a recorded "address/bits".
func addrOf(prefix string) (netip.Addr, error) {
	p, err := netip.ParsePrefix(prefix)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("recorded host address %q: %w", prefix, err)
	}
	return p.Addr(), nil
}
