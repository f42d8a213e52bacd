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
	"github.com/nephele-dev/nephele/manager/clouds"
)

// Events of a cloud config reload, recorded on the manager's leader election Lease.
const (
	EventCloudConfigReloaded     = "CloudConfigReloaded"
	EventCloudConfigReloadFailed = "CloudConfigReloadFailed"
)

// maxCloudConfigSize bounds what a reload reads of --cloud-config and the files it names.
const maxCloudConfigSize = clouds.MaxFileSize

// cloudReloader rebuilds the provider when --cloud-config, or a file the provider says
// its configuration names (cloud.ConfigFileLister), changes, and swaps it in. A
// configuration that cannot be read, built, initialized or swapped is refused: the
// running provider stays, and an Event, a metric and /readyz's cloud-config check say
// why until a good configuration (or the running one) is back.
//
// Each provider runs under a context of its own, which Initialize gets: a replaced
// provider's is cancelled once the calls it may still be serving are over (grace, the
// cloud call timeout), a refused one's at once.
type cloudReloader struct {
	path   string
	period time.Duration
	grace  time.Duration
	// build makes a provider from a configuration's content.
	build func(config []byte) (cloud.Provider, error)
	// init initializes a built provider (cloud.Initializer) before it takes calls.
	init     func(ctx context.Context, p cloud.Provider) error
	swap     *swapProvider
	log      logr.Logger
	recorder record.EventRecorder
	ref      *corev1.ObjectReference
	metrics  *reloadMetrics
	now      func() time.Time

	// applied identifies what the running provider was built from. refused is content
	// refused for good (it does not parse, or needs a restart): it is not built again
	// until it changes. A failed Initialize is not remembered: it may be passing
	// trouble, and is retried every period.
	applied [sha256.Size]byte
	refused *refusal
	// stopCurrent cancels the running provider's context; retiring are replaced
	// providers whose contexts are cancelled at their time.
	stopCurrent context.CancelFunc
	retiring    []retiree

	mu      sync.Mutex
	failure error // the current refusal; nil when the running configuration is current
}

// refusal identifies content refused for good: its fingerprint over the files the
// refused configuration names.
type refusal struct {
	fp    [sha256.Size]byte
	files []string
}

// retiree is a replaced provider whose context is cancelled at due.
type retiree struct {
	stop context.CancelFunc
	due  time.Time
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

// configFiles returns the files p says its configuration names.
func configFiles(p cloud.Provider) []string {
	if fl, ok := p.(cloud.ConfigFileLister); ok {
		return fl.ConfigFiles()
	}
	return nil
}

// fingerprint identifies a configuration: its content and that of each of files (or why
// one could not be read).
func fingerprint(config []byte, files []string) [sha256.Size]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%d\n", len(config))
	h.Write(config)
	for _, path := range files {
		data, err := smallfile.Read(path, maxCloudConfigSize)
		if err != nil {
			fmt.Fprintf(h, "%s\x00error %v\n", path, err)
			continue
		}
		fmt.Fprintf(h, "%s\x00%d\n", path, len(data))
		h.Write(data)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// run checks for a change every period until ctx is done, then stops the providers it
// replaced.
func (c *cloudReloader) run(ctx context.Context) {
	c.log.Info("Watching the cloud config for changes", "path", c.path, "period", c.period)
	t := time.NewTicker(c.period)
	defer t.Stop()
	defer c.retire(time.Time{})
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.check(ctx)
			c.retire(c.now())
		}
	}
}

// retire cancels the contexts of the replaced providers due by now; the zero time
// cancels them all.
func (c *cloudReloader) retire(now time.Time) {
	kept := c.retiring[:0]
	for _, r := range c.retiring {
		if now.IsZero() || !now.Before(r.due) {
			r.stop()
			continue
		}
		kept = append(kept, r)
	}
	c.retiring = kept
}

// check applies the configuration on disk if it changed.
func (c *cloudReloader) check(ctx context.Context) {
	data, err := smallfile.Read(c.path, maxCloudConfigSize)
	if err != nil {
		// A Secret being rewritten, say: keep the running provider and say so.
		c.refuse(fmt.Errorf("reading the cloud config %s: %w", c.path, err))
		return
	}
	running := configFiles(c.swap.current())
	if fingerprint(data, running) == c.applied {
		c.refused = nil
		c.clear() // back to the running configuration
		return
	}
	if c.refused != nil && fingerprint(data, c.refused.files) == c.refused.fp {
		return // refused for good, and unchanged
	}
	p, err := c.safeBuild(data)
	if err != nil {
		c.refuseForGood(data, running, err)
		return
	}
	files := configFiles(p)
	if err := c.swap.fits(p); err != nil {
		c.refuseForGood(data, files, err)
		return
	}
	pctx, stop := context.WithCancel(ctx)
	if err := c.init(pctx, p); err != nil {
		stop()
		if ctx.Err() != nil {
			return // stopping: nothing was applied, and nothing is wrong with the file
		}
		c.refuse(fmt.Errorf("the running provider is kept: initializing the reloaded provider: %w", err))
		return
	}
	c.swap.swap(p)
	if c.stopCurrent != nil {
		c.retiring = append(c.retiring, retiree{stop: c.stopCurrent, due: c.now().Add(c.grace)})
	}
	c.stopCurrent = stop
	c.applied, c.refused = fingerprint(data, files), nil
	c.metrics.reloads.WithLabelValues("success").Inc()
	c.metrics.lastSuccess.SetToCurrentTime()
	c.clear()
	c.log.Info("Reloaded the cloud config: new cloud calls use the new provider", "path", c.path)
	c.recorder.Eventf(c.ref, corev1.EventTypeNormal, EventCloudConfigReloaded, "Reloaded the cloud config %s: new cloud calls use it", c.path)
}

// safeBuild builds a provider, turning a panic of the provider's code into an error: a
// bad edit must not stop a manager that runs well on the previous configuration.
func (c *cloudReloader) safeBuild(data []byte) (p cloud.Provider, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("building the provider panicked: %v", r)
		}
	}()
	return c.build(data)
}

// refuseForGood refuses the content data (with the files it names) that only a change
// can fix, and remembers it so that it is not built again.
func (c *cloudReloader) refuseForGood(data []byte, files []string, err error) {
	c.refused = &refusal{fp: fingerprint(data, files), files: files}
	c.refuse(fmt.Errorf("the running provider is kept: %w", err))
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
	// applied identifies what the running provider was built from, taken when it was
	// built: a change after that is applied by the first check.
	applied [sha256.Size]byte
	// period is --cloud-config-reload-period; 0 never reloads.
	period time.Duration
	// build makes a provider from a configuration's content, as at start.
	build func(config []byte) (cloud.Provider, error)
}

// newCloudConfigPlan returns the plan for provider, just built from config at path. A
// manager that never reloads reads no file for a fingerprint.
func newCloudConfigPlan(path string, config []byte, provider cloud.Provider, period time.Duration, build func([]byte) (cloud.Provider, error)) cloudConfigPlan {
	if path == "" || period <= 0 {
		return cloudConfigPlan{}
	}
	return cloudConfigPlan{path: path, applied: fingerprint(config, configFiles(provider)), period: period, build: build}
}

// cloudReloader returns the reloader of cr's configuration, or nil when it is not
// reloaded. stopInitial cancels the context the provider built at start runs under.
func (r *runtime) cloudReloader(cr *cloudRuntime, stopInitial context.CancelFunc) (*cloudReloader, error) {
	cp := cr.plan.config
	if cp.path == "" || cp.period <= 0 || cp.build == nil {
		return nil, nil
	}
	m, err := newReloadMetrics(cr.registry)
	if err != nil {
		return nil, fmt.Errorf("cloud config reload: %w", err)
	}
	lease := r.plan.mainLease
	return &cloudReloader{
		path:   cp.path,
		period: cp.period,
		// A replaced provider may still be serving calls that started before the swap;
		// none outlives the cloud call timeout.
		grace: r.plan.cloudCall.timeout,
		build: cp.build,
		init:  r.initProvider,
		swap:  cr.swap,
		log:   r.log.WithName(cr.plan.instance("cloud-config")),
		// Host tells the replicas' Events apart: each reloads on its own.
		recorder: r.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: r.plan.component, Host: lease.Identity}),
		// The manager's own object: its Lease (which exists once it has led).
		ref: &corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease",
			Namespace: lease.Namespace, Name: lease.Name},
		metrics:     m,
		now:         time.Now,
		applied:     cp.applied,
		stopCurrent: stopInitial,
	}, nil
}
