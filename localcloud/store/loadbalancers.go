package store

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	bolt "go.etcd.io/bbolt"

	"github.com/nephele-dev/nephele/localcloud/api"
)

// vipKey is the index key of a VIP: its 16-byte form, so keys sort in address order.
func vipKey(a netip.Addr) []byte {
	k := a.As16()
	return k[:]
}

func parseVIP(lb *api.LoadBalancer) (netip.Addr, error) {
	a, err := netip.ParseAddr(lb.Status.VIP)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("load balancer %s has no valid VIP %q", lb.Name, lb.Status.VIP)
	}
	return a, nil
}

// GetLoadBalancer returns the load balancer with the given name. Its status holds the
// VIP; health and data-plane errors are not stored.
func (s *Store) GetLoadBalancer(ctx context.Context, name string) (api.LoadBalancer, error) {
	var lb api.LoadBalancer
	err := s.view(ctx, func(tx *bolt.Tx) error {
		ok, err := getJSON(tx.Bucket(bucketLBs), []byte(name), &lb)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("load balancer %s: %w", name, ErrNotFound)
		}
		return nil
	})
	return lb, err
}

// ListLoadBalancers returns every load balancer, in name order.
func (s *Store) ListLoadBalancers(ctx context.Context) ([]api.LoadBalancer, error) {
	var out []api.LoadBalancer
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLBs).ForEach(func(k, v []byte) error {
			var lb api.LoadBalancer
			if err := jsonUnmarshal(k, v, &lb); err != nil {
				return err
			}
			out = append(out, lb)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing load balancers: %w", err)
	}
	return out, nil
}

// PutLoadBalancer creates or replaces a load balancer, claiming its VIP
// (lb.Status.VIP) and releasing the VIP it had before if that changed. It fails with
// ErrConflict when another load balancer holds the VIP.
func (s *Store) PutLoadBalancer(ctx context.Context, lb api.LoadBalancer) error {
	vip, err := parseVIP(&lb)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(lb)
	if err != nil {
		return fmt.Errorf("encoding load balancer %s: %w", lb.Name, err)
	}
	err = s.batch(ctx, func(tx *bolt.Tx) error {
		lbs, vips := tx.Bucket(bucketLBs), tx.Bucket(bucketVIPs)
		// Only the old VIP matters here: decoding into this skips the backends, which
		// are most of a big load balancer's record.
		var old struct {
			Status struct {
				VIP string `json:"vip"`
			} `json:"status"`
		}
		existed, err := getJSON(lbs, []byte(lb.Name), &old)
		if err != nil {
			return err
		}
		if owner := vips.Get(vipKey(vip)); owner != nil && string(owner) != lb.Name {
			return fmt.Errorf("VIP %s belongs to load balancer %s: %w", vip, owner, ErrConflict)
		}
		if existed {
			if oldVIP, err := netip.ParseAddr(old.Status.VIP); err == nil && oldVIP != vip {
				if err := vips.Delete(vipKey(oldVIP)); err != nil {
					return err
				}
			}
		}
		if err := vips.Put(vipKey(vip), []byte(lb.Name)); err != nil {
			return err
		}
		return lbs.Put([]byte(lb.Name), raw)
	})
	if err != nil {
		return fmt.Errorf("storing load balancer %s: %w", lb.Name, err)
	}
	return nil
}

// DeleteLoadBalancer removes a load balancer, releases its VIP and returns what it was.
func (s *Store) DeleteLoadBalancer(ctx context.Context, name string) (api.LoadBalancer, error) {
	var out api.LoadBalancer
	err := s.batch(ctx, func(tx *bolt.Tx) error {
		out = api.LoadBalancer{}
		lbs := tx.Bucket(bucketLBs)
		ok, err := getJSON(lbs, []byte(name), &out)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("load balancer %s: %w", name, ErrNotFound)
		}
		if vip, err := parseVIP(&out); err == nil {
			vips := tx.Bucket(bucketVIPs)
			if owner := vips.Get(vipKey(vip)); string(owner) == name {
				if err := vips.Delete(vipKey(vip)); err != nil {
					return err
				}
			}
		}
		return lbs.Delete([]byte(name))
	})
	if err != nil {
		return api.LoadBalancer{}, fmt.Errorf("deleting load balancer %s: %w", name, err)
	}
	return out, nil
}

// VIPOwner returns the name of the load balancer holding vip, or "" when it is free.
func (s *Store) VIPOwner(ctx context.Context, vip netip.Addr) (string, error) {
	var owner string
	err := s.view(ctx, func(tx *bolt.Tx) error {
		owner = string(tx.Bucket(bucketVIPs).Get(vipKey(vip)))
		return nil
	})
	return owner, err
}

// FreeVIP returns the lowest address of pool that no load balancer holds and skip (if
// not nil) does not reject, skipping the network address and, for IPv4, the broadcast
// address of pools bigger than two addresses. It fails with ErrExhausted when there is
// none. It does not claim the address: PutLoadBalancer does.
func (s *Store) FreeVIP(ctx context.Context, pool netip.Prefix, skip func(netip.Addr) bool) (netip.Addr, error) {
	pool = pool.Masked()
	first := pool.Addr()
	big := first.BitLen()-pool.Bits() >= 2
	if big {
		first = first.Next()
	}
	var free netip.Addr
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketVIPs).Cursor()
		// Walk the candidates and the sorted index together: a candidate is taken
		// exactly when the cursor sits on it.
		k, _ := c.Seek(vipKey(first))
		for cand := first; cand.IsValid() && pool.Contains(cand); cand = cand.Next() {
			if big && cand.Is4() && !pool.Contains(cand.Next()) {
				break // broadcast
			}
			if k != nil && string(k) == string(vipKey(cand)) {
				k, _ = c.Next()
				continue
			}
			if skip != nil && skip(cand) {
				continue
			}
			free = cand
			return nil
		}
		return fmt.Errorf("no free VIP in %s: %w", pool, ErrExhausted)
	})
	return free, err
}
