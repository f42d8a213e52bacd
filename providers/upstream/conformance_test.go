package upstream_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	upstreamfake "k8s.io/cloud-provider/fake"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/cloudtest"
	"github.com/nephele-dev/nephele/providers/upstream"
)

const (
	fakeType   = "fake.medium"
	fakeZone   = "zone-a"
	fakeRegion = "region-1"
)

// newUpstreamFake returns upstream's own fake cloud configured so that the suite's
// checks mean something: addresses, a zone, an external IP for load balancers, a route
// table, instances that exist and are not shut down, and load balancers that do not
// exist until ensured (the fake answers GetLoadBalancer with one global Exists flag).
func newUpstreamFake(v2 bool, err error) *upstreamfake.Cloud {
	f := &upstreamfake.Cloud{
		EnableInstancesV2:  v2,
		ExistsByProviderID: true,
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "10.1.0.1"},
			{Type: corev1.NodeHostName, Address: "fake-host"},
		},
		ProviderID:              map[types.NodeName]string{},
		ExtID:                   map[types.NodeName]string{},
		ExtIDErr:                map[types.NodeName]error{},
		InstanceTypes:           map[types.NodeName]string{},
		Zone:                    cloudprovider.Zone{FailureDomain: fakeZone, Region: fakeRegion},
		ExternalIP:              net.ParseIP("192.0.2.10"),
		RouteMap:                map[string]*upstreamfake.Route{},
		Err:                     err,
		MetadataErr:             err,
		ErrByProviderID:         err,
		ErrShutdownByProviderID: err,
	}
	// The fake's InstanceMetadata looks the type up by the node's provider ID, which is
	// empty for a lookup by node name.
	f.InstanceTypes[""] = fakeType
	if v2 {
		f.AdditionalLabels = map[string]string{"example.com/hosted-by": "nephele"}
	}
	return f
}

// fakeSetup is the conformance setup of the adapter over upstream's fake: v2 selects
// InstancesV2, otherwise Instances with Zones.
func fakeSetup(t *testing.T, v2 bool) cloudtest.Setup {
	t.Helper()
	prefix := "upstream-v1"
	if v2 {
		prefix = "upstream-v2"
	}
	f := newUpstreamFake(v2, nil)
	// By-name lookups of a node no instance backs: only the v1 path has a per-node
	// answer for them.
	f.ExtIDErr[types.NodeName(prefix+"-never")] = cloudprovider.InstanceNotFound
	adapter := func(f *upstreamfake.Cloud) cloud.Provider {
		p, err := upstream.New(f)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := adapter(f)
	// faulty returns the adapter over a fake whose every call fails with err, named
	// for the test instances so that per-node answers fail too.
	faulty := func(err error) cloudtest.Fault {
		return func(context.Context, cloud.Provider) (cloud.Provider, func(context.Context) error, error) {
			ff := newUpstreamFake(v2, err)
			for _, suffix := range []string{"a", "b", "c", "missing"} {
				ff.ExtIDErr[types.NodeName(prefix+"-"+suffix)] = err
			}
			return adapter(ff), nil, nil
		}
	}
	skip := map[string]string{
		"instances/deleted-not-found": "upstream's fake answers InstanceExists(ByProviderID) with one global flag, so one instance cannot be deleted alone",
		"lb/get-after-ensure":         "upstream's fake answers GetLoadBalancer with one global Exists flag; it is false, so that missing and deleted load balancers are NotFound",
		"context/deadline":            "upstream's fake RequestDelay does not delay GetLoadBalancer, so the fake cannot be slow for every call (the adapter's deadlines are tested with a blocking provider)",
	}
	if v2 {
		skip["instances/unknown-not-found"] = "upstream's fake answers InstanceExists with one global flag, so it cannot tell an unknown node from a known one"
	}
	return cloudtest.Setup{
		NewProvider:  func(context.Context) (cloud.Provider, error) { return p, nil },
		Capabilities: []cloudtest.Capability{cloudtest.Instances, cloudtest.LoadBalancers, cloudtest.Routes},
		NamePrefix:   prefix,
		Instances: cloudtest.InstanceFuncs{
			Create: func(_ context.Context, name string) (string, error) {
				node := types.NodeName(name)
				id := "i-" + name
				pid := f.ProviderName() + "://" + id
				f.ProviderID[node] = pid
				f.ExtID[node] = id
				f.InstanceTypes[node] = fakeType
				f.InstanceTypes[types.NodeName(pid)] = fakeType
				return name, nil
			},
			Delete: func(context.Context, string) error {
				return fmt.Errorf("upstream's fake reports existence with one global flag: %w", cloud.ErrNotImplemented)
			},
			Stop: func(context.Context, string) error {
				return fmt.Errorf("upstream's fake reports shutdown with one global flag: %w", cloud.ErrNotImplemented)
			},
		},
		Failing:    faulty(errors.New("dial tcp 127.0.0.1:443: connect: connection refused")),
		Throttling: faulty(api.NewRetryError("rate limit exceeded", 7*time.Second)),
		Skip:       skip,
	}
}

// TestConformanceInstancesV2 runs the suite against upstream's fake with InstancesV2.
func TestConformanceInstancesV2(t *testing.T) {
	rep := cloudtest.Run(t, fakeSetup(t, true))
	if res, _ := rep.Result("instances/metadata-complete"); res.Status != cloudtest.Pass {
		t.Errorf("instances/metadata-complete: %s", res.Status)
	}
}

// TestConformanceInstancesV1 runs the suite against upstream's fake with Instances and
// Zones.
func TestConformanceInstancesV1(t *testing.T) {
	rep := cloudtest.Run(t, fakeSetup(t, false))
	if res, _ := rep.Result("instances/unknown-not-found"); res.Status != cloudtest.Pass {
		t.Errorf("instances/unknown-not-found: %s", res.Status)
	}
}

// hang is an upstream provider whose every call ignores its context and blocks until
// released, as providers with their own retry loops do when their cloud is slow.
type hang struct {
	stub
	release chan struct{}
}

func newHang() *hang {
	h := &hang{release: make(chan struct{})}
	h.name = (&upstreamfake.Cloud{}).ProviderName()
	h.v2, h.lb, h.routes = h, h, h
	return h
}

func (h *hang) wait() { <-h.release }

func (h *hang) InstanceExists(context.Context, *corev1.Node) (bool, error) {
	h.wait()
	return true, nil
}
func (h *hang) InstanceShutdown(context.Context, *corev1.Node) (bool, error) {
	h.wait()
	return false, nil
}
func (h *hang) InstanceMetadata(context.Context, *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	h.wait()
	return nil, cloudprovider.InstanceNotFound
}
func (h *hang) GetLoadBalancer(context.Context, string, *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	h.wait()
	return nil, false, nil
}
func (h *hang) GetLoadBalancerName(_ context.Context, _ string, svc *corev1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(svc)
}
func (h *hang) EnsureLoadBalancer(context.Context, string, *corev1.Service, []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	h.wait()
	return &corev1.LoadBalancerStatus{}, nil
}
func (h *hang) UpdateLoadBalancer(context.Context, string, *corev1.Service, []*corev1.Node) error {
	h.wait()
	return nil
}
func (h *hang) EnsureLoadBalancerDeleted(context.Context, string, *corev1.Service) error {
	h.wait()
	return nil
}
func (h *hang) ListRoutes(context.Context, string) ([]*cloudprovider.Route, error) {
	h.wait()
	return nil, nil
}
func (h *hang) CreateRoute(context.Context, string, string, *cloudprovider.Route) error {
	h.wait()
	return nil
}
func (h *hang) DeleteRoute(context.Context, string, *cloudprovider.Route) error {
	h.wait()
	return nil
}

// TestConformanceDeadlines runs the suite's deadline clause with a slow cloud whose
// provider ignores its context entirely: the adapter alone must return at the
// deadline, never with NotFound (the blocked calls would answer "not found").
func TestConformanceDeadlines(t *testing.T) {
	setup := fakeSetup(t, true)
	delete(setup.Skip, "context/deadline")
	h := newHang()
	t.Cleanup(func() { close(h.release) })
	setup.Slow = func(context.Context, cloud.Provider) (cloud.Provider, func(context.Context) error, error) {
		p, err := upstream.New(h)
		return p, nil, err
	}
	rep := cloudtest.Run(t, setup)
	if res, _ := rep.Result("context/deadline"); res.Status != cloudtest.Pass {
		t.Errorf("context/deadline: %s", res.Status)
	}
}
