package controllers

import (
	"slices"
	"testing"

	"github.com/nephele-dev/nephele/manager"
)

// The names and aliases are what --controllers and leader-migration files written for
// upstream refer to; they must resolve exactly as upstream's do.
func TestDefaultNamesAndAliases(t *testing.T) {
	specs := Default()
	want := map[string]string{
		"cloud-node":                      manager.CloudNodeController,
		"cloud-node-controller":           manager.CloudNodeController,
		"cloud-node-lifecycle":            manager.CloudNodeLifecycleController,
		"cloud-node-lifecycle-controller": manager.CloudNodeLifecycleController,
		"service":                         manager.ServiceLBController,
		"service-controller":              manager.ServiceLBController,
		"service-lb-controller":           manager.ServiceLBController,
		"route":                           manager.NodeRouteController,
		"route-controller":                manager.NodeRouteController,
		"node-route-controller":           manager.NodeRouteController,
	}
	for alias, canonical := range want {
		got, ok := manager.CanonicalName(specs, alias)
		if !ok || got != canonical {
			t.Errorf("CanonicalName(%q) = %q, %v; want %q", alias, got, ok, canonical)
		}
	}
	enabled, err := manager.SelectControllers(specs, []string{"*"})
	if err != nil {
		t.Fatalf("SelectControllers(*): %v", err)
	}
	all := []string{manager.CloudNodeController, manager.CloudNodeLifecycleController, manager.ServiceLBController, manager.NodeRouteController}
	if !slices.Equal(enabled, all) {
		t.Errorf("* enables %v, want %v", enabled, all)
	}
	for _, s := range specs {
		if s.New == nil {
			t.Errorf("controller %s has no constructor", s.Name)
		}
	}
}
