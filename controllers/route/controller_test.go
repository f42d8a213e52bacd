package route

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/internal/testkit/controllertest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/manager"
)

func controllerContext(t *testing.T, cfg manager.ControllerConfig, disabled ...fakecloud.Capability) *manager.ControllerContext {
	t.Helper()
	fc, err := fakecloud.New(fakecloud.Options{Name: "acme", Disabled: disabled})
	if err != nil {
		t.Fatal(err)
	}
	return controllertest.Context(manager.NodeRouteController, fc, cfg)
}

func TestSpec(t *testing.T) {
	spec := Spec()
	if want := []string{"route", "route-controller"}; spec.Name != manager.NodeRouteController || !slices.Equal(spec.Aliases, want) {
		t.Errorf("Spec() name/aliases = %q/%q, want %q/%q", spec.Name, spec.Aliases, manager.NodeRouteController, want)
	}
	routesOn := manager.ControllerConfig{ConfigureCloudRoutes: true, ClusterName: "c", ClusterCIDRs: prefixes("10.244.0.0/16")}
	tests := []struct {
		name         string
		cfg          manager.ControllerConfig
		disabled     []fakecloud.Capability
		wantDisabled bool
		wantErr      []string // substrings of a non-disabled error
	}{
		{name: "runs", cfg: routesOn},
		{name: "routes switched off", cfg: manager.ControllerConfig{ClusterCIDRs: prefixes("10.244.0.0/16")}, wantDisabled: true},
		{name: "routes switched off and no CIDR", cfg: manager.ControllerConfig{}, wantDisabled: true},
		{name: "provider without routes", cfg: routesOn, disabled: []fakecloud.Capability{fakecloud.CapRoutes}, wantDisabled: true},
		{
			name:    "no cluster CIDR",
			cfg:     manager.ControllerConfig{ConfigureCloudRoutes: true, ClusterName: "c"},
			wantErr: []string{"--cluster-cidr", "--configure-cloud-routes=false", `"acme"`},
		},
		{
			name:    "zero cluster CIDR",
			cfg:     manager.ControllerConfig{ConfigureCloudRoutes: true, ClusterCIDRs: []netip.Prefix{{}}},
			wantErr: []string{"cluster CIDR 0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctrl, err := spec.New(t.Context(), controllerContext(t, tt.cfg, tt.disabled...))
			switch {
			case tt.wantDisabled:
				if !errors.Is(err, manager.ErrControllerDisabled) {
					t.Fatalf("New() = %v, %v; want a disabled error", ctrl, err)
				}
			case len(tt.wantErr) > 0:
				if err == nil || errors.Is(err, manager.ErrControllerDisabled) {
					t.Fatalf("New() error = %v, want a start-up error (not disabled)", err)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
			default:
				if err != nil || ctrl == nil {
					t.Fatalf("New() = %v, %v; want a controller", ctrl, err)
				}
				ctrl.(*Controller).worker.ShutDown()
			}
		})
	}
	_, err := spec.New(t.Context(), controllerContext(t, manager.ControllerConfig{ConfigureCloudRoutes: true}))
	if !errors.Is(err, ErrNoClusterCIDR) {
		t.Errorf("error %v does not match ErrNoClusterCIDR", err)
	}
}

func TestNewRequiresDependencies(t *testing.T) {
	client := fake.NewClientset()
	fc, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		t.Fatal(err)
	}
	full := Config{
		ControllerDeps: manager.ControllerDeps{
			Client:    client,
			Informers: informers.NewSharedInformerFactory(client, 0),
			Recorder:  record.NewFakeRecorder(1),
		},
		Routes:       fc,
		ClusterCIDRs: prefixes("10.244.0.0/16"),
	}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{name: "client", mutate: func(c *Config) { c.Client = nil }, want: "Client"},
		{name: "informers", mutate: func(c *Config) { c.Informers = nil }, want: "Informers"},
		{name: "routes", mutate: func(c *Config) { c.Routes = nil }, want: "Routes"},
		{name: "recorder", mutate: func(c *Config) { c.Recorder = nil }, want: "Recorder"},
		{name: "cluster CIDRs", mutate: func(c *Config) { c.ClusterCIDRs = nil }, want: "--cluster-cidr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := full
			tt.mutate(&cfg)
			if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New() error = %v, want one naming %s", err, tt.want)
			}
		})
	}
	// Two controllers on one registry share the metrics instead of failing.
	reg := prometheus.NewRegistry()
	for range 2 {
		cfg := full
		cfg.Metrics = reg
		cfg.Informers = informers.NewSharedInformerFactory(client, 0)
		c, err := New(cfg)
		if err != nil {
			t.Fatalf("New() with a shared registry: %v", err)
		}
		c.worker.ShutDown()
	}
}

// TestConditionIsAStatusPatch checks the condition is written as upstream does: a
// strategic merge patch of the status subresource carrying only the one condition.
func TestConditionIsAStatusPatch(t *testing.T) {
	node := nodeWith("a", "10.244.1.0/24")
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	client := fake.NewClientset(node)
	fc, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(10)
	c, err := New(Config{
		ControllerDeps: manager.ControllerDeps{Client: client, Informers: factory, Recorder: recorder},
		Routes:         fc,
		ClusterName:    "c",
		ClusterCIDRs:   prefixes("10.244.0.0/16"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.worker.ShutDown()
	factory.Start(t.Context().Done())
	factory.WaitForCacheSync(t.Context().Done())

	if _, err := c.syncNode(t.Context(), "a"); err != nil {
		t.Fatalf("syncNode: %v", err)
	}
	if got := fc.AllRoutes("c"); len(got) != 1 || got[0].DestinationCIDR != mustPrefix("10.244.1.0/24") || got[0].TargetNode != "a" {
		t.Fatalf("routes = %v, want one to node a", got)
	}
	var patches []k8stesting.PatchAction
	for _, a := range client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			patches = append(patches, p)
		}
	}
	if len(patches) != 1 {
		t.Fatalf("patches = %d, want 1", len(patches))
	}
	p := patches[0]
	if p.GetSubresource() != "status" || p.GetPatchType() != types.StrategicMergePatchType {
		t.Errorf("patch subresource/type = %q/%q, want status/strategic merge", p.GetSubresource(), p.GetPatchType())
	}
	var body struct {
		Status struct {
			Conditions []corev1.NodeCondition `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Status.Conditions) != 1 || body.Status.Conditions[0].Type != corev1.NodeNetworkUnavailable {
		t.Fatalf("patch conditions = %+v, want only NetworkUnavailable", body.Status.Conditions)
	}
	got, err := client.CoreV1().Nodes().Get(t.Context(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 2 {
		t.Errorf("conditions after the patch = %+v, want Ready kept beside NetworkUnavailable", got.Status.Conditions)
	}

	// A second sync with the route in place makes no cloud call: the listing is cached
	// and the route the first sync created was recorded in it.
	wantCalls := fc.TotalCalls()
	if _, err := c.syncNode(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	if fc.TotalCalls() != wantCalls {
		t.Errorf("cloud calls on a second sync = %d, want %d (none)", fc.TotalCalls(), wantCalls)
	}
}

func TestInvalidCreateIsNotRetried(t *testing.T) {
	if !isPermanent(errors.Join(&createError{cloud.Invalidf("x")})) {
		t.Error("a lone invalid create error should be permanent")
	}
	if isPermanent(errors.Join(&createError{cloud.Invalidf("x")}, errors.New("HTTP 500"))) {
		t.Error("an invalid error beside a transient one must be retried")
	}
	if isPermanent(cloud.Throttled(time.Second, nil)) {
		t.Error("throttling must be retried")
	}
}

// TestLateDeleteOfAMovedCIDRIsSkipped covers two workers planning on one CIDR: node b
// takes over the CIDR of gone node a (deleting a's stale route and creating its own);
// a's own sync, planned before that, must not delete the CIDR again, because clouds
// that delete by destination would remove b's new route.
func TestLateDeleteOfAMovedCIDRIsSkipped(t *testing.T) {
	b := nodeWith("b", "10.244.1.0/24")
	client := fake.NewClientset(b)
	fc, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stale := cloud.Route{Name: "old", TargetNode: "a", DestinationCIDR: mustPrefix("10.244.1.0/24")}
	if err := fc.AddRoute("c", stale); err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(Config{
		ControllerDeps: manager.ControllerDeps{Client: client, Informers: factory, Recorder: record.NewFakeRecorder(10)},
		Routes:         fc,
		ClusterName:    "c",
		ClusterCIDRs:   prefixes("10.244.0.0/16"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.worker.ShutDown()
	factory.Start(t.Context().Done())
	factory.WaitForCacheSync(t.Context().Done())
	if err := c.table.refresh(t.Context(), time.Time{}); err != nil {
		t.Fatal(err)
	}

	lateA, _ := c.planNode("a", nil) // a's plan, made before b's sync
	if len(lateA.deletes) != 1 {
		t.Fatalf("a's plan deletes = %v, want the stale route", lateA.deletes)
	}
	if _, err := c.syncNode(t.Context(), "b"); err != nil {
		t.Fatal(err)
	}
	deletes := fc.Calls(cloud.OpDeleteRoute)
	if errs := c.apply(t.Context(), "a", nil, &lateA); len(errs) != 0 {
		t.Fatalf("apply of a's late plan: %v", errs)
	}
	if got := fc.Calls(cloud.OpDeleteRoute); got != deletes {
		t.Errorf("a's late plan made %d delete calls, want none", got-deletes)
	}
	routes := fc.AllRoutes("c")
	if len(routes) != 1 || routes[0].TargetNode != "b" {
		t.Errorf("routes = %v, want b's route only", routes)
	}
}

// TestNewOnRunningInformers builds the controller on an informer factory that already
// runs and holds Nodes, as the manager does for a controller it builds once it leads
// (under a migration lease, say): the informer hands the new handler every Node at once,
// which must find the worker there to queue them.
func TestNewOnRunningInformers(t *testing.T) {
	client := fake.NewClientset(nodeWith("a", "10.244.1.0/24"), nodeWith("b", "10.244.2.0/24"))
	fc, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	factory.Core().V1().Nodes().Informer()
	factory.Start(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	factory.WaitForCacheSync(t.Context().Done())

	c, err := New(Config{
		ControllerDeps: manager.ControllerDeps{Client: client, Informers: factory, Recorder: record.NewFakeRecorder(10)},
		Routes:         fc,
		ClusterName:    "c",
		ClusterCIDRs:   prefixes("10.244.0.0/16"),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	poll.Eventually(t, "a route for each Node the informer held before the controller existed", func() error {
		if got := fc.AllRoutes("c"); len(got) != 2 {
			return fmt.Errorf("routes %v", got)
		}
		return nil
	})
}
