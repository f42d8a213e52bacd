package controllers

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/internal/testkit/controllertest"
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

// TestDeclaredInformers: each controller's spec declares exactly the shared informers its
// New registers, since deploy/render grants the manager list and watch on those and no
// others. The informers a controller registered are those its factory starts.
func TestDeclaredInformers(t *testing.T) {
	fc, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := manager.DefaultControllerConfig()
	cfg.ConfigureCloudRoutes, cfg.ClusterCIDRs = true, []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	for _, spec := range Default() {
		t.Run(spec.Name, func(t *testing.T) {
			cc := controllertest.Context(spec.Name, fc, cfg)
			if _, err := spec.New(t.Context(), cc); err != nil {
				t.Fatalf("New: %v", err)
			}
			cc.Informers.Start(t.Context().Done())
			var got []string
			for typ := range cc.Informers.WaitForCacheSync(t.Context().Done()) {
				got = append(got, resourceOf(t, typ).String())
			}
			var want []string
			for _, gr := range spec.Informers {
				want = append(want, gr.String())
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("New registers informers for %v; the spec declares %v", got, want)
			}
		})
	}
}

// TestDeclaredRBAC: every controller declares the requests its client makes, each with
// the code path that makes them, naming no wildcard.
func TestDeclaredRBAC(t *testing.T) {
	for _, spec := range Default() {
		if len(spec.RBAC) == 0 {
			t.Errorf("%s declares no RBAC rule", spec.Name)
		}
		for _, r := range spec.RBAC {
			if r.Resource == "" || len(r.Verbs) == 0 || slices.Contains(r.Verbs, "*") || !strings.Contains(r.Why, "controllers/") {
				t.Errorf("%s: rule %+v: want a resource, verbs without a wildcard and the code path in Why", spec.Name, r)
			}
		}
	}
}

// resourceOf is the API resource of an informer's object type (*v1.Node: nodes).
func resourceOf(t *testing.T, typ reflect.Type) schema.GroupResource {
	t.Helper()
	obj, ok := reflect.New(typ.Elem()).Interface().(runtime.Object)
	if !ok {
		t.Fatalf("%v is not an API object", typ)
	}
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		t.Fatal(err)
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvks[0])
	return plural.GroupResource()
}
