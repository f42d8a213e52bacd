package manager

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
)

func newFake(t *testing.T, name string, disabled ...fakecloud.Capability) *fakecloud.Cloud {
	t.Helper()
	c, err := fakecloud.New(fakecloud.Options{Name: name, Disabled: disabled})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func nodeNamed(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// TestSwapProviderInFlightCallsFinishOnTheOld: a call that started before the swap
// finishes on the provider it started on; the next one goes to the new provider.
func TestSwapProviderInFlightCallsFinishOnTheOld(t *testing.T) {
	old, next := newFake(t, "fake"), newFake(t, "fake")
	for _, c := range []*fakecloud.Cloud{old, next} {
		if err := c.AddInstance(cloud.Instance{NodeName: "n", ProviderID: "fake://n", InstanceType: c.ProviderName()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := next.UpdateInstance("fake://n", func(i *cloud.Instance) { i.InstanceType = "new" }); err != nil {
		t.Fatal(err)
	}
	s := newSwapProvider(old)
	in, _ := s.Instances()
	old.Hang(cloud.OpInstanceMetadata, "n")
	done := make(chan *cloud.Instance, 1)
	go func() {
		inst, err := in.InstanceMetadata(context.Background(), nodeNamed("n"))
		if err != nil {
			t.Errorf("the call in flight: %v", err)
		}
		done <- inst
	}()
	deadline := time.Now().Add(30 * time.Second)
	for old.InFlight() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first call never reached the old provider")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.fits(next); err != nil {
		t.Fatal(err)
	}
	s.swap(next)
	inst, err := in.InstanceMetadata(context.Background(), nodeNamed("n"))
	if err != nil || inst.InstanceType != "new" {
		t.Fatalf("a call after the swap = %+v, %v; want the new provider's answer", inst, err)
	}
	old.Unhang(cloud.OpInstanceMetadata, "n")
	if got := <-done; got.InstanceType != "fake" {
		t.Errorf("the call in flight answered %q, want the old provider's", got.InstanceType)
	}
	if old.Calls(cloud.OpInstanceMetadata) != 1 || next.Calls(cloud.OpInstanceMetadata) != 1 {
		t.Errorf("calls: old %d, new %d; want one each", old.Calls(cloud.OpInstanceMetadata), next.Calls(cloud.OpInstanceMetadata))
	}
}

func TestSwapProviderRefusesOtherCapabilities(t *testing.T) {
	s := newSwapProvider(newFake(t, "fake", fakecloud.CapRoutes))
	if _, ok := s.Routes(); ok {
		t.Fatal("Routes offered by a swap provider over a provider without them")
	}
	err := s.fits(newFake(t, "fake"))
	if err == nil || !strings.Contains(err.Error(), "Routes true") || !strings.Contains(err.Error(), "restart") {
		t.Errorf("swap to a provider with routes = %v, want a refusal naming the capability and the restart", err)
	}
	if err := s.fits(newFake(t, "other", fakecloud.CapRoutes)); err == nil || !strings.Contains(err.Error(), `"other"`) {
		t.Errorf("swap to another provider name = %v, want a refusal", err)
	}
}

// TestSwapProviderKeepsRouteBatching: a provider whose Routes batch is offered batching
// through the swap provider, which calls the current provider; a reload that would take
// batching away (or add it) needs a restart, as any capability does.
func TestSwapProviderKeepsRouteBatching(t *testing.T) {
	batching := newFake(t, "fake")
	batching.SetMaxRouteChanges(7)
	s := newSwapProvider(batching)
	rt, _ := s.Routes()
	b, ok := rt.(cloud.RouteBatcher)
	if !ok {
		t.Fatal("the swap provider's Routes do not batch, though the provider's do")
	}
	if n := b.MaxRouteChanges(); n != 7 {
		t.Errorf("MaxRouteChanges = %d, want the provider's 7", n)
	}
	r := cloud.Route{TargetNode: "n1", DestinationCIDR: netip.MustParsePrefix("10.244.1.0/24")}
	if err := b.ApplyRoutes(t.Context(), "c1", []cloud.RouteChange{{NameHint: "r1", Route: r}}); err != nil {
		t.Fatal(err)
	}
	if n := batching.Calls(cloud.OpApplyRoutes); n != 1 {
		t.Errorf("the provider saw %d ApplyRoutes calls, want 1", n)
	}
	err := s.fits(newFake(t, "fake"))
	if err == nil || !strings.Contains(err.Error(), "batched true") || !strings.Contains(err.Error(), "restart") {
		t.Errorf("swap to a provider whose routes do not batch = %v, want a refusal naming batching and the restart", err)
	}
}

// platformsProvider is a provider of fixed name and platforms.
type platformsProvider struct {
	cloud.Provider
	platforms []string
}

func (p platformsProvider) ProviderPlatforms() []string { return p.platforms }

func TestSwapProviderRefusesOtherPlatforms(t *testing.T) {
	base := newFake(t, "fake", fakecloud.CapRoutes)
	s := newSwapProvider(platformsProvider{base, []string{"east"}})
	if err := s.fits(platformsProvider{base, []string{"east"}}); err != nil {
		t.Errorf("swap to a provider of the same platforms: %v", err)
	}
	err := s.fits(platformsProvider{base, []string{"west"}})
	if err == nil || !strings.Contains(err.Error(), `provider-ID schemes ["west"]; running with ["east"]`) {
		t.Errorf("swap to a provider of other platforms = %v, want a refusal naming both", err)
	}
}

// reloadFixture is a reloader over a config file in a temporary directory whose
// "provider" is a fake; content "fail" does not build, "panic" panics, "no-routes" lacks
// routes, and init fails while initErr is set.
type reloadFixture struct {
	*cloudReloader
	path     string
	events   *record.FakeRecorder
	registry *prometheus.Registry
	built    map[string]*fakecloud.Cloud
	builds   int
	initErr  error
	// ctxs are the contexts the providers run under: the first one's, then each
	// initialized one's.
	ctxs  []context.Context
	clock time.Time
}

func newReloadFixture(t *testing.T, initial string) *reloadFixture {
	t.Helper()
	f := &reloadFixture{path: filepath.Join(t.TempDir(), "cloud.conf"), events: record.NewFakeRecorder(100),
		registry: prometheus.NewRegistry(), built: map[string]*fakecloud.Cloud{}, clock: time.Unix(1000, 0)}
	f.write(t, initial)
	build := func(config []byte) (cloud.Provider, error) {
		f.builds++
		content := strings.TrimSpace(string(config))
		switch content {
		case "fail":
			return nil, errors.New("line 1: not a configuration")
		case "panic":
			panic("provider bug")
		}
		var disabled []fakecloud.Capability
		if content == "no-routes" {
			disabled = append(disabled, fakecloud.CapRoutes)
		}
		c := newFake(t, "fake", disabled...)
		f.built[content] = c
		return c, nil
	}
	first, err := build([]byte(initial))
	if err != nil {
		t.Fatal(err)
	}
	f.builds = 0
	m, err := newReloadMetrics(f.registry)
	if err != nil {
		t.Fatal(err)
	}
	f.cloudReloader = &cloudReloader{path: f.path, period: time.Hour, grace: time.Minute, build: build,
		init: func(ctx context.Context, _ cloud.Provider) error {
			f.ctxs = append(f.ctxs, ctx)
			return f.initErr
		},
		swap: newSwapProvider(first), recorder: f.events, ref: &corev1.ObjectReference{Kind: "Lease", Name: "ccm"}, metrics: m,
		now: func() time.Time { return f.clock }, applied: fingerprint([]byte(initial), nil)}
	firstCtx, stop := context.WithCancel(context.Background())
	f.ctxs, f.stopCurrent = []context.Context{firstCtx}, stop
	t.Cleanup(stop)
	return f
}

func (f *reloadFixture) write(t *testing.T, content string) {
	t.Helper()
	if err := os.WriteFile(f.path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (f *reloadFixture) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (f *reloadFixture) reloads(result string) float64 {
	return testutil.ToFloat64(f.metrics.reloads.WithLabelValues(result))
}

func TestCloudReloader(t *testing.T) {
	f := newReloadFixture(t, "a")
	ctx := t.Context()

	f.check(ctx)
	if f.reloads("success")+f.reloads("failure") != 0 || len(f.drainEvents()) != 0 || f.ready() != nil {
		t.Fatal("an unchanged file was reloaded")
	}

	// A change is applied: new calls go to the new provider.
	f.write(t, "b")
	f.check(ctx)
	if f.swap.current() != f.built["b"] {
		t.Fatal("the changed config was not swapped in")
	}
	if ev := f.drainEvents(); len(ev) != 1 || !strings.Contains(ev[0], "Normal "+EventCloudConfigReloaded) {
		t.Fatalf("events after a reload = %q", ev)
	}

	// A config that does not load keeps the running provider, once said, and fails /readyz.
	f.write(t, "fail")
	f.check(ctx)
	f.check(ctx)
	if f.swap.current() != f.built["b"] {
		t.Fatal("a config that does not load replaced the running provider")
	}
	ev := f.drainEvents()
	if len(ev) != 1 || !strings.Contains(ev[0], "Warning "+EventCloudConfigReloadFailed) || !strings.Contains(ev[0], "line 1: not a configuration") {
		t.Fatalf("events after a bad config, checked twice = %q, want one warning naming the problem", ev)
	}
	if err := f.ready(); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("ready = %v, want the problem", err)
	}
	if got := testutil.ToFloat64(f.metrics.failing); got != 1 {
		t.Errorf("failing gauge = %v, want 1", got)
	}

	// Capabilities may not change without a restart.
	f.write(t, "no-routes")
	f.check(ctx)
	if err := f.ready(); err == nil || !strings.Contains(err.Error(), "restart") || f.swap.current() != f.built["b"] {
		t.Errorf("a config dropping a capability: ready = %v", err)
	}

	// Back to the running config: healthy again without a reload.
	f.write(t, "b")
	f.check(ctx)
	if err := f.ready(); err != nil || testutil.ToFloat64(f.metrics.failing) != 0 {
		t.Errorf("after restoring the running config: ready = %v", err)
	}
	if f.reloads("success") != 1 || f.reloads("failure") != 2 {
		t.Errorf("reloads: success %v failure %v, want 1 and 2", f.reloads("success"), f.reloads("failure"))
	}

	// A file that cannot be read (mid-rewrite, say) keeps the provider too.
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	f.check(ctx)
	if err := f.ready(); err == nil || !strings.Contains(err.Error(), "reading the cloud config") {
		t.Errorf("a missing file: ready = %v", err)
	}
}

// namingProvider is a fake whose configuration names a token file.
type namingProvider struct {
	*fakecloud.Cloud
	files []string
}

func (p namingProvider) ConfigFiles() []string { return p.files }

// TestCloudReloaderWatchesNamedFiles: a token file the configuration names is part of
// it: rotating the token rebuilds the provider though --cloud-config is unchanged.
func TestCloudReloaderWatchesNamedFiles(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newReloadFixture(t, "a")
	var builds int
	f.build = func([]byte) (cloud.Provider, error) {
		builds++
		return namingProvider{newFake(t, "fake"), []string{token}}, nil
	}
	f.swap = newSwapProvider(namingProvider{newFake(t, "fake"), []string{token}})
	f.applied = fingerprint([]byte("a"), []string{token})
	f.check(t.Context())
	if builds != 0 {
		t.Fatal("rebuilt without a change")
	}
	if err := os.WriteFile(token, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.check(t.Context())
	f.check(t.Context())
	if builds != 1 || f.reloads("success") != 1 {
		t.Errorf("builds %d, successful reloads %v after the token changed; want 1 and 1", builds, f.reloads("success"))
	}
}

// TestCloudReloaderProviderLifecycle: a replaced provider's context is cancelled once the
// calls it may still serve are over (the grace), a provider that does not fit is never
// initialized, and one whose Initialize fails is stopped and tried again next period
// (the failure may pass), until it succeeds.
func TestCloudReloaderProviderLifecycle(t *testing.T) {
	f := newReloadFixture(t, "a")
	ctx := t.Context()
	f.write(t, "b")
	f.check(ctx)
	if len(f.ctxs) != 2 || f.swap.current() != f.built["b"] {
		t.Fatalf("b not initialized and swapped in (%d contexts)", len(f.ctxs))
	}
	f.retire(f.clock.Add(f.grace - time.Second))
	if f.ctxs[0].Err() != nil {
		t.Fatal("the replaced provider was stopped within the grace")
	}
	f.retire(f.clock.Add(f.grace))
	if f.ctxs[0].Err() == nil || f.ctxs[1].Err() != nil {
		t.Fatalf("after the grace: replaced provider's context %v, running one's %v; want only the replaced one cancelled", f.ctxs[0].Err(), f.ctxs[1].Err())
	}

	f.write(t, "no-routes")
	f.check(ctx)
	if len(f.ctxs) != 2 {
		t.Error("a provider with other capabilities was initialized")
	}

	f.initErr = errors.New("apiserver unavailable")
	f.write(t, "c")
	f.check(ctx)
	if len(f.ctxs) != 3 || f.ctxs[2].Err() == nil {
		t.Fatal("a provider whose Initialize failed was not stopped")
	}
	if err := f.ready(); err == nil || !strings.Contains(err.Error(), "apiserver unavailable") {
		t.Errorf("ready after a failed Initialize = %v", err)
	}
	builds := f.builds
	f.check(ctx)
	if f.builds != builds+1 {
		t.Error("a failed Initialize was not retried: it may be passing trouble")
	}
	f.initErr = nil
	f.check(ctx)
	if f.swap.current() != f.built["c"] || f.ready() != nil {
		t.Errorf("c not applied once Initialize succeeds: ready = %v", f.ready())
	}
}

// TestCloudReloaderRefusalComesBack: a refused config, then the running one restored,
// then the refused one again is reported again; a panicking provider is refused, not
// fatal.
func TestCloudReloaderRefusalComesBack(t *testing.T) {
	f := newReloadFixture(t, "a")
	ctx := t.Context()
	for i, step := range []struct {
		content string
		failing bool
	}{{"fail", true}, {"a", false}, {"fail", true}, {"panic", true}, {"a", false}} {
		f.write(t, step.content)
		f.check(ctx)
		if err := f.ready(); (err != nil) != step.failing {
			t.Errorf("step %d (%s): ready = %v, want failing %v", i, step.content, err, step.failing)
		}
	}
	var warnings int
	for _, e := range f.drainEvents() {
		if strings.Contains(e, EventCloudConfigReloadFailed) {
			warnings++
		}
	}
	if warnings != 3 {
		t.Errorf("%d warnings, want one per refusal (fail, fail again, panic)", warnings)
	}
	if f.swap.current() != f.built["a"] {
		t.Error("the running provider changed")
	}
}

// TestCloudReloaderRefusedFilesNotRebuilt: a refused config that names other files
// than the running one is recognized as unchanged by its own files, not rebuilt every
// period.
func TestCloudReloaderRefusedFilesNotRebuilt(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newReloadFixture(t, "a")
	f.build = func([]byte) (cloud.Provider, error) {
		f.builds++
		return namingProvider{newFake(t, "fake", fakecloud.CapRoutes), []string{token}}, nil
	}
	f.write(t, "names a token file, drops routes")
	for range 3 {
		f.check(t.Context())
	}
	if f.builds != 1 {
		t.Errorf("built %d times, want once", f.builds)
	}
	if err := os.WriteFile(token, []byte("rotated"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.check(t.Context())
	if f.builds != 2 {
		t.Errorf("a change to the refused config's own file was not tried: %d builds", f.builds)
	}
}
