package server

import (
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
	now := time.Now().UTC()
	inst, err := s.store.CreateInstance(c.r.Context(), func(seq uint64) (api.Instance, error) {
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
		if inst.Zone == "" {
			inst.Zone = s.cfg.Zones[(seq-1)%uint64(len(s.cfg.Zones))]
		}
		if inst.Region == "" {
			inst.Region = s.cfg.Region
		}
		if inst.InstanceType == "" {
			inst.InstanceType = s.cfg.InstanceType
		}
		if !hasAddress(inst.Addresses, api.AddressInternalIP) {
			ip, ok := nthAddr(s.cfg.InstanceCIDR, seq)
			if !ok {
				return api.Instance{}, fmt.Errorf("instance range %s has no address left: %w", s.cfg.InstanceCIDR, store.ErrExhausted)
			}
			inst.Addresses = append([]api.Address{{Type: api.AddressInternalIP, Address: ip.String()}}, inst.Addresses...)
		}
		if !hasAddress(inst.Addresses, api.AddressHostname) {
			inst.Addresses = append(inst.Addresses, api.Address{Type: api.AddressHostname, Address: inst.Name})
		}
		return inst, nil
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, inst, nil
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
	if a.BitLen()-p.Bits() >= 2 && (n == 0 || a.Is4() && !p.Contains(a.Next())) {
		return netip.Addr{}, false
	}
	return a, true
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
// move.
func (s *Server) instanceAction(state api.InstanceState) handler {
	return func(c *call) (int, any, error) {
		id := c.r.PathValue("id")
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
			inst.State = state
			inst.UpdatedAt = time.Now().UTC()
			return nil
		})
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, inst, nil
	}
}

func (s *Server) deleteInstance(c *call) (int, any, error) {
	inst, err := s.lookup(c)
	if err != nil {
		return 0, nil, err
	}
	if _, err := s.store.DeleteInstance(c.r.Context(), inst.ID); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
