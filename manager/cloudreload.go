package manager

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/promreg"
	"github.com/nephele-dev/nephele/internal/smallfile"
)

// Events of a cloud config reload, recorded on the manager's leader election Lease.
const (
	EventCloudConfigReloaded     = "CloudConfigReloaded"
	EventCloudConfigReloadFailed = "CloudConfigReloadFailed"
)

// maxCloudConfigSize bounds what a reload reads of --cloud-config and the files it names.
const maxCloudConfigSize = 1 << 20

// cloudReloader rebuilds the provider when --cloud-config, or a file the provider says
// its configuration names (cloud.ConfigFileLister), changes, and swaps it in. A
// configuration that cannot be read, built, initialized or swapped is refused: the
// running provider stays, and an Event, a metric and /readyz's cloud-config check say
// why until a good configuration (or the running one) is back.
type cloudReloader struct {
	path   string
	period time.Duration
	// build makes a provider from a configuration's content.
	build func(config []byte) (cloud.Provider, error)
	// init initializes a built provider (cloud.Initializer) before it takes calls.
	init     func(ctx context.Context, p cloud.Provider) error
	swap     *swapProvider
	log      logr.Logger
	recorder record.EventRecorder
	ref      *corev1.ObjectReference
	metrics  *reloadMetrics

	// applied identifies what the current provider was built from; refused what was
	// last refused, which is not built again until it changes.
	applied, refused [sha256.Size]byte

	mu      sync.Mutex
	failure error // the current refusal; nil when the running configuration is current
}

type reloadMetrics struct {
	reloads     *prometheus.CounterVec
	failing     prometheus.Gauge
	lastSuccess prometheus.Gauge
}

func newReloadMetrics(reg prometheus.Registerer) (*reloadMetrics, error) {
	m := &reloadMetrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nephele_cloud_config_reloads_total",
			Help: "Reloads of the cloud config (--cloud-config and the files it names) after a change, by result: success, or failure (the running provider was kept).",
		}, []string{"result"}),
		failing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nephele_cloud_config_reload_failing",
			Help: "1 while the cloud config on disk differs from the running one and could not be applied; 0 otherwise.",
		}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nephele_cloud_config_last_reload_success_timestamp_seconds",
			Help: "When the running provider was built from the cloud config: at start, or at the last successful reload.",
		}),
	}
	var err error
	if m.reloads, err = promreg.Register(reg, m.reloads); err != nil {
		return nil, err
	}
	if m.failing, err = promreg.Register(reg, m.failing); err != nil {
		return nil, err
	}
	if m.lastSuccess, err = promreg.Register(reg, m.lastSuccess); err != nil {
		return nil, err
	}
	m.lastSuccess.SetToCurrentTime()
	return m, nil
}

// start records what the running provider was built from: config is the content
// Complete read.
func (c *cloudReloader) start(config []byte) {
	c.applied = c.fingerprint(config, c.swap.current())
}

// fingerprint identifies a configuration: its content and that of every file provider
// says it names (or why one could not be read).
func (c *cloudReloader) fingerprint(config []byte, provider cloud.Provider) [sha256.Size]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%d\n", len(config))
	h.Write(config)
	if fl, ok := provider.(cloud.ConfigFileLister); ok {
		for _, path := range fl.ConfigFiles() {
			data, err := smallfile.Read(path, maxCloudConfigSize)
			if err != nil {
				fmt.Fprintf(h, "%s\x00error %v\n", path, err)
				continue
			}
			fmt.Fprintf(h, "%s\x00%d\n", path, len(data))
			h.Write(data)
		}
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// run checks for a change every period until ctx is done.
func (c *cloudReloader) run(ctx context.Context) {
	c.log.Info("Watching the cloud config for changes", "path", c.path, "period", c.period)
	t := time.NewTicker(c.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.check(ctx)
		}
	}
}

// check applies the configuration on disk if it changed.
func (c *cloudReloader) check(ctx context.Context) {
	data, err := smallfile.Read(c.path, maxCloudConfigSize)
	if err != nil {
		// A Secret being rewritten, say: keep the running provider and say so.
		c.refuse(fmt.Errorf("reading --cloud-config %s: %w", c.path, err))
		return
	}
	fp := c.fingerprint(data, c.swap.current())
	switch fp {
	case c.applied:
		c.clear() // back to the running configuration
		return
	case c.refused:
		return
	}
	p, err := c.build(data)
	if err == nil {
		// The new provider may name other files than the running one.
		fp = c.fingerprint(data, p)
		err = c.init(ctx, p)
	}
	if err == nil {
		err = c.swap.swap(p)
	}
	if err != nil {
		if ctx.Err() != nil {
			return // stopping: nothing was applied, and nothing is wrong with the file
		}
		c.refused = fp
		c.refuse(fmt.Errorf("the running provider is kept: %w", err))
		return
	}
	c.applied, c.refused = fp, [sha256.Size]byte{}
	c.metrics.reloads.WithLabelValues("success").Inc()
	c.metrics.lastSuccess.SetToCurrentTime()
	c.clear()
	c.log.Info("Reloaded the cloud config: new cloud calls use the new provider", "path", c.path)
	c.recorder.Eventf(c.ref, corev1.EventTypeNormal, EventCloudConfigReloaded, "Reloaded the cloud config %s: new cloud calls use it", c.path)
}

// refuse records err as the reason the configuration on disk is not running.
func (c *cloudReloader) refuse(err error) {
	c.mu.Lock()
	same := c.failure != nil && c.failure.Error() == err.Error()
	c.failure = err
	c.mu.Unlock()
	c.metrics.failing.Set(1)
	if same {
		return
	}
	c.metrics.reloads.WithLabelValues("failure").Inc()
	c.log.Error(err, "Reloading the cloud config failed", "path", c.path)
	c.recorder.Eventf(c.ref, corev1.EventTypeWarning, EventCloudConfigReloadFailed, "Reloading the cloud config %s failed: %v", c.path, err)
}

func (c *cloudReloader) clear() {
	c.mu.Lock()
	c.failure = nil
	c.mu.Unlock()
	c.metrics.failing.Set(0)
}

// ready is /readyz's cloud-config check: an error while the configuration on disk could
// not be applied.
func (c *cloudReloader) ready() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failure != nil {
		return errors.New("the cloud config on disk could not be applied; the running provider was kept: " + c.failure.Error())
	}
	return nil
}

// cloudConfigPlan is what a runtime needs to reload the cloud config.
type cloudConfigPlan struct {
	// path is --cloud-config; empty when none was given (nothing to reload).
	path string
	// content is what the running provider was built from.
	content []byte
	// period is --cloud-config-reload-period; 0 never reloads.
	period time.Duration
	// build makes a provider from a configuration's content, as at start.
	build func(config []byte) (cloud.Provider, error)
}

// cloudReloader returns the runtime's reloader, or nil when the cloud config is not
// reloaded.
func (r *runtime) cloudReloader() (*cloudReloader, error) {
	cp := r.plan.cloudConfig
	if cp.path == "" || cp.period <= 0 || cp.build == nil {
		return nil, nil
	}
	m, err := newReloadMetrics(r.plan.registry)
	if err != nil {
		return nil, fmt.Errorf("cloud config reload: %w", err)
	}
	lease := r.plan.mainLease
	c := &cloudReloader{
		path:   cp.path,
		period: cp.period,
		build:  cp.build,
		init: func(ctx context.Context, p cloud.Provider) error {
			if in, ok := p.(cloud.Initializer); ok {
				return in.Initialize(ctx, clientBuilder{config: r.plan.restConfig, component: r.plan.component})
			}
			return nil
		},
		swap:     r.swap,
		log:      r.log.WithName("cloud-config"),
		recorder: r.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: r.plan.component}),
		// The manager's own object: its Lease (which exists once it has led).
		ref: &corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease",
			Namespace: lease.Namespace, Name: lease.Name},
		metrics: m,
	}
	c.start(cp.content)
	return c, nil
}
