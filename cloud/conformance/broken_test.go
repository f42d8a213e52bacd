package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/conformance"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
)

// broken is the fake cloud with one contract violation, named by bug, to prove that the
// suite catches it.
type broken struct {
	*fakecloud.Cloud
	bug string

	calls atomic.Int64
	mu    sync.Mutex
	// seen remembers metadata and statuses for the bugs that serve stale answers.
	seenInstances map[string]cloud.Instance
	seenLBs       map[string]*corev1.LoadBalancerStatus
}

func newBroken(bug string) func(*fakecloud.Cloud) cloud.Provider {
	var b *broken
	return func(fc *fakecloud.Cloud) cloud.Provider {
		if b == nil {
			b = &broken{Cloud: fc, bug: bug, seenInstances: map[string]cloud.Instance{}, seenLBs: map[string]*corev1.LoadBalancerStatus{}}
		}
		return b
	}
}

func (b *broken) Instances() (cloud.Instances, bool)           { return b, true }
func (b *broken) InstanceLister() (cloud.InstanceLister, bool) { return b, true }
func (b *broken) LoadBalancers() (cloud.LoadBalancers, bool)   { return b, true }
func (b *broken) Routes() (cloud.Routes, bool)                 { return b, true }

func (b *broken) ProviderName() string {
	if b.bug == "wrong-name" {
		return "other"
	}
	return b.Cloud.ProviderName()
}

func (b *broken) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloud.Instance, error) {
	if b.bug == "ignores-context" {
		ctx = context.Background()
	}
	inst, err := b.Cloud.InstanceMetadata(ctx, node)
	switch b.bug {
	case "errors-as-not-found":
		if err != nil && !cloud.IsNotFound(err) {
			return nil, cloud.NotFoundf("node %s: %v", node.Name, err)
		}
	case "unstable-metadata":
		if err == nil && b.calls.Add(1)%2 == 0 {
			slices.Reverse(inst.Addresses)
		}
	case "stale-after-delete":
		b.mu.Lock()
		defer b.mu.Unlock()
		key := node.Spec.ProviderID
		if key == "" {
			key = node.Name
		}
		if err == nil {
			b.seenInstances[inst.ProviderID] = *inst
			b.seenInstances[inst.NodeName] = *inst
		} else if old, ok := b.seenInstances[key]; ok && cloud.IsNotFound(err) {
			return &old, nil
		}
	}
	return inst, err
}

func (b *broken) ListInstances(ctx context.Context) ([]cloud.Instance, error) {
	list, err := b.Cloud.ListInstances(ctx)
	switch b.bug {
	case "short-list-on-error":
		if err != nil {
			return nil, nil
		}
	case "incomplete-list":
		list = slices.DeleteFunc(list, func(i cloud.Instance) bool { return strings.HasSuffix(i.NodeName, "-b") })
	}
	return list, err
}

func (b *broken) GetLoadBalancer(ctx context.Context, spec *cloud.LoadBalancerSpec, svc *corev1.Service) (*corev1.LoadBalancerStatus, error) {
	st, err := b.Cloud.GetLoadBalancer(ctx, spec, svc)
	if b.bug == "lb-found-after-delete" {
		b.mu.Lock()
		defer b.mu.Unlock()
		if err == nil {
			b.seenLBs[spec.Name] = st
		} else if old, ok := b.seenLBs[spec.Name]; ok && cloud.IsNotFound(err) {
			return old, nil
		}
	}
	return st, err
}

func (b *broken) EnsureLoadBalancerDeleted(ctx context.Context, spec *cloud.LoadBalancerSpec, svc *corev1.Service) error {
	_, existed := b.LoadBalancer(spec.Name)
	err := b.Cloud.EnsureLoadBalancerDeleted(ctx, spec, svc)
	if b.bug == "delete-missing-not-found" && err == nil && !existed {
		return cloud.NotFoundf("load balancer %s", spec.Name)
	}
	return err
}

func (b *broken) CreateRoute(ctx context.Context, clusterName, nameHint string, route cloud.Route) error {
	if b.bug == "route-create-not-idempotent" {
		for _, r := range b.AllRoutes(clusterName) {
			if r.DestinationCIDR == route.DestinationCIDR {
				return fmt.Errorf("route to %s already exists", route.DestinationCIDR)
			}
		}
	}
	return b.Cloud.CreateRoute(ctx, clusterName, nameHint, route)
}

// TestSuiteCatchesViolations runs the suite against providers that each break one
// clause and checks that exactly the clauses that bug breaks fail.
func TestSuiteCatchesViolations(t *testing.T) {
	tests := []struct {
		bug   string
		setup func(*conformance.Setup, *fakecloud.Cloud)
		// want must fail; may fail as a consequence; everything else must not.
		want, may []string
	}{
		{
			bug:  "errors-as-not-found",
			want: []string{"errors/failing-not-not-found", "errors/throttled-retry-after", "context/canceled", "context/deadline"},
		},
		{
			bug:   "ignores-context",
			setup: func(s *conformance.Setup, _ *fakecloud.Cloud) { s.CancelBound = 500 * time.Millisecond },
			want:  []string{"context/canceled", "context/deadline"},
		},
		{
			bug:  "unstable-metadata",
			want: []string{"instances/metadata-stable"},
			may:  []string{"instances/metadata-complete", "instances/lookup-agree", "lister/complete", "instances/stopped-not-gone"},
		},
		{
			bug:  "short-list-on-error",
			want: []string{"errors/failing-not-not-found", "errors/throttled-retry-after", "context/canceled", "context/deadline"},
		},
		{
			bug:  "incomplete-list",
			want: []string{"lister/complete"},
		},
		{
			bug:  "delete-missing-not-found",
			want: []string{"lb/delete-missing"},
			may:  []string{"lb/delete-idempotent"},
		},
		{
			bug:   "stale-after-delete",
			setup: func(s *conformance.Setup, _ *fakecloud.Cloud) { s.CallTimeout = time.Second },
			want:  []string{"instances/deleted-not-found"},
		},
		{
			bug:   "lb-found-after-delete",
			setup: func(s *conformance.Setup, _ *fakecloud.Cloud) { s.CallTimeout = time.Second },
			want:  []string{"lb/gone-after-delete"},
		},
		{
			bug:  "route-create-not-idempotent",
			want: []string{"routes/create-idempotent", "routes/cluster-scoped", "routes/delete-idempotent"},
		},
		{
			bug:  "wrong-name",
			want: []string{"instances/metadata-complete", "lister/complete"},
		},
		{
			bug: "throttled-without-retry-after",
			setup: func(s *conformance.Setup, fc *fakecloud.Cloud) {
				s.Throttling = func(_ context.Context, p cloud.Provider) (cloud.Provider, func(context.Context) error, error) {
					fc.SetError(fakecloud.AnyOp, fmt.Errorf("HTTP 429: %w", cloud.ErrThrottled))
					return p, func(context.Context) error { fc.SetError(fakecloud.AnyOp, nil); return nil }, nil
				}
			},
			want: []string{"errors/throttled-retry-after"},
		},
		{
			bug: "label-in-kubernetes-domain",
			setup: func(s *conformance.Setup, fc *fakecloud.Cloud) {
				create := s.Instances.(conformance.InstanceFuncs)
				inner := create.Create
				create.Create = func(ctx context.Context, hint string) (string, error) {
					name, err := inner(ctx, hint)
					if err != nil {
						return "", err
					}
					return name, fc.UpdateInstance(fakecloud.DefaultName+"://"+name, func(i *cloud.Instance) {
						i.Labels["node.kubernetes.io/evil"] = "x"
					})
				}
				s.Instances = create
			},
			want: []string{"instances/labels-valid"},
		},
		{
			bug: "factory-cannot-create",
			setup: func(s *conformance.Setup, _ *fakecloud.Cloud) {
				s.Instances = conformance.InstanceFuncs{Create: func(context.Context, string) (string, error) {
					return "", errors.New("quota exceeded")
				}}
			},
			want: []string{"instances/metadata-complete", "instances/labels-valid", "instances/metadata-stable",
				"instances/lookup-agree", "instances/stopped-not-gone", "lister/complete",
				"instances/deleted-not-found", "lister/deleted-absent"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.bug, func(t *testing.T) {
			fc := newFake(t)
			setup := fakeSetup(t, fc, newBroken(tt.bug))
			if tt.setup != nil {
				tt.setup(&setup, fc)
			}
			rep, err := conformance.RunSuite(t.Context(), setup)
			if err != nil {
				t.Fatal(err)
			}
			for _, res := range rep.Results {
				switch {
				case slices.Contains(tt.want, res.Clause):
					if res.Status != conformance.Fail {
						t.Errorf("%s: %s, want FAIL", res.Clause, res.Status)
					} else if res.Message == "" {
						t.Errorf("%s failed without saying why", res.Clause)
					}
				case slices.Contains(tt.may, res.Clause):
				case res.Status == conformance.Fail:
					t.Errorf("%s failed, but the bug does not break it:\n%s", res.Clause, res.Message)
				}
			}
			if !rep.Failed() {
				t.Error("Failed() = false")
			}
			if t.Failed() {
				var b strings.Builder
				_ = rep.WriteText(&b)
				t.Log(b.String())
			}
		})
	}
}
