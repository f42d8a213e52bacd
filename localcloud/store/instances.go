package store

import (
	"context"
	"fmt"
	"net/netip"

	bolt "go.etcd.io/bbolt"

	"github.com/nephele-dev/nephele/localcloud/api"
)

// InstanceID returns the ID of the instance created with sequence number seq. IDs sort
// in creation order, which makes listings stable and lets a listing in progress see
// every instance that existed when it started.
func InstanceID(seq uint64) string { return fmt.Sprintf("i-%012x", seq) }

// CreateInstance stores a new instance. build receives the instance's sequence number
// (1, 2, ...) and returns the instance to store; the store sets its ID. It fails with
// ErrAlreadyExists when the name is taken.
func (s *Store) CreateInstance(ctx context.Context, build func(seq uint64) (api.Instance, error)) (api.Instance, error) {
	var out api.Instance
	err := s.update(ctx, func(tx *bolt.Tx) (err error) {
		out, err = insertInstance(tx, build)
		return err
	})
	if err != nil {
		return api.Instance{}, fmt.Errorf("creating instance: %w", err)
	}
	return out, nil
}

// CreateInstanceInRange stores a new instance like CreateInstance, handing build the
// lowest address of pool above its first one (the gateway of a range whose first address
// is the cloud's) that is no instance's InternalIP and that reserved (if not nil) does
// not refuse; the network and IPv4 broadcast addresses are skipped. It fails with
// ErrExhausted when there is none. It reads every instance, so it is for clouds with
// hosts, not for scale runs of records.
func (s *Store) CreateInstanceInRange(ctx context.Context, pool netip.Prefix, reserved func(netip.Addr) bool, build func(seq uint64, addr netip.Addr) (api.Instance, error)) (api.Instance, error) {
	var out api.Instance
	err := s.update(ctx, func(tx *bolt.Tx) error {
		addr, err := freeAddress(tx, pool, reserved)
		if err != nil {
			return err
		}
		out, err = insertInstance(tx, func(seq uint64) (api.Instance, error) { return build(seq, addr) })
		return err
	})
	if err != nil {
		return api.Instance{}, fmt.Errorf("creating instance: %w", err)
	}
	return out, nil
}

func insertInstance(tx *bolt.Tx, build func(seq uint64) (api.Instance, error)) (api.Instance, error) {
	b := tx.Bucket(bucketInstances)
	seq, err := b.NextSequence()
	if err != nil {
		return api.Instance{}, fmt.Errorf("allocating an instance ID: %w", err)
	}
	inst, err := build(seq)
	if err != nil {
		return api.Instance{}, err
	}
	inst.ID = InstanceID(seq)
	names := tx.Bucket(bucketInstanceNames)
	if id := names.Get([]byte(inst.Name)); id != nil {
		return api.Instance{}, fmt.Errorf("instance named %q (%s): %w", inst.Name, id, ErrAlreadyExists)
	}
	if err := names.Put([]byte(inst.Name), []byte(inst.ID)); err != nil {
		return api.Instance{}, err
	}
	if err := putJSON(b, []byte(inst.ID), inst); err != nil {
		return api.Instance{}, err
	}
	return inst, nil
}

// freeAddress returns the lowest host address of pool after its first that no instance
// has as InternalIP and reserved does not refuse.
func freeAddress(tx *bolt.Tx, pool netip.Prefix, reserved func(netip.Addr) bool) (netip.Addr, error) {
	pool = pool.Masked()
	used := map[netip.Addr]bool{}
	err := tx.Bucket(bucketInstances).ForEach(func(k, v []byte) error {
		var inst api.Instance
		if err := jsonUnmarshal(k, v, &inst); err != nil {
			return err
		}
		for _, a := range inst.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == api.AddressInternalIP && pool.Contains(ip) {
				used[ip] = true
			}
		}
		return nil
	})
	if err != nil {
		return netip.Addr{}, err
	}
	// The network address and the first one (a gateway) are never handed out.
	for cand := pool.Addr().Next().Next(); cand.IsValid() && pool.Contains(cand); cand = cand.Next() {
		if cand.Is4() && !pool.Contains(cand.Next()) {
			break // broadcast
		}
		if used[cand] || reserved != nil && reserved(cand) {
			continue
		}
		return cand, nil
	}
	return netip.Addr{}, fmt.Errorf("no free address in instance range %s: %w", pool, ErrExhausted)
}

func getInstance(tx *bolt.Tx, id string) (api.Instance, error) {
	var inst api.Instance
	ok, err := getJSON(tx.Bucket(bucketInstances), []byte(id), &inst)
	if err != nil {
		return api.Instance{}, err
	}
	if !ok {
		return api.Instance{}, fmt.Errorf("instance %s: %w", id, ErrNotFound)
	}
	return inst, nil
}

// GetInstance returns the instance with the given ID.
func (s *Store) GetInstance(ctx context.Context, id string) (api.Instance, error) {
	var inst api.Instance
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		inst, err = getInstance(tx, id)
		return err
	})
	return inst, err
}

// GetInstanceByName returns the instance with the given name.
func (s *Store) GetInstanceByName(ctx context.Context, name string) (api.Instance, error) {
	var inst api.Instance
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		id := tx.Bucket(bucketInstanceNames).Get([]byte(name))
		if id == nil {
			return fmt.Errorf("instance named %q: %w", name, ErrNotFound)
		}
		inst, err = getInstance(tx, string(id))
		return err
	})
	return inst, err
}

// ListInstances returns up to limit instances with IDs after the given one (all when
// after is empty), in ID order, keeping only those keep accepts (nil keeps all). next
// is the last ID looked at when more instances follow it, empty at the end.
func (s *Store) ListInstances(ctx context.Context, after string, limit int, keep func(*api.Instance) bool) (items []api.Instance, next string, err error) {
	if limit <= 0 {
		return nil, "", fmt.Errorf("listing instances: limit %d must be positive", limit)
	}
	err = s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketInstances).Cursor()
		var k, v []byte
		if after == "" {
			k, v = c.First()
		} else {
			k, v = c.Seek([]byte(after))
			if k != nil && string(k) == after {
				k, v = c.Next()
			}
		}
		for ; k != nil; k, v = c.Next() {
			if len(items) == limit {
				// More keys follow the last one returned.
				next = items[len(items)-1].ID
				return nil
			}
			var inst api.Instance
			if err := jsonUnmarshal(k, v, &inst); err != nil {
				return err
			}
			if keep == nil || keep(&inst) {
				items = append(items, inst)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("listing instances: %w", err)
	}
	return items, next, nil
}

// UpdateInstance changes the instance with the given ID with mutate, in one
// transaction, and returns the result. mutate must not change the ID or the name.
func (s *Store) UpdateInstance(ctx context.Context, id string, mutate func(*api.Instance) error) (api.Instance, error) {
	var out api.Instance
	err := s.update(ctx, func(tx *bolt.Tx) error {
		inst, err := getInstance(tx, id)
		if err != nil {
			return err
		}
		name := inst.Name
		if err := mutate(&inst); err != nil {
			return err
		}
		if inst.ID != id || inst.Name != name {
			return fmt.Errorf("instance %s: the ID and name cannot change", id)
		}
		out = inst
		return putJSON(tx.Bucket(bucketInstances), []byte(id), inst)
	})
	if err != nil {
		return api.Instance{}, fmt.Errorf("updating instance %s: %w", id, err)
	}
	return out, nil
}

// DeleteInstance removes the instance with the given ID and returns what it was.
func (s *Store) DeleteInstance(ctx context.Context, id string) (api.Instance, error) {
	var out api.Instance
	err := s.update(ctx, func(tx *bolt.Tx) error {
		inst, err := getInstance(tx, id)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketInstanceNames).Delete([]byte(inst.Name)); err != nil {
			return err
		}
		out = inst
		return tx.Bucket(bucketInstances).Delete([]byte(id))
	})
	if err != nil {
		return api.Instance{}, fmt.Errorf("deleting instance %s: %w", id, err)
	}
	return out, nil
}
