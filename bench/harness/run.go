package harness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nephele-dev/nephele/bench/ccm"
	"github.com/nephele-dev/nephele/bench/results"
	"github.com/nephele-dev/nephele/localcloud/api"
)

// Run runs every row of cfg through the scenarios and saves each row's results in
// cfg.OutDir as soon as the row is done. A row that fails part-way is saved with its
// problems and the next row still runs; the returned error joins the failures.
func Run(ctx context.Context, cfg Config) ([]*results.Run, error) {
	if cfg.ControllerCommand == nil {
		return nil, errors.New("harness: Config.ControllerCommand is nil")
	}
	if len(cfg.Rows) == 0 {
		return nil, errors.New("harness: no rows to run")
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		runs = make([]*results.Run, len(cfg.Rows))
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for i, row := range cfg.Rows {
		r := newRowRun(cfg, row, i)
		runs[i] = r.res
		if err := r.setUp(ctx); err != nil {
			r.problem("setting up: %v", err)
			fail(fmt.Errorf("row %s: %w", row.Name, err))
			if err := r.finish(ctx, false); err != nil {
				fail(err)
			}
			continue
		}
		r.timed(ctx)
		last := i == len(cfg.Rows)-1
		if cfg.Scale.OverlapSteady && !last {
			cfg.Logf("%s: steady-state window runs in the background while the next row starts", row.Name)
			wg.Go(func() {
				if err := r.finish(ctx, true); err != nil {
					fail(err)
				}
			})
			continue
		}
		if err := r.finish(ctx, true); err != nil {
			fail(err)
		}
	}
	wg.Wait()
	return runs, errors.Join(errs...)
}

// rowRun is one row's pass through the scenarios.
type rowRun struct {
	cfg   Config
	row   Row
	s     Scale
	index int // the row's position in the run, which picks its VIP pool
	res   *results.Run

	w     *world
	ctrl  *controller
	mem   *memorySampler
	trk   *tracker
	stopT context.CancelFunc // stops the tracker's informers
	addrs map[string]string  // instance name -> InternalIP

	initStart, fanStart time.Time // when each burst began
	calmStart           time.Time // when the fan-out after convergence began
	servicesStart       time.Time // when the services scenario created its Services
	nodes, fanNodes     []string
	cidrs, fanCIDRs     []string
	// calmNodes join in the fan-out after everything converged (after the steady window).
	calmNodes, calmCIDRs []string
	nbNodes, nbCIDRs     []string          // the noisy-neighbour scenario's nodes
	services             []string          // Service keys of the S services
	lbNames              map[string]string // Service key -> load balancer name
	allNodes             int
	allServices          int
}

func newRowRun(cfg Config, row Row, index int) *rowRun {
	s := cfg.Scale
	r := &rowRun{cfg: cfg, row: row, s: s, index: index, lbNames: map[string]string{}}
	r.res = &results.Run{
		Scale:       s.Name,
		Row:         row.Name,
		Impl:        string(row.Impl),
		Description: row.Description,
		Flags:       append([]string{}, row.Flags...),
		Params: results.Params{
			Nodes: s.Nodes, Services: s.Services, FanOutNodes: s.FanOutNodes, HeadOfLine: s.HeadOfLine,
			CloudLatency: results.Duration{Duration: s.CloudLatency}, CloudRateLimit: s.CloudQPS, CloudBurst: s.CloudBurst,
			RouteApplyCost: max(1, s.RouteApplyCost), MaxRouteChanges: api.MaxRouteChanges,
			RequestTimeout: results.Duration{Duration: s.RequestTimeout},
			RouteWait:      results.Duration{Duration: s.RouteWait},
			SteadyWindow:   results.Duration{Duration: s.SteadyWindow}, OverlappedSteady: s.OverlapSteady,
			Profile:      s.Profile,
			NeighbourQPS: s.NeighbourQPS, NeighbourNodes: s.NeighbourNodes, NeighbourServices: s.NeighbourServices,
		},
		Machine: machine(),
		Started: time.Now(),
	}
	// Pod CIDR 0 is the warm-up node's.
	for i := range s.Nodes {
		r.nodes = append(r.nodes, fmt.Sprintf("node-%05d", i))
		r.cidrs = append(r.cidrs, podCIDR(1+i))
	}
	for i := range s.FanOutNodes {
		r.fanNodes = append(r.fanNodes, fmt.Sprintf("fan-%05d", i))
		r.fanCIDRs = append(r.fanCIDRs, podCIDR(1+s.Nodes+i))
	}
	for i := range s.NeighbourNodes {
		r.nbNodes = append(r.nbNodes, fmt.Sprintf("nb-%05d", i))
		r.nbCIDRs = append(r.nbCIDRs, podCIDR(1+s.Nodes+s.FanOutNodes+i))
	}
	for i := range s.FanOutNodes {
		r.calmNodes = append(r.calmNodes, fmt.Sprintf("calm-%05d", i))
		r.calmCIDRs = append(r.calmCIDRs, podCIDR(1+s.Nodes+s.FanOutNodes+s.NeighbourNodes+i))
	}
	return r
}

func (r *rowRun) logf(format string, args ...any) {
	r.cfg.Logf("%s: "+format, append([]any{r.row.Name}, args...)...)
}

func (r *rowRun) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.logf("PROBLEM: %s", msg)
	r.res.Problems = append(r.res.Problems, msg)
}

// warmup is the node and the Service used to wait until the controllers work.
const warmupNode = "warmup"

// setUp builds the world, starts the controllers and waits until they initialize a
// warm-up node, so that the scenarios time the controllers' work, not their start.
func (r *rowRun) setUp(ctx context.Context) error {
	r.logf("starting control plane, local cloud and tap")
	w, err := startWorld(ctx, r.cfg.BinDir, vipPool(r.index))
	r.w = w
	if err != nil {
		return err
	}
	// Only the fan-out's nodes are looked for in load balancers.
	w.tap.Watch(append(slices.Clone(r.fanNodes), r.calmNodes...))
	if r.addrs, err = w.createInstances(ctx, []string{warmupNode}); err != nil {
		return err
	}
	if err := ensureNamespace(ctx, w.kube); err != nil {
		return err
	}
	if err := w.setFaults(ctx, r.s); err != nil {
		return err
	}
	cloudConfig, err := w.writeCloudConfig(r.s.RequestTimeout)
	if err != nil {
		return err
	}
	tctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r.stopT = stop
	if r.trk, err = startTracker(tctx, w.kube); err != nil {
		return err
	}
	flags, err := r.flags(cloudConfig)
	if err != nil {
		return err
	}
	r.logf("starting controllers: %s", r.row.Impl)
	if r.ctrl, err = startController(ctx, w.cp, r.cfg.ControllerCommand, r.row, flags); err != nil {
		return err
	}
	r.mem = sampleMemory(r.ctrl, 2*time.Second)
	if _, err := createNodes(ctx, w.kube, []string{warmupNode}, []string{podCIDR(0)}, r.addrs); err != nil {
		return err
	}
	if err := r.waitFor(ctx, 3*time.Minute, func() bool { return r.trk.allInitialized([]string{warmupNode}) }); err != nil {
		return fmt.Errorf("the controllers did not initialize the warm-up node: %w; controller log:\n%s", err, r.ctrl.LogTail(30))
	}
	r.allNodes = 1
	r.logf("controllers up")
	return nil
}

// flags are the controller flags of the row: what every row gets, then the row's own.
func (r *rowRun) flags(cloudConfig string) ([]string, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	kc := r.w.cp.Kubeconfig
	f := []string{
		"--cloud-provider=local",
		"--cloud-config=" + cloudConfig,
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cluster-name=" + clusterName,
		"--cluster-cidr=" + clusterCIDR,
		"--configure-cloud-routes=true",
	}
	if r.row.Impl == ccm.Upstream {
		// Upstream writes its self-signed serving certificate to a directory.
		f = append(f, "--cert-dir="+filepath.Join(r.w.cp.Dir, "ccm-certs"))
	}
	return append(f, r.row.Flags...), nil
}

// timed runs the scenarios whose duration is measured.
func (r *rowRun) timed(ctx context.Context) {
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"init", r.scenarioInit},
		{"services", r.scenarioServices},
		{"fan-out", r.scenarioFanOut},
		{"head-of-line", r.scenarioHeadOfLine},
		{"noisy neighbour", r.scenarioNeighbour},
	}
	for _, st := range steps {
		if ctx.Err() != nil {
			return
		}
		if exited, err := r.ctrl.exited(); exited {
			r.problem("the controller process exited before %s (%v); log:\n%s", st.name, err, r.ctrl.LogTail(20))
			return
		}
		r.logf("scenario %s", st.name)
		if err := st.fn(ctx); err != nil {
			r.problem("%s: %v", st.name, err)
		}
	}
}

// finish runs the steady-state window (when steady), reads the memory figures, stops
// everything and saves the results.
func (r *rowRun) finish(ctx context.Context, steady bool) error {
	if steady && r.ctrl != nil {
		if err := r.scenarioSteady(ctx); err != nil {
			r.problem("steady state: %v", err)
		}
		// After the steady window every route and load balancer has converged (or the
		// route wait gave up on it): the fan-out again, on a quiet cloud.
		if exited, err := r.ctrl.exited(); exited {
			r.problem("the controller process exited before the fan-out after convergence (%v); log:\n%s", err, r.ctrl.LogTail(20))
		} else if err := r.scenarioFanOutCalm(ctx); err != nil {
			r.problem("fan-out after convergence: %v", err)
		}
	}
	r.routeTimes()
	r.converged()
	if r.ctrl != nil {
		r.readMemory(ctx)
		if exited, err := r.ctrl.exited(); exited {
			r.problem("the controller process exited during the run (%v); log:\n%s", err, r.ctrl.LogTail(20))
		} else if err := r.ctrl.Stop(); err != nil {
			r.problem("stopping the controllers: %v", err)
		}
	}
	if r.stopT != nil {
		r.stopT()
	}
	if r.w != nil {
		if err := r.w.stop(context.WithoutCancel(ctx)); err != nil {
			r.problem("stopping the control plane: %v", err)
		}
	}
	r.res.Finished = time.Now()
	r.res.Machine.LoadAfter = loadAverage()
	if err := results.Save(r.cfg.OutDir, r.res); err != nil {
		return err
	}
	r.logf("done; results saved")
	return nil
}

// addInstances creates the instances of nodes about to join, as a cloud user does shortly
// before their kubelets register. The cloud's faults are off meanwhile, so that the
// harness spends neither time nor the controllers' rate limit on it; switching them back
// on refills the rate limit's bucket.
func (r *rowRun) addInstances(ctx context.Context, names []string) error {
	if err := r.w.direct.ClearFaults(ctx); err != nil {
		return fmt.Errorf("clearing the cloud's faults to create instances: %w", err)
	}
	addrs, err := r.w.createInstances(ctx, names)
	if err != nil {
		return err
	}
	maps.Copy(r.addrs, addrs)
	return r.w.setFaults(ctx, r.s)
}

// waitFor polls cond every 200ms until it holds, the timeout passes or ctx ends.
func (r *rowRun) waitFor(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not done within %s", timeout)
		}
		if exited, err := r.ctrl.exited(); exited {
			return fmt.Errorf("the controller process exited (%v)", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
