package smoke

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nephele-dev/nephele/internal/waitfor"
	"github.com/nephele-dev/nephele/localcluster"
)

// DefaultTimeout bounds each check of a run whose Options have no Timeout.
const DefaultTimeout = 3 * time.Minute

// The objects of the smoke checks, in namespace Namespace.
const (
	// Namespace holds every object the checks create.
	Namespace = "default"
	// ServiceName names the LoadBalancer Service (and, on real nodes, the Deployment
	// behind it).
	ServiceName = "nephele-smoke"
)

// Settings of a smoke run, which Configure applies: short enough that the checks of node
// loss and route drift take seconds, not minutes. Run prints them.
var (
	// controllerManagerArgs: a node whose kubelet stopped is NotReady after 20s
	// instead of 50s.
	controllerManagerArgs = []string{"--node-monitor-grace-period=20s", "--node-monitor-period=2s"}
	// ccmArgs: the lifecycle controller looks at not-Ready nodes every 2s and deletes
	// one whose instance is gone for 5s (defaults 5s and 40s); the route controller
	// compares the cloud's routes with the nodes every 10s (default 5m).
	ccmArgs = []string{"--node-monitor-period=2s", "--node-deletion-grace-period=5s", "--route-reconciliation-period=10s"}
)

// Configure makes cfg a cluster the checks can run on: the CCM deferred (Run starts it
// after the checks that need the cluster without it) and the short periods of the
// settings above, added to cfg's own flags.
func Configure(cfg *localcluster.Config) {
	cfg.DeferCCM = true
	cfg.ControllerManagerArgs = append(append([]string(nil), controllerManagerArgs...), cfg.ControllerManagerArgs...)
	cfg.CCMArgs = append(append([]string(nil), ccmArgs...), cfg.CCMArgs...)
}

// Options tune a run.
type Options struct {
	// Out receives one line per check; nil discards them.
	Out io.Writer
	// Timeout bounds each check; default DefaultTimeout.
	Timeout time.Duration
}

// Result counts a run's checks.
type Result struct {
	Passed, Failed, NotRun int
}

// check is one check: its name as printed, and what it does, returning what it saw.
type check struct {
	name string
	fn   func(context.Context) (string, error)
}

// Run runs the smoke checks on c, a cluster started with Configure's settings (see the
// package documentation), and starts its CCM when the checks before it have passed. It
// prints each check with PASS or FAIL and stops at the first failure, which it returns.
func Run(ctx context.Context, c *localcluster.Cluster, opts Options) (Result, error) {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	s := &smoke{c: c, cfg: c.Config(), out: opts.Out, timeout: opts.Timeout, http: &http.Client{
		Timeout: 3 * time.Second,
		Transport: &http.Transport{
			Proxy:             nil, // the VIP is local: never ask an environment's proxy
			DisableKeepAlives: true,
		},
	}}
	var before, after []check
	switch {
	case s.cfg.Hybrid != nil:
		before, after = s.hybridChecks()
	case s.cfg.NodeMode == localcluster.NodesReal:
		before, after = s.realChecks()
	default:
		after = s.kwokChecks()
	}
	res := Result{NotRun: len(before) + len(after)}
	fail := func(err error) (Result, error) {
		fmt.Fprintf(s.out, "smoke: FAILED (%d passed, %d failed, %d not run); logs in %s\n",
			res.Passed, res.Failed, res.NotRun, strings.Join(c.LogDirs(), ", "))
		return res, err
	}
	fmt.Fprintf(s.out, "smoke settings: kube-controller-manager %s; cloud-controller-manager %s\n",
		strings.Join(controllerManagerArgs, " "), strings.Join(ccmArgs, " "))
	if len(before) > 0 {
		fmt.Fprintln(s.out, "smoke checks before the cloud-controller-manager runs:")
		if err := s.run(ctx, &res, before); err != nil {
			return fail(err)
		}
	}
	if !c.CCMStarted() {
		cctx, cancel := context.WithTimeoutCause(ctx, s.timeout, fmt.Errorf("not done within %s", s.timeout))
		err := c.StartCCM(cctx)
		cancel()
		if err != nil {
			return fail(err)
		}
	}
	fmt.Fprintln(s.out, "smoke checks:")
	if err := s.run(ctx, &res, after); err != nil {
		return fail(err)
	}
	s.reportResources()
	fmt.Fprintf(s.out, "smoke: PASSED (%d checks)\n", res.Passed)
	return res, nil
}

// run runs the checks in order, each bounded by the timeout, counting each in res, and
// stops at the first failure.
func (s *smoke) run(ctx context.Context, res *Result, list []check) error {
	for _, chk := range list {
		cctx, cancel := context.WithTimeoutCause(ctx, s.timeout, fmt.Errorf("not done within %s", s.timeout))
		start := time.Now()
		detail, err := chk.fn(cctx)
		cancel()
		took := time.Since(start).Seconds()
		res.NotRun--
		if err != nil {
			res.Failed++
			fmt.Fprintf(s.out, "  FAIL %s (%.1fs): %v\n", chk.name, took, err)
			return fmt.Errorf("smoke check %q failed: %w", chk.name, err)
		}
		res.Passed++
		if detail != "" {
			detail = ": " + detail
		}
		fmt.Fprintf(s.out, "  PASS %s%s (%.1fs)\n", chk.name, detail, took)
	}
	return nil
}

// eventually calls fn until it succeeds or the check's time is up; the error then quotes
// fn's last.
func (s *smoke) eventually(ctx context.Context, fn func(context.Context) error) error {
	return waitfor.Condition(ctx, s.timeout, fn)
}
