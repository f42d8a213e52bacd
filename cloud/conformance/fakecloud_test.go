package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/cloudtest"
	"github.com/nephele-dev/nephele/cloud/conformance"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
)

// fakeSetup is the conformance setup of a fakecloud.Cloud: instances are seeded
// directly, faults are the fake's knobs. provider, when set, wraps the cloud as the
// provider under test.
func fakeSetup(t *testing.T, fc *fakecloud.Cloud, provider func(*fakecloud.Cloud) cloud.Provider) conformance.Setup {
	t.Helper()
	if provider == nil {
		provider = func(fc *fakecloud.Cloud) cloud.Provider { return fc }
	}
	var seq atomic.Int32
	pid := func(nodeName string) string { return fakecloud.DefaultName + "://" + nodeName }
	return conformance.Setup{
		NewProvider:  func(context.Context) (cloud.Provider, error) { return provider(fc), nil },
		Capabilities: conformance.AllCapabilities(),
		Instances: conformance.InstanceFuncs{
			Create: func(_ context.Context, hint string) (string, error) {
				n := seq.Add(1)
				return hint, fc.AddInstance(cloud.Instance{
					NodeName:     hint,
					InstanceType: "fake.small",
					Zone:         fmt.Sprintf("zone-%d", n%3),
					Region:       "region-1",
					Addresses: []corev1.NodeAddress{
						{Type: corev1.NodeInternalIP, Address: netip.AddrFrom4([4]byte{10, 0, 0, byte(n)}).String()},
						{Type: corev1.NodeHostName, Address: hint},
					},
					Labels: map[string]string{"example.com/pool": "blue"},
				})
			},
			Delete: func(_ context.Context, nodeName string) error {
				if !fc.RemoveInstance(pid(nodeName)) {
					return cloud.NotFoundf("fake instance %s", nodeName)
				}
				return nil
			},
			Stop: func(_ context.Context, nodeName string) error {
				return fc.SetInstanceState(pid(nodeName), cloud.InstanceStopped)
			},
		},
		Failing: func(context.Context, cloud.Provider) (cloud.Provider, func(context.Context) error, error) {
			fc.SetError(fakecloud.AnyOp, errors.New("dial tcp 127.0.0.1:1: connect: connection refused"))
			return provider(fc), func(context.Context) error { fc.SetError(fakecloud.AnyOp, nil); return nil }, nil
		},
		Throttling: func(context.Context, cloud.Provider) (cloud.Provider, func(context.Context) error, error) {
			fc.Throttle(fakecloud.AnyOp, 3*time.Second)
			return provider(fc), func(context.Context) error { fc.SetError(fakecloud.AnyOp, nil); return nil }, nil
		},
		Slow: func(context.Context, cloud.Provider) (cloud.Provider, func(context.Context) error, error) {
			fc.SetLatency(fakecloud.AnyOp, time.Hour)
			return provider(fc), func(context.Context) error { fc.SetLatency(fakecloud.AnyOp, 0); return nil }, nil
		},
	}
}

func newFake(t *testing.T) *fakecloud.Cloud {
	t.Helper()
	fc, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return fc
}

// TestFakecloudConformance runs the whole suite against the fake cloud, with every
// capability and every fault, and checks that the suite left the cloud as it found it.
func TestFakecloudConformance(t *testing.T) {
	fc := newFake(t)
	fc.SetMaxRouteChanges(10) // so that routes/batch has a RouteBatcher to check
	rep := cloudtest.Run(t, fakeSetup(t, fc, nil))

	passed, failed, skipped := rep.Counts()
	if failed != 0 || skipped != 0 || passed != len(conformance.Clauses()) {
		t.Errorf("passed %d, failed %d, skipped %d; want all %d clauses passed", passed, failed, skipped, len(conformance.Clauses()))
	}
	if rep.Provider != fakecloud.DefaultName {
		t.Errorf("report names provider %q, want %q", rep.Provider, fakecloud.DefaultName)
	}
	if got := fc.AllInstances(); len(got) != 0 {
		t.Errorf("the suite left %d instances in the cloud: %v", len(got), got)
	}
	if got := fc.AllLoadBalancers(); len(got) != 0 {
		t.Errorf("the suite left %d load balancers in the cloud", len(got))
	}
	if got := fc.AllRoutes(conformance.DefaultClusterName); len(got) != 0 {
		t.Errorf("the suite left routes in the cloud: %v", got)
	}
}

// TestMinimalSetup runs the suite with only a provider: everything that needs an
// instance factory or a fault is skipped, saying so, and the rest passes.
func TestMinimalSetup(t *testing.T) {
	fc := newFake(t)
	rep, err := conformance.RunSuite(t.Context(), conformance.Setup{
		NewProvider:  func(context.Context) (cloud.Provider, error) { return fc, nil },
		Capabilities: conformance.AllCapabilities(),
		Skip:         map[string]string{"lb/update-backends": "testing Skip"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]conformance.Status{
		"provider/name":                conformance.Pass,
		"instances/metadata-complete":  conformance.Skip,
		"instances/unknown-not-found":  conformance.Pass,
		"lister/complete":              conformance.Skip,
		"lb/ensure-idempotent":         conformance.Pass,
		"lb/update-backends":           conformance.Skip,
		"routes/delete-idempotent":     conformance.Pass,
		"routes/batch":                 conformance.Skip, // the fake does not batch unless asked
		"context/canceled":             conformance.Pass,
		"errors/failing-not-not-found": conformance.Skip,
		"context/deadline":             conformance.Skip,
		"instances/deleted-not-found":  conformance.Skip,
	}
	for clause, status := range want {
		res, ok := rep.Result(clause)
		if !ok {
			t.Errorf("%s did not run", clause)
			continue
		}
		if res.Status != status {
			t.Errorf("%s: %s (%s), want %s", clause, res.Status, res.Message, status)
		}
		if res.Status == conformance.Skip && res.Message == "" {
			t.Errorf("%s was skipped without a reason", clause)
		}
	}
	if res, _ := rep.Result("lb/update-backends"); res.Message != "skipped by the setup: testing Skip" {
		t.Errorf("a clause skipped by the setup says %q", res.Message)
	}
	if rep.Failed() {
		var buf strings.Builder
		_ = rep.WriteText(&buf)
		t.Errorf("minimal setup failed:\n%s", buf.String())
	}
}

// TestUnclaimedCapabilities checks that only claimed capabilities are tested and that a
// claim the provider does not back fails.
func TestUnclaimedCapabilities(t *testing.T) {
	fc, err := fakecloud.New(fakecloud.Options{Disabled: []fakecloud.Capability{fakecloud.CapRoutes}})
	if err != nil {
		t.Fatal(err)
	}
	setup := fakeSetup(t, fc, nil)
	setup.Capabilities = []conformance.Capability{conformance.Instances, conformance.LoadBalancers, conformance.Routes}
	rep, err := conformance.RunSuite(t.Context(), setup)
	if err != nil {
		t.Fatal(err)
	}
	for clause, want := range map[string]conformance.Status{
		"provider/capabilities":       conformance.Fail, // lister present but unclaimed, routes claimed but absent
		"lister/complete":             conformance.Skip,
		"routes/create-list":          conformance.Fail,
		"instances/metadata-complete": conformance.Pass,
	} {
		if res, _ := rep.Result(clause); res.Status != want {
			t.Errorf("%s: %s (%s), want %s", clause, res.Status, res.Message, want)
		}
	}
}

func TestInvalidSetup(t *testing.T) {
	ok := func(context.Context) (cloud.Provider, error) { return nil, nil }
	tests := []struct {
		name  string
		setup conformance.Setup
		want  string
	}{
		{"no provider", conformance.Setup{}, "NewProvider is required"},
		{"unknown capability", conformance.Setup{NewProvider: ok, Capabilities: []conformance.Capability{"volumes"}}, `unknown capability "volumes"`},
		{"lister without instances", conformance.Setup{NewProvider: ok, Capabilities: []conformance.Capability{conformance.InstanceLister}}, "without instances"},
		{"unknown skip", conformance.Setup{NewProvider: ok, Skip: map[string]string{"lb/nope": "x"}}, `unknown clause "lb/nope"`},
		{"bad prefix", conformance.Setup{NewProvider: ok, NamePrefix: "Bad_Prefix"}, "lower-case DNS label"},
		{"negative timeout", conformance.Setup{NewProvider: ok, CallTimeout: -time.Second}, "CallTimeout -1s is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := conformance.RunSuite(t.Context(), tt.setup)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("RunSuite error = %v, want one containing %q", err, tt.want)
			}
			if rep != nil {
				t.Errorf("RunSuite returned a report with an invalid setup")
			}
		})
	}
}

func TestProviderThatCannotBeBuilt(t *testing.T) {
	rep, err := conformance.RunSuite(t.Context(), conformance.Setup{
		NewProvider: func(context.Context) (cloud.Provider, error) { return nil, errors.New("bad cloud config") },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 1 || rep.Results[0].Clause != "provider/new" || rep.Results[0].Status != conformance.Fail || !strings.Contains(rep.Results[0].Message, "bad cloud config") {
		t.Fatalf("results = %+v, want one failed provider/new naming the error", rep.Results)
	}
	if !rep.Failed() {
		t.Error("Failed() = false")
	}
}

// TestFixtureAndProgress checks that Setup.Use takes a provider's fixture and that
// OnResult sees every result, with its duration, as the report holds it.
func TestFixtureAndProgress(t *testing.T) {
	fc := newFake(t)
	fc.SetMaxRouteChanges(10)
	full := fakeSetup(t, fc, nil)
	setup := conformance.Setup{
		NewProvider:  full.NewProvider,
		Capabilities: full.Capabilities,
		Skip:         map[string]string{"lb/update-backends": "kept"},
	}
	setup.Use(conformance.Fixture{
		Instances:  full.Instances,
		Failing:    full.Failing,
		Throttling: full.Throttling,
		Slow:       full.Slow,
		Skip:       map[string]string{"routes/cluster-scoped": "added"},
	})
	var seen []conformance.Result
	setup.OnResult = func(r conformance.Result) { seen = append(seen, r) }
	rep, err := conformance.RunSuite(t.Context(), setup)
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(rep.Results) {
		t.Fatalf("OnResult saw %d results, the report holds %d", len(seen), len(rep.Results))
	}
	for i := range seen {
		if seen[i] != rep.Results[i] {
			t.Errorf("OnResult saw %+v, the report holds %+v", seen[i], rep.Results[i])
		}
	}
	if res, _ := rep.Result("context/deadline"); res.Status != conformance.Pass || res.Duration < conformance.DefaultDeadline {
		t.Errorf("context/deadline: %s in %s; want a pass taking at least the deadline", res.Status, res.Duration)
	}
	_, failed, skipped := rep.Counts()
	if failed != 0 || skipped != 2 {
		t.Errorf("%d failed, %d skipped; want 0 and the 2 skips of the setup and the fixture", failed, skipped)
	}
}

// TestFaultFailingHalfWayIsEnded checks that a fault whose setup fails after changing
// the cloud is still ended, so that the clauses after it see a healthy cloud.
func TestFaultFailingHalfWayIsEnded(t *testing.T) {
	fc := newFake(t)
	setup := fakeSetup(t, fc, nil)
	var ended bool
	setup.Throttling = func(context.Context, cloud.Provider) (cloud.Provider, func(context.Context) error, error) {
		fc.SetError(fakecloud.AnyOp, fmt.Errorf("HTTP 429: %w", cloud.ErrThrottled))
		end := func(context.Context) error { ended = true; fc.SetError(fakecloud.AnyOp, nil); return nil }
		return nil, end, errors.New("the rate limit never throttled")
	}
	rep, err := conformance.RunSuite(t.Context(), setup)
	if err != nil {
		t.Fatal(err)
	}
	if !ended {
		t.Error("the suite did not end a fault whose setup failed")
	}
	if res, _ := rep.Result("errors/throttled-retry-after"); res.Status != conformance.Fail || !strings.Contains(res.Message, "never throttled") {
		t.Errorf("errors/throttled-retry-after: %s (%s), want a failure naming the setup's error", res.Status, res.Message)
	}
	if res, _ := rep.Result("context/deadline"); res.Status != conformance.Pass {
		t.Errorf("context/deadline, after the failed fault: %s (%s), want pass on a healthy cloud", res.Status, res.Message)
	}
}
