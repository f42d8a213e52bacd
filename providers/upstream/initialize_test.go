package upstream_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/providers/upstream"
)

// builder is a cloud.ClientBuilder that hands out fake clientsets and refuses the
// names in fail.
type builder struct {
	fail map[string]bool
	all  bool
}

func (b builder) Config(name string) (*rest.Config, error) {
	if b.all || b.fail[name] {
		return nil, fmt.Errorf("no credentials for %s", name)
	}
	return &rest.Config{Host: "https://127.0.0.1:6443", UserAgent: name}, nil
}

func (b builder) Client(name string) (kubernetes.Interface, error) {
	if b.all || b.fail[name] {
		return nil, fmt.Errorf("no credentials for %s", name)
	}
	return fake.NewClientset(), nil
}

// logs collects log lines.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) ctx(parent context.Context) context.Context {
	log := funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{})
	return logr.NewContext(parent, log)
}

func (l *logs) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

func TestInitialize(t *testing.T) {
	var (
		got  cloudprovider.ControllerClientBuilder
		stop <-chan struct{}
	)
	s := &stub{name: "acme", noClusterID: true, initialize: func(b cloudprovider.ControllerClientBuilder, st <-chan struct{}) {
		got, stop = b, st
		if c := b.ClientOrDie("acme-controller"); c == nil {
			t.Error("ClientOrDie returned nil")
		}
		if c := b.ConfigOrDie("acme-routes"); c == nil || c.UserAgent != "acme-routes" {
			t.Errorf("ConfigOrDie = %+v", c)
		}
	}}
	p := newAdapter(t, s)
	var l logs
	ctx, cancel := context.WithCancel(l.ctx(t.Context()))
	defer cancel()
	if err := p.Initialize(ctx, builder{fail: map[string]bool{"broken": true}}); err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	if got == nil || stop == nil {
		t.Fatal("the upstream Initialize was not called with a builder and a stop channel")
	}
	if !l.contains("reports no cluster ID") {
		t.Errorf("no warning about the missing cluster ID in %v", l.lines)
	}
	if err := p.Initialize(ctx, builder{}); err == nil {
		t.Error("a second Initialize succeeded")
	}

	// *OrDie on a client the manager cannot build: logged, then a panic naming it.
	for _, f := range []func(){func() { got.ClientOrDie("broken") }, func() { got.ConfigOrDie("broken") }} {
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), `OrDie("broken") failed`) || !strings.Contains(fmt.Sprint(r), "no credentials for broken") {
					t.Errorf("panic = %v, want a message naming the client and the error", r)
				}
			}()
			f()
		}()
	}
	if !l.contains(`"client"="broken"`) {
		t.Errorf("the failure was not logged before the panic: %v", l.lines)
	}

	select {
	case <-stop:
		t.Fatal("the stop channel closed while the manager runs")
	default:
	}
	cancel()
	select {
	case <-stop:
	case <-time.After(30 * time.Second):
		t.Fatal("the stop channel did not close when the manager's context ended")
	}
}

func TestInitializeFailures(t *testing.T) {
	t.Run("builder cannot build", func(t *testing.T) {
		called := false
		p := newAdapter(t, &stub{name: "acme", initialize: func(cloudprovider.ControllerClientBuilder, <-chan struct{}) { called = true }})
		if err := p.Initialize(t.Context(), builder{all: true}); err == nil || !strings.Contains(err.Error(), "no credentials") {
			t.Errorf("Initialize = %v, want the builder's error", err)
		}
		if called {
			t.Error("the upstream Initialize ran with a builder that cannot build")
		}
	})
	t.Run("no builder", func(t *testing.T) {
		if err := newAdapter(t, &stub{name: "acme"}).Initialize(t.Context(), nil); err == nil {
			t.Error("Initialize(nil) succeeded")
		}
	})
	t.Run("upstream panics", func(t *testing.T) {
		p := newAdapter(t, &stub{name: "acme", initialize: func(b cloudprovider.ControllerClientBuilder, _ <-chan struct{}) {
			b.ClientOrDie("broken")
		}})
		err := p.Initialize(t.Context(), builder{fail: map[string]bool{"broken": true}})
		if err == nil || !strings.Contains(err.Error(), `Initialize panicked`) || !strings.Contains(err.Error(), `ClientOrDie("broken")`) {
			t.Errorf("Initialize = %v, want the panic as an error naming the client", err)
		}
	})
}

func TestInitializeGivesInformers(t *testing.T) {
	s := &informerStub{stub: stub{name: "acme"}}
	p := newAdapter(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := p.Initialize(ctx, builder{}); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	factory := s.factory
	s.mu.Unlock()
	if factory == nil {
		t.Fatal("SetInformers was not called")
	}
	informer := factory.Core().V1().Nodes().Informer()
	poll.Eventually(t, "the provider's informer to sync", func() error {
		if !informer.HasSynced() {
			return errors.New("not synced: the factory was not started")
		}
		return nil
	})
}

func TestFactories(t *testing.T) {
	var gotConfig string
	factory := func(config io.Reader) (cloudprovider.Interface, error) {
		if config != nil {
			b, err := io.ReadAll(config)
			if err != nil {
				return nil, err
			}
			gotConfig = string(b)
		}
		return &stub{name: "acme"}, nil
	}
	p, err := upstream.Factory(factory)(strings.NewReader("region: x"))
	if err != nil || p.ProviderName() != "acme" || gotConfig != "region: x" {
		t.Fatalf("Factory: %v, %v, config %q", p, err, gotConfig)
	}
	if _, err := upstream.Factory(func(io.Reader) (cloudprovider.Interface, error) { return nil, errors.New("bad config") })(nil); err == nil {
		t.Error("a failing upstream factory succeeded")
	}

	// The upstream registry is global and exits the process on a second registration of
	// a name, so each run (-count=N) registers this run's factory under a name of its own.
	name := "nephele-upstream-test-" + strings.ToLower(rand.Text()[:8])
	cloudprovider.RegisterCloudProvider(name, factory)
	r := cloud.NewRegistry()
	if err := r.Register("acme", upstream.Registered(name)); err != nil {
		t.Fatal(err)
	}
	p, err = r.New("acme", strings.NewReader("zone: y"))
	if err != nil || p.ProviderName() != "acme" || gotConfig != "zone: y" {
		t.Fatalf("Registered: %v, %v, config %q", p, err, gotConfig)
	}
	if _, err := upstream.Registered("nephele-not-registered")(nil); err == nil || !strings.Contains(err.Error(), "not registered") {
		t.Errorf("Registered of an unknown provider: %v", err)
	}
}
