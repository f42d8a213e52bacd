package store

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nephele-dev/nephele/localcloud/api"
)

// ListRoutes returns the routes of a cluster in name order, each marked Blackhole when
// its target instance is gone or terminated.
func (s *Store) ListRoutes(ctx context.Context, cluster string) ([]api.Route, error) {
	out := []api.Route{}
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		out, err = listRoutes(tx, cluster, out)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listing routes of cluster %s: %w", cluster, err)
	}
	return out, nil
}

// ListAllRoutes returns the routes of every cluster, by cluster and then name, each
// marked Blackhole like ListRoutes does, read in one transaction.
func (s *Store) ListAllRoutes(ctx context.Context) ([]api.Route, error) {
	var out []api.Route
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRoutes).ForEachBucket(func(k []byte) (err error) {
			out, err = listRoutes(tx, string(k), out)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing routes: %w", err)
	}
	return out, nil
}

func listRoutes(tx *bolt.Tx, cluster string, out []api.Route) ([]api.Route, error) {
	b := tx.Bucket(bucketRoutes).Bucket([]byte(cluster))
	if b == nil {
		return out, nil
	}
	instances := tx.Bucket(bucketInstances)
	err := b.ForEach(func(k, v []byte) error {
		var r api.Route
		if err := jsonUnmarshal(k, v, &r); err != nil {
			return err
		}
		var inst api.Instance
		ok, err := getJSON(instances, []byte(r.TargetInstance), &inst)
		if err != nil {
			return err
		}
		r.Blackhole = !ok || inst.State == api.InstanceTerminated
		out = append(out, r)
		return nil
	})
	return out, err
}

// CreateRoute creates a route in cluster from a validated spec, resolving its target
// to a live instance. It is idempotent: when a route with the same destination and
// target exists, under any name, it returns that route and created false. A route that exists by name or destination but
// differs fails with ErrConflict, as does a target that does not exist or is
// terminated.
func (s *Store) CreateRoute(ctx context.Context, cluster string, spec api.RouteSpec, now time.Time) (route api.Route, created bool, err error) {
	name := routeName(spec)
	err = s.batch(ctx, func(tx *bolt.Tx) (err error) {
		route, created, err = createRoute(tx, cluster, spec, now)
		return err
	})
	if err != nil {
		return api.Route{}, false, fmt.Errorf("creating route %s in cluster %s: %w", name, cluster, err)
	}
	return route, created, nil
}

// ApplyRoutes applies validated changes to cluster's routes in one transaction, all or
// none: the deletions (a route that does not exist is deleted), then the creations, as
// CreateRoute makes them. It returns the created (or existing) routes in the order of
// changes.Create, and whether any route changed. An error names the change at fault
// ("create[3]") and wraps CreateRoute's.
func (s *Store) ApplyRoutes(ctx context.Context, cluster string, changes api.RouteChanges, now time.Time) (routes []api.Route, changed bool, err error) {
	err = s.batch(ctx, func(tx *bolt.Tx) error {
		routes, changed = make([]api.Route, 0, len(changes.Create)), false
		for i, name := range changes.Delete {
			found, err := deleteRoute(tx, cluster, name)
			if err != nil {
				return fmt.Errorf("delete[%d] (route %s): %w", i, name, err)
			}
			changed = changed || found
		}
		for i, spec := range changes.Create {
			r, created, err := createRoute(tx, cluster, spec, now)
			if err != nil {
				return fmt.Errorf("create[%d] (route %s): %w", i, routeName(spec), err)
			}
			routes = append(routes, r)
			changed = changed || created
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("applying %d route changes in cluster %s: %w", len(changes.Delete)+len(changes.Create), cluster, err)
	}
	return routes, changed, nil
}

// routeName is the name a validated spec's route gets: its own, or one derived from the
// destination.
func routeName(spec api.RouteSpec) string {
	if spec.Name != "" {
		return spec.Name
	}
	if dest, err := netip.ParsePrefix(spec.DestinationCIDR); err == nil {
		return api.RouteName(dest.Masked())
	}
	return spec.DestinationCIDR
}

// createRoute is CreateRoute in tx.
func createRoute(tx *bolt.Tx, cluster string, spec api.RouteSpec, now time.Time) (route api.Route, created bool, err error) {
	dest, err := netip.ParsePrefix(spec.DestinationCIDR)
	if err != nil {
		return api.Route{}, false, fmt.Errorf("route destination %q: %w", spec.DestinationCIDR, err)
	}
	dest = dest.Masked()
	name := routeName(spec)
	target, err := resolveTarget(tx, spec)
	if err != nil {
		return api.Route{}, false, err
	}
	b, dests, err := routeBuckets(tx, cluster)
	if err != nil {
		return api.Route{}, false, err
	}
	want := api.Route{
		Name:                name,
		ClusterName:         cluster,
		DestinationCIDR:     dest.String(),
		TargetNode:          target.Name,
		TargetInstance:      target.ID,
		CreatedAt:           now,
		TargetNodeAddresses: spec.TargetNodeAddresses,
	}
	var existing api.Route
	ok, err := getJSON(b, []byte(name), &existing)
	if err != nil {
		return api.Route{}, false, err
	}
	if ok {
		if existing.DestinationCIDR != want.DestinationCIDR || existing.TargetInstance != want.TargetInstance {
			return api.Route{}, false, fmt.Errorf("route %s already sends %s to %s (%s): %w",
				name, existing.DestinationCIDR, existing.TargetNode, existing.TargetInstance, ErrConflict)
		}
		return existing, false, nil
	}
	// One destination has one route: a second one would make the route table
	// ambiguous.
	if other := dests.Get([]byte(want.DestinationCIDR)); other != nil {
		var r api.Route
		ok, err := getJSON(b, other, &r)
		if err != nil {
			return api.Route{}, false, err
		}
		if !ok {
			return api.Route{}, false, fmt.Errorf("the destination index names route %s for %s, which does not exist", other, want.DestinationCIDR)
		}
		if r.TargetInstance != want.TargetInstance {
			return api.Route{}, false, fmt.Errorf("route %s already sends %s to %s (%s): %w",
				r.Name, r.DestinationCIDR, r.TargetNode, r.TargetInstance, ErrConflict)
		}
		return r, false, nil
	}
	if err := dests.Put([]byte(want.DestinationCIDR), []byte(name)); err != nil {
		return api.Route{}, false, err
	}
	return want, true, putJSON(b, []byte(name), want)
}

// resolveTarget finds the live instance a route spec points at.
func resolveTarget(tx *bolt.Tx, spec api.RouteSpec) (api.Instance, error) {
	id := spec.TargetInstance
	if spec.TargetNode != "" {
		byName := tx.Bucket(bucketInstanceNames).Get([]byte(spec.TargetNode))
		if byName == nil {
			return api.Instance{}, fmt.Errorf("target node %s has no instance: %w", spec.TargetNode, ErrConflict)
		}
		if id != "" && id != string(byName) {
			return api.Instance{}, fmt.Errorf("target node %s is instance %s, not %s: %w", spec.TargetNode, byName, id, ErrConflict)
		}
		id = string(byName)
	}
	inst, err := getInstance(tx, id)
	if err != nil {
		return api.Instance{}, fmt.Errorf("target instance %s does not exist: %w", id, ErrConflict)
	}
	if inst.State == api.InstanceTerminated {
		return api.Instance{}, fmt.Errorf("target instance %s (%s) is terminated: %w", id, inst.Name, ErrConflict)
	}
	return inst, nil
}

// DeleteRoute removes the named route of cluster.
func (s *Store) DeleteRoute(ctx context.Context, cluster, name string) error {
	err := s.batch(ctx, func(tx *bolt.Tx) error {
		found, err := deleteRoute(tx, cluster, name)
		if err == nil && !found {
			err = fmt.Errorf("route %s: %w", name, ErrNotFound)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("deleting route %s of cluster %s: %w", name, cluster, err)
	}
	return nil
}

// deleteRoute removes the named route of cluster in tx and reports whether it existed.
func deleteRoute(tx *bolt.Tx, cluster, name string) (found bool, err error) {
	b := tx.Bucket(bucketRoutes).Bucket([]byte(cluster))
	if b == nil {
		return false, nil
	}
	var r api.Route
	if ok, err := getJSON(b, []byte(name), &r); err != nil || !ok {
		return false, err
	}
	if dests := tx.Bucket(bucketRouteDests).Bucket([]byte(cluster)); dests != nil && string(dests.Get([]byte(r.DestinationCIDR))) == name {
		if err := dests.Delete([]byte(r.DestinationCIDR)); err != nil {
			return false, err
		}
	}
	return true, b.Delete([]byte(name))
}

// routeBuckets returns cluster's route table and destination index, creating them.
func routeBuckets(tx *bolt.Tx, cluster string) (routes, dests *bolt.Bucket, err error) {
	if routes, err = tx.Bucket(bucketRoutes).CreateBucketIfNotExists([]byte(cluster)); err != nil {
		return nil, nil, err
	}
	if dests, err = tx.Bucket(bucketRouteDests).CreateBucketIfNotExists([]byte(cluster)); err != nil {
		return nil, nil, err
	}
	return routes, dests, nil
}

// indexRouteDestinations builds the destination index of every cluster's routes: the
// migration to schema version 2. Where an older file holds two routes to one
// destination (which CreateRoute never allowed), the first by name is indexed.
func indexRouteDestinations(tx *bolt.Tx) error {
	return tx.Bucket(bucketRoutes).ForEachBucket(func(cluster []byte) error {
		b, dests, err := routeBuckets(tx, string(cluster))
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			var r api.Route
			if err := jsonUnmarshal(k, v, &r); err != nil {
				return err
			}
			if dests.Get([]byte(r.DestinationCIDR)) != nil {
				return nil
			}
			return dests.Put([]byte(r.DestinationCIDR), k)
		})
	})
}
