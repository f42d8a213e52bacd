package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/nephele-dev/nephele/localcloud/api"
)

func clusterName(c *call) (string, error) {
	cluster := c.r.PathValue("cluster")
	return cluster, api.ValidateObjectName("cluster", cluster)
}

func (s *Server) listRoutes(c *call) (int, any, error) {
	cluster, err := clusterName(c)
	if err != nil {
		return 0, nil, err
	}
	routes, err := s.store.ListRoutes(c.r.Context(), cluster)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, api.RouteList{Items: routes}, nil
}

func (s *Server) createRoute(c *call) (int, any, error) {
	cluster, err := clusterName(c)
	if err != nil {
		return 0, nil, err
	}
	var spec api.RouteSpec
	if err := decode(c, "spec", &spec); err != nil {
		return 0, nil, err
	}
	if err := spec.Validate(); err != nil {
		return 0, nil, err
	}
	if err := s.checkRouteToHost(c.r.Context(), &spec); err != nil {
		return 0, nil, err
	}
	route, created, err := s.store.CreateRoute(c.r.Context(), cluster, spec, time.Now().UTC())
	if err != nil {
		return 0, nil, err
	}
	// Also when the route existed: the data plane may have missed it.
	if err := s.syncRoutes(c.r.Context()); err != nil {
		return 0, nil, fmt.Errorf("route %s is stored, but the data plane is not programmed: %w", route.Name, err)
	}
	if created {
		return http.StatusCreated, route, nil
	}
	return http.StatusOK, route, nil
}

func (s *Server) deleteRoute(c *call) (int, any, error) {
	cluster, err := clusterName(c)
	if err != nil {
		return 0, nil, err
	}
	name := c.r.PathValue("name")
	if err := api.ValidateObjectName("name", name); err != nil {
		return 0, nil, err
	}
	if err := s.store.DeleteRoute(c.r.Context(), cluster, name); err != nil {
		return 0, nil, err
	}
	if err := s.syncRoutes(c.r.Context()); err != nil {
		return 0, nil, fmt.Errorf("route %s is deleted, but the data plane still has it: %w", name, err)
	}
	return http.StatusNoContent, nil, nil
}

// applyRoutes applies a RouteChanges in one store transaction and programs the data
// plane once: a burst of route changes costs one call of the account's quota (or the
// cost its fault rules give routes.apply), not one per route.
func (s *Server) applyRoutes(c *call) (int, any, error) {
	cluster, err := clusterName(c)
	if err != nil {
		return 0, nil, err
	}
	var changes api.RouteChanges
	if err := decode(c, "changes", &changes); err != nil {
		return 0, nil, err
	}
	if err := changes.Validate(); err != nil {
		return 0, nil, err
	}
	for i := range changes.Create {
		if err := s.checkRouteToHost(c.r.Context(), &changes.Create[i]); err != nil {
			return 0, nil, fmt.Errorf("create[%d]: %w", i, err)
		}
	}
	routes, _, err := s.store.ApplyRoutes(c.r.Context(), cluster, changes, time.Now().UTC())
	if err != nil {
		return 0, nil, err
	}
	// Also when nothing changed: the data plane may have missed an earlier call.
	if err := s.syncRoutes(c.r.Context()); err != nil {
		return 0, nil, fmt.Errorf("the %d route changes are stored, but the data plane is not programmed: %w", len(changes.Delete)+len(changes.Create), err)
	}
	return http.StatusOK, api.RouteList{Items: routes}, nil
}
