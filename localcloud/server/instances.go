package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/store"
)

// Page sizes of instance listings.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

func (s *Server) createInstance(c *call) (int, any, error) {
	var spec api.InstanceSpec
	if err := decode(c, "spec", &spec); err != nil {
		return 0, nil, err
	}
	if err := spec.Validate(); err != nil {
		return 0, nil, err
	}
	if err := s.checkHost(&spec); err != nil {
		return 0, nil, err
	}
	ctx := c.r.Context()
	now := time.Now().UTC()
	build := func(seq uint64, ip netip.Addr) api.Instance {
		inst := api.Instance{
			Name:         spec.Name,
			Zone:         spec.Zone,
			Region:       spec.Region,
			InstanceType: spec.InstanceType,
			Addresses:    slices.Clone(spec.Addresses),
			Labels:       spec.Labels,
			State:        api.InstanceRunning,
			CreatedAt:    now,
			UpdatedAt:    now,
		}
		if spec.Kind == api.InstanceHost {
			inst.Kind, inst.BootCommand, inst.Env, inst.PrivatePaths = spec.Kind, spec.BootCommand, spec.Env, spec.PrivatePaths
		}
		if inst.Zone == "" {
			inst.Zone = s.cfg.Zones[(seq-1)%uint64(len(s.cfg.Zones))]
		}
		if inst.Region == "" {
			inst.Region = s.cfg.Region
		}
		if inst.InstanceType == "" {
			inst.InstanceType = s.cfg.InstanceType
		}
		if ip.IsValid() {
			inst.Addresses = append([]api.Address{{Type: api.AddressInternalIP, Address: ip.String()}}, inst.Addresses...)
		}
		if !hasAddress(inst.Addresses, api.AddressHostname) {
			inst.Addresses = append(inst.Addresses, api.Address{Type: api.AddressHostname, Address: inst.Name})
		}
		return inst
	}
	var (
		inst api.Instance
		err  error
	)
	switch {
	case hasAddress(spec.Addresses, api.AddressInternalIP):
		inst, err = s.store.CreateInstance(ctx, func(seq uint64) (api.Instance, error) { return build(seq, netip.Addr{}), nil })
	case s.machine != nil:
		// Hosts live on the range: every instance gets a free address of it, never
		// the bridge's.
		inst, err = s.store.CreateInstanceInRange(ctx, s.cfg.InstanceCIDR, nil, func(seq uint64, ip netip.Addr) (api.Instance, error) {
			return build(seq, ip), nil
		})
	default:
		inst, err = s.store.CreateInstance(ctx, func(seq uint64) (api.Instance, error) {
			ip, ok := nthAddr(s.cfg.InstanceCIDR, seq)
			if !ok {
				return api.Instance{}, fmt.Errorf("instance range %s has no address left: %w", s.cfg.InstanceCIDR, store.ErrExhausted)
			}
			return build(seq, ip), nil
		})
	}
	if err != nil {
		return 0, nil, err
	}
	if inst.IsHost() {
		if err := s.bootNew(ctx, &inst); err != nil {
			return 0, nil, err
		}
	}
	s.decorate(&inst)
	return http.StatusCreated, inst, nil
}

// bootNew boots a host just stored. If it cannot, the host and the instance are removed
// again: a create is applied entirely or not at all.
func (s *Server) bootNew(ctx context.Context, inst *api.Instance) error {
	spec, err := hostSpec(inst)
	if err == nil {
		err = s.machine.Start(ctx, spec)
	}
	if err == nil {
		return nil
	}
	undo := context.WithoutCancel(ctx)
	if rerr := s.machine.Remove(undo, inst.ID); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if _, derr := s.store.DeleteInstance(undo, inst.ID); derr != nil {
		err = errors.Join(err, derr)
	}
	return fmt.Errorf("booting host %s: %w", inst.ID, err)
}

func hasAddress(addrs []api.Address, t api.AddressType) bool {
	for _, a := range addrs {
		if a.Type == t {
			return true
		}
	}
	return false
}

// nthAddr returns the n-th address of p counting from its network address, refusing
// the network and IPv4 broadcast addresses of ranges bigger than two addresses.
func nthAddr(p netip.Prefix, n uint64) (netip.Addr, bool) {
	p = p.Masked()
	b := p.Addr().As16()
	carry := n
	for i := 15; i >= 0 && carry > 0; i-- {
		sum := uint64(b[i]) + carry&0xff
		b[i] = byte(sum)
		carry = carry>>8 + sum>>8
	}
	if carry > 0 {
		return netip.Addr{}, false
	}
	a := netip.AddrFrom16(b)
	if p.Addr().Is4() {
		a = a.Unmap()
	}
	if !p.Contains(a) {
		return netip.Addr{}, false
	}
	if reservedInRange(p, a) {
		return netip.Addr{}, false
	}
	return a, true
}

// reservedInRange reports whether a, an address of the masked prefix p, is p's network
// or IPv4 broadcast address in a range bigger than two addresses: never an instance's.
func reservedInRange(p netip.Prefix, a netip.Addr) bool {
	return a.BitLen()-p.Bits() >= 2 && (a == p.Addr() || a.Is4() && !p.Contains(a.Next()))
}

// visible reports whether an instance may be shown under the call's eventual
// consistency: instances younger than InvisibleFor do not exist yet for it.
func (c *call) visible(inst *api.Instance) bool {
	return c.fault.InvisibleFor <= 0 || time.Since(inst.CreatedAt) >= c.fault.InvisibleFor
}

// lookup returns the instance named by the path, as the call may see it.
func (s *Server) lookup(c *call) (api.Instance, error) {
	id := c.r.PathValue("id")
	inst, err := s.store.GetInstance(c.r.Context(), id)
	if err != nil {
		return api.Instance{}, err
	}
	if !c.visible(&inst) {
		return api.Instance{}, fmt.Errorf("instance %s: %w", id, store.ErrNotFound)
	}
	return inst, nil
}

func (s *Server) getInstance(c *call) (int, any, error) {
	inst, err := s.lookup(c)
	if err != nil {
		return 0, nil, err
	}
	s.decorate(&inst)
	return http.StatusOK, inst, nil
}

func (s *Server) getInstanceByName(c *call) (int, any, error) {
	name := c.r.PathValue("name")
	if err := api.ValidateName("name", name); err != nil {
		return 0, nil, err
	}
	inst, err := s.store.GetInstanceByName(c.r.Context(), name)
	if err != nil {
		return 0, nil, err
	}
	if !c.visible(&inst) {
		return 0, nil, fmt.Errorf("instance named %q: %w", name, store.ErrNotFound)
	}
	s.decorate(&inst)
	return http.StatusOK, inst, nil
}

func (s *Server) listInstances(c *call) (int, any, error) {
	q, err := query(c, "limit", "pageToken", "name")
	if err != nil {
		return 0, nil, err
	}
	limit := DefaultPageSize
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageSize {
			return 0, nil, invalid("limit", "%q: want 1-%d", v, MaxPageSize)
		}
		limit = n
	}
	if name, ok := q["name"]; ok {
		if err := api.ValidateName("name", name); err != nil {
			return 0, nil, err
		}
		list := api.InstanceList{Items: []api.Instance{}}
		inst, err := s.store.GetInstanceByName(c.r.Context(), name)
		switch {
		case err == nil && c.visible(&inst):
			s.decorate(&inst)
			list.Items = append(list.Items, inst)
		case err != nil && !isNotFound(err):
			return 0, nil, err
		}
		return http.StatusOK, list, nil
	}
	var after string
	if tok := q["pageToken"]; tok != "" {
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || len(raw) == 0 {
			return 0, nil, invalid("pageToken", "not a token this API handed out")
		}
		after = string(raw)
	}
	items, next, err := s.store.ListInstances(c.r.Context(), after, limit, c.visible)
	if err != nil {
		return 0, nil, err
	}
	for i := range items {
		s.decorate(&items[i])
	}
	list := api.InstanceList{Items: items}
	if list.Items == nil {
		list.Items = []api.Instance{}
	}
	if next != "" {
		list.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(next))
	}
	return http.StatusOK, list, nil
}

// instanceAction returns the handler moving an instance to state: stop, start or
// terminate. Asking for the state it is in succeeds; a terminated instance cannot
// move. A host's machine side follows the recorded state (and is brought to it again
// when the state did not change): a stop answers once the host's processes are gone.
func (s *Server) instanceAction(state api.InstanceState) handler {
	return func(c *call) (int, any, error) {
		id := c.r.PathValue("id")
		// The record and the host change under one lock: a start racing a delete would
		// otherwise rebuild a host after its record is gone.
		defer s.instances.Lock(id)()
		inst, err := s.store.UpdateInstance(c.r.Context(), id, func(inst *api.Instance) error {
			if !c.visible(inst) {
				return fmt.Errorf("instance %s: %w", id, store.ErrNotFound)
			}
			if inst.State == state {
				return nil
			}
			if inst.State == api.InstanceTerminated {
				return fmt.Errorf("instance %s is terminated and cannot become %s: %w", id, state, store.ErrConflict)
			}
			if inst.IsHost() && s.machine == nil && state == api.InstanceRunning {
				return fmt.Errorf("instance %s is a host and cannot start: %s: %w", id, hostsOff, store.ErrConflict)
			}
			inst.State = state
			inst.UpdatedAt = time.Now().UTC()
			return nil
		})
		if err != nil {
			return 0, nil, err
		}
		if inst.IsHost() && s.machine != nil {
			if err := s.applyHost(c.r.Context(), &inst); err != nil {
				return 0, nil, fmt.Errorf("instance %s is %s, but its host is not: %w", id, inst.State, err)
			}
		}
		if inst.State == api.InstanceTerminated {
			// A cloud detaches a terminated instance's volumes and keeps them: after its
			// host is gone, so that no file system of it still holds their devices.
			if err := s.detachInstanceVolumes(c.r.Context(), id); err != nil {
				return 0, nil, fmt.Errorf("instance %s is terminated, but its volumes are not detached: %w", id, err)
			}
		}
		s.decorate(&inst)
		return http.StatusOK, inst, nil
	}
}

func (s *Server) deleteInstance(c *call) (int, any, error) {
	inst, err := s.lookup(c)
	if err != nil {
		return 0, nil, err
	}
	defer s.instances.Lock(inst.ID)()
	if inst.IsHost() && s.machine != nil {
		if err := s.machine.Remove(c.r.Context(), inst.ID); err != nil {
			return 0, nil, fmt.Errorf("removing the host of instance %s: %w", inst.ID, err)
		}
	}
	// After the host: no file system of it holds their devices any more.
	if err := s.detachInstanceVolumes(c.r.Context(), inst.ID); err != nil {
		return 0, nil, fmt.Errorf("detaching the volumes of instance %s: %w", inst.ID, err)
	}
	if _, err := s.store.DeleteInstance(c.r.Context(), inst.ID); err != nil {
		return 0, nil, err
	}
	if inst.IsHost() {
		if err := s.syncRoutes(c.r.Context()); err != nil {
			return 0, nil, fmt.Errorf("instance %s is deleted, but routes to it are not: %w", inst.ID, err)
		}
	}
	return http.StatusNoContent, nil, nil
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
