package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/nodeagent"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcluster"
)

// What up runs the cluster with.
const (
	// clusterName is the CCM's --cluster-name; the local cloud files load balancers and
	// routes under it.
	clusterName = localcluster.DefaultClusterName

	localcloudBinary = "localcloud"
	ccmBinary        = "cloud-controller-manager"

	// pollInterval paces every wait for a component or an object.
	pollInterval = 200 * time.Millisecond
)

// cluster is one run of `nephele up`: the processes, the node agent and the files in the
// state directory, which it owns until stop.
type cluster struct {
	opts     upOptions
	progress *progress
	lock     *dirLock

	env        *controlplane.Env
	cloudProc  *controlplane.Process
	cloudURL   string
	cloudToken string
	cloud      *client.Client
	ccmProc    *controlplane.Process
	ccmURL     string

	nodes     []nodeagent.Node
	agent     *nodeagent.Agent
	agentStop context.CancelFunc
	agentDone chan struct{} // closed when the agent's Run returned, with agentErr set
	agentErr  error
	agentLog  *os.File
}

// Files in the state directory.
func (c *cluster) runDir() string         { return filepath.Join(c.opts.dir, "run") }
func (c *cluster) cloudDir() string       { return filepath.Join(c.opts.dir, "cloud") }
func (c *cluster) kubeconfigPath() string { return filepath.Join(c.opts.dir, "kubeconfig") }
func (c *cluster) tokenPath() string      { return filepath.Join(c.opts.dir, "token") }
func (c *cluster) cloudTokenPath() string { return filepath.Join(c.cloudDir(), "token") }

// startCluster starts everything, one progress line per step. On error whatever was
// started is stopped again.
func startCluster(ctx context.Context, o upOptions, out io.Writer) (*cluster, error) {
	c := &cluster{opts: o, progress: newProgress(out)}
	fmt.Fprintf(out, "nephele up: %d nodes, state in %s\n", o.nodes, o.dir)
	ctx, cancel := context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("not up within --timeout %s", o.timeout))
	defer cancel()
	if err := c.start(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", err, context.Cause(ctx))
		}
		if c.env != nil {
			err = fmt.Errorf("%w\nlogs: %s", err, c.runDir())
		}
		return nil, errors.Join(err, c.stop(out))
	}
	return c, nil
}

func (c *cluster) start(ctx context.Context) error {
	steps := []struct {
		name string
		fn   func(context.Context) (string, error)
		skip bool
	}{
		{name: "prepare " + c.opts.dir, fn: c.prepare},
		{name: "build localcloud and cloud-controller-manager", fn: c.build, skip: !c.opts.build},
		{name: "start etcd and kube-apiserver", fn: c.startControlPlane},
		{name: "start kube-controller-manager", fn: func(ctx context.Context) (string, error) {
			_, err := c.env.StartControllerManager(ctx,
				"--allocate-node-cidrs=true", "--cluster-cidr="+c.opts.clusterCIDR, "--node-cidr-mask-size=24")
			return "", err
		}},
		{name: "start kube-scheduler", fn: func(ctx context.Context) (string, error) {
			_, err := c.env.StartScheduler(ctx)
			return "", err
		}},
		{name: "start kwok (simulated kubelets)", fn: func(ctx context.Context) (string, error) {
			_, err := c.env.StartKwok(ctx)
			return "", err
		}},
		{name: "start local cloud", fn: c.startCloud},
		{name: "register " + plural(c.opts.nodes, "node") + " and their instances", fn: c.registerNodes},
		{name: "start node agents", fn: c.startAgents},
		{name: "start cloud-controller-manager", fn: c.startCCM},
		{name: "wait for the CCM to initialize the nodes", fn: c.waitNodesInitialized},
	}
	for _, s := range steps {
		if s.skip {
			continue
		}
		if err := c.progress.Step(ctx, s.name, s.fn); err != nil {
			return err
		}
	}
	return nil
}

// prepare takes the state directory for this run (takeDir) and always removes the
// previous run's control plane.
func (c *cluster) prepare(ctx context.Context) (string, error) {
	lock, detail, err := takeDir(ctx, c.opts)
	if err != nil {
		return "", err
	}
	c.lock = lock
	if detail == "" {
		detail = "reusing the local cloud's state"
		if _, err := os.Stat(filepath.Join(c.cloudDir(), "state.db")); errors.Is(err, os.ErrNotExist) {
			detail = "new"
		}
	}
	// The control plane is new every run: a previous run's etcd data and certificates
	// (perhaps of a run that was killed) are of no use to this one.
	if err := os.RemoveAll(c.runDir()); err != nil {
		return "", fmt.Errorf("remove the previous run's %s: %w", c.runDir(), err)
	}
	if err := os.MkdirAll(c.cloudDir(), 0o700); err != nil {
		return "", err
	}
	return detail, nil
}

// takeDir takes the state directory for a run of either mode: it locks it, removes from
// the machine whatever a killed run of real nodes recorded there, wipes the directory
// with --fresh, and removes the previous run's credentials. The detail says what it
// removed or wiped, "" when nothing.
func takeDir(ctx context.Context, o upOptions) (*dirLock, string, error) {
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return nil, "", err
	}
	lock, err := lockDir(o.dir)
	if err != nil {
		return nil, "", err
	}
	fail := func(err error) (*dirLock, string, error) {
		return nil, "", errors.Join(err, lock.release())
	}
	// Before anything of the directory goes: the journal in it is all that knows what
	// a killed run's hosts left on the machine.
	cleaned, err := localcluster.Cleanup(ctx, o.dir)
	if err != nil {
		return fail(err)
	}
	var details []string
	if cleaned != "" {
		details = append(details, "removed what a killed run left on the machine: "+cleaned)
	}
	if o.fresh {
		entries, err := os.ReadDir(o.dir)
		if err != nil {
			return fail(err)
		}
		for _, e := range entries {
			if e.Name() == lockFile {
				continue
			}
			if err := os.RemoveAll(filepath.Join(o.dir, e.Name())); err != nil {
				return fail(fmt.Errorf("--fresh: %w", err))
			}
		}
		details = append(details, "fresh")
	}
	for _, p := range []string{filepath.Join(o.dir, "kubeconfig"), filepath.Join(o.dir, "token")} {
		if err := os.RemoveAll(p); err != nil {
			return fail(fmt.Errorf("remove the previous run's %s: %w", p, err))
		}
	}
	return lock, strings.Join(details, "; "), nil
}

// build builds the two binaries of this repository up runs as processes.
func (c *cluster) build(ctx context.Context) (string, error) {
	return "into " + c.opts.binDir, buildBinaries(ctx, c.opts.binDir, localcloudBinary, ccmBinary)
}

func (c *cluster) startControlPlane(ctx context.Context) (string, error) {
	for _, name := range []string{localcloudBinary, ccmBinary} {
		if err := checkExecutable(filepath.Join(c.opts.binDir, name)); err != nil {
			return "", fmt.Errorf("%w: run make build, or up without --build=false", err)
		}
	}
	env, err := controlplane.Start(ctx, controlplane.Options{Dir: c.runDir(), BinDir: c.opts.binDir})
	if err != nil {
		return "", err
	}
	c.env = env
	kubeconfig, err := os.ReadFile(env.Kubeconfig)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(c.kubeconfigPath(), kubeconfig, 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(c.tokenPath(), []byte(env.Token+"\n"), 0o600); err != nil {
		return "", err
	}
	return env.APIServerURL, nil
}

// startCloud starts the local cloud on the kept state file and removes what a previous
// run's cluster left in it.
func (c *cluster) startCloud(ctx context.Context) (string, error) {
	token, err := cloudToken(c.cloudTokenPath())
	if err != nil {
		return "", err
	}
	c.cloudToken = token
	addrFile := filepath.Join(c.cloudDir(), "address")
	if err := os.Remove(addrFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	p, err := c.env.StartProcess(localcloudBinary,
		"--state", filepath.Join(c.cloudDir(), "state.db"),
		"--token-file", c.cloudTokenPath(),
		"--listen", "127.0.0.1:0",
		"--address-file", addrFile,
		"--vip-pool", c.opts.vipPool,
		"--instance-cidr", c.opts.instanceCIDR,
	)
	if err != nil {
		return "", err
	}
	c.cloudProc = p
	if c.cloudURL, c.cloud, err = localcluster.WaitForCloud(ctx, p, addrFile, token, "nephele-up"); err != nil {
		return "", err
	}

	instances, err := c.cloud.ListAllInstances(ctx, 0)
	if err != nil {
		return "", err
	}
	lbs, err := c.cloud.ListLoadBalancers(ctx, clusterName)
	if err != nil {
		return "", err
	}
	for _, lb := range lbs {
		if err := c.cloud.DeleteLoadBalancer(ctx, lb.Name); err != nil {
			return "", fmt.Errorf("delete load balancer %s (for %s) left by a previous run: %w", lb.Name, lb.Spec.Service, err)
		}
	}
	routes, err := c.cloud.ListRoutes(ctx, clusterName)
	if err != nil {
		return "", err
	}
	for _, r := range routes {
		if err := c.cloud.DeleteRoute(ctx, clusterName, r.Name); err != nil {
			return "", fmt.Errorf("delete route %s left by a previous run: %w", r.Name, err)
		}
	}
	detail := c.cloudURL
	if n := len(instances); n > 0 {
		detail += ", state kept: " + plural(n, "instance")
	}
	var stale []string
	if n := len(lbs); n > 0 {
		stale = append(stale, plural(n, "load balancer"))
	}
	if n := len(routes); n > 0 {
		stale = append(stale, plural(n, "route"))
	}
	if len(stale) > 0 {
		detail += ", deleted the previous run's " + strings.Join(stale, " and ")
	}
	return detail, nil
}

// cloudToken returns the local cloud's API token, made on the first run and kept with
// its state.
func cloudToken(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err == nil && strings.TrimSpace(string(raw)) != "" {
		return strings.TrimSpace(string(raw)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read the local cloud token: %w", err)
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := hex.EncodeToString(b)
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write the local cloud token: %w", err)
	}
	return token, nil
}

// startAgents runs the node agent for every node, logging to run/node-agent.log.
func (c *cluster) startAgents(ctx context.Context) (string, error) {
	f, err := os.OpenFile(filepath.Join(c.runDir(), "node-agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", err
	}
	c.agentLog = f
	log := logr.FromSlogHandler(slog.NewTextHandler(f, nil))
	agent, err := nodeagent.New(nodeagent.Config{Client: c.env.Client, Nodes: c.nodes, Logger: log})
	if err != nil {
		return "", err
	}
	runCtx, stop := context.WithCancel(context.Background())
	c.agent, c.agentStop, c.agentDone = agent, stop, make(chan struct{})
	go func() {
		defer close(c.agentDone)
		c.agentErr = agent.Run(runCtx)
	}()
	select {
	case <-agent.Ready():
	case <-c.agentDone:
		return "", fmt.Errorf("node agent stopped: %v", c.agentErr)
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Address.String()
	}
	return "on " + strings.Join(addrs, ", "), nil
}

func (c *cluster) startCCM(ctx context.Context) (string, error) {
	cloudConfig := filepath.Join(c.cloudDir(), "cloud-config.yaml")
	cfg := fmt.Sprintf("# The local provider's --cloud-config, written by nephele up.\nendpoint: %s\ntokenFile: %s\n", c.cloudURL, c.cloudTokenPath())
	if err := os.WriteFile(cloudConfig, []byte(cfg), 0o600); err != nil {
		return "", err
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	p, err := c.env.StartProcess(ccmBinary,
		"--cloud-provider=local",
		"--cloud-config="+cloudConfig,
		"--kubeconfig="+c.env.Kubeconfig,
		"--authentication-kubeconfig="+c.env.Kubeconfig,
		"--authorization-kubeconfig="+c.env.Kubeconfig,
		"--cluster-name="+clusterName,
		"--cluster-cidr="+c.opts.clusterCIDR,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
	)
	if err != nil {
		return "", err
	}
	c.ccmProc = p
	c.ccmURL = "https://127.0.0.1:" + strconv.Itoa(port)
	err = localcluster.WaitForCCM(ctx, p, c.ccmURL)
	return c.ccmURL, err
}

// wait blocks until ctx ends (nil) or a component stops on its own (an error).
func (c *cluster) wait(ctx context.Context) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	procs := []*controlplane.Process{c.ccmProc, c.cloudProc, c.env.ControllerManager, c.env.Scheduler, c.env.Kwok}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.agentDone:
			return fmt.Errorf("node agent stopped: %v", c.agentErr)
		case <-tick.C:
		}
		for _, p := range procs {
			if p == nil {
				continue
			}
			select {
			case <-p.Done():
				return fmt.Errorf("%s exited (%v); the end of %s:\n%s", p.Name(), p.Err(), p.LogPath(), p.LogTail(15))
			default:
			}
		}
	}
}

// stop stops everything started, the CCM first, then the local cloud, the node agents
// and the control plane, and releases the state directory. It keeps the logs.
func (c *cluster) stop(out io.Writer) error {
	if c.env != nil {
		fmt.Fprintln(out, "stopping (Ctrl-C again kills at once)")
	}
	ctx := context.Background()
	var errs []error
	stopProc := func(p *controlplane.Process) func(context.Context) (string, error) {
		return func(context.Context) (string, error) {
			err := p.Stop()
			if exit := p.Err(); exit != nil && err == nil {
				return exit.Error(), nil
			}
			return "", err
		}
	}
	if c.ccmProc != nil {
		errs = append(errs, c.progress.Step(ctx, "stop cloud-controller-manager", stopProc(c.ccmProc)))
	}
	if c.cloudProc != nil {
		errs = append(errs, c.progress.Step(ctx, "stop local cloud", stopProc(c.cloudProc)))
	}
	if c.agentStop != nil {
		errs = append(errs, c.progress.Step(ctx, "stop node agents", func(context.Context) (string, error) {
			c.agentStop()
			<-c.agentDone
			return "", c.agentErr
		}))
	}
	if c.agentLog != nil {
		errs = append(errs, c.agentLog.Close())
	}
	if c.env != nil {
		errs = append(errs, c.progress.Step(ctx, "stop the control plane and kwok", func(context.Context) (string, error) {
			return "logs kept in " + c.runDir(), c.env.StopKeepingLogs()
		}))
		// They point at an apiserver that is gone.
		for _, p := range []string{c.kubeconfigPath(), c.tokenPath()} {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if c.lock != nil {
		errs = append(errs, c.lock.release())
	}
	return errors.Join(errs...)
}

func getOK(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// plural says "1 route", "2 routes".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
