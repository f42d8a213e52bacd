package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/localcluster"
)

// Settings of a smoke run on real nodes: short enough that the checks of node loss and
// route drift take seconds, not minutes. They are printed with the smoke checks.
var (
	// smokeControllerManagerArgs: a node whose kubelet stopped is NotReady after 20s
	// instead of 50s.
	smokeControllerManagerArgs = []string{"--node-monitor-grace-period=20s", "--node-monitor-period=2s"}
	// smokeCCMArgs: the lifecycle controller looks at not-Ready nodes every 2s and
	// deletes one whose instance is gone for 5s (defaults 5s and 40s); the route
	// controller compares the cloud's routes with the nodes every 10s (default 5m).
	smokeCCMArgs = []string{"--node-monitor-period=2s", "--node-deletion-grace-period=5s", "--route-reconciliation-period=10s"}
)

// realBuilt are what up builds into --bin-dir for real nodes, as localcluster.Preflight
// names them.
var realBuilt = append(append([]string(nil), localcluster.BuiltBinaries...), "images")

// runReal runs the real cluster: it checks the machine first, builds what is missing,
// starts the cluster, then runs the smoke checks or waits for a signal, and stops it.
func runReal(ctx context.Context, o upOptions, out io.Writer) error {
	fmt.Fprintf(out, "nephele up: %s on the local cloud's hosts, state in %s\n", plural(o.nodes, "real node"), o.dir)
	var built []string
	if o.build {
		built = realBuilt
	}
	// Before anything changes: what is missing is said at once, with the fix.
	if err := localcluster.Preflight(o.binDir, built...); err != nil {
		return fmt.Errorf("%w\nor run the simulated cluster, which needs none of this: nephele up --kwok (make up UP_FLAGS=--kwok)", err)
	}
	p := newProgress(out)
	startCtx, cancel := context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("not up within --timeout %s", o.timeout))
	defer cancel()

	var lock *dirLock
	err := p.Step(startCtx, "prepare "+o.dir, func(ctx context.Context) (string, error) {
		l, detail, err := takeDir(ctx, o)
		lock = l
		if detail == "" {
			detail = "ok"
		}
		return detail, err
	})
	if err != nil {
		return err
	}
	defer func() { _ = lock.release() }()
	if o.build {
		if err := buildReal(startCtx, p, o.binDir); err != nil {
			return err
		}
	}

	cfg := localcluster.Config{
		Dir:          o.dir,
		BinDir:       o.binDir,
		Nodes:        o.nodes,
		Bridge:       o.bridge,
		InstanceCIDR: netip.MustParsePrefix(o.instanceCIDR),
		ClusterCIDR:  netip.MustParsePrefix(o.clusterCIDR),
		ServiceCIDR:  netip.MustParsePrefix(o.serviceCIDR),
		VIPPool:      netip.MustParsePrefix(o.vipPool),
		ClusterName:  clusterName,
		CCM:          localcluster.CCMMode(o.ccm),
		Progress:     p,
	}
	if o.smoke {
		// The smoke checks begin before the cloud-controller-manager runs: pods of
		// different nodes must not reach each other before its routes exist.
		cfg.DeferCCM = true
		cfg.ControllerManagerArgs = smokeControllerManagerArgs
		cfg.CCMArgs = smokeCCMArgs
	}
	c, err := localcluster.Start(startCtx, cfg)
	if err != nil {
		return err
	}
	cancel()
	if err := publishCredentials(o.dir, c); err != nil {
		return errors.Join(err, stopReal(c, o.dir, out))
	}
	var runErr error
	if o.smoke {
		runErr = runRealSmoke(ctx, c, o, out)
	} else {
		printRealUsage(out, c, o.dir)
		runErr = c.Wait(ctx)
	}
	return errors.Join(runErr, stopReal(c, o.dir, out))
}

// buildReal builds nephele's commands a real cluster runs and the node images.
func buildReal(ctx context.Context, p *progress, binDir string) error {
	err := p.Step(ctx, "build "+strings.Join(localcluster.BuiltBinaries, ", "), func(ctx context.Context) (string, error) {
		return "into " + binDir, buildBinaries(ctx, binDir, localcluster.BuiltBinaries...)
	})
	if err != nil {
		return err
	}
	return p.Step(ctx, "build the node images", func(ctx context.Context) (string, error) {
		moduleDir, err := goModuleDir(ctx, ".")
		if err != nil {
			return "", fmt.Errorf("%w (run up inside the nephele source tree, or make images and --build=false)", err)
		}
		out, err := images.Build(ctx, images.BuildOptions{ModuleDir: moduleDir, OutDir: localcluster.ImageDir(binDir)}, localcluster.Images...)
		if err != nil {
			return "", err
		}
		refs := make([]string, len(out))
		for i, b := range out {
			refs[i] = b.Ref
		}
		return strings.Join(refs, ", "), nil
	})
}

// publishCredentials puts the admin kubeconfig and token where the user looks for them.
func publishCredentials(dir string, c *localcluster.Cluster) error {
	kubeconfig, err := os.ReadFile(c.Env.Kubeconfig)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), kubeconfig, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "token"), []byte(c.Env.Token+"\n"), 0o600)
}

// stopReal stops the cluster and removes the credentials of an apiserver that is gone.
func stopReal(c *localcluster.Cluster, dir string, out io.Writer) error {
	fmt.Fprintln(out, "stopping (Ctrl-C again kills at once; the next nephele up cleans up after that)")
	err := c.Stop(context.Background())
	for _, p := range []string{filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "token")} {
		if rmErr := os.Remove(p); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			err = errors.Join(err, rmErr)
		}
	}
	if err == nil {
		fmt.Fprintf(out, "stopped; logs kept in %s\n", strings.Join(c.LogDirs(), ", "))
	}
	return err
}

// printRealUsage tells a person how to use the real cluster that is up.
func printRealUsage(out io.Writer, c *localcluster.Cluster, dir string) {
	kubectl := c.Kubectl
	var nodes []string
	for _, n := range c.Nodes {
		nodes = append(nodes, n.Name+" "+n.Address.String())
	}
	fmt.Fprintf(out, `
nephele is up: %s (%s), kube-apiserver %s, local cloud %s

Use it with kubectl:
  export KUBECONFIG=%s
  %s get nodes -o wide -L topology.kubernetes.io/zone
  %s create deployment hello --image=%s --replicas=%d --port=8080
  %s expose deployment hello --type=LoadBalancer --port=8080
  %s get service hello          # EXTERNAL-IP: a VIP of the local cloud's load balancer
  curl http://<EXTERNAL-IP>:8080/   # a pod answers with its name
  %s logs deploy/hello
  %s exec deploy/hello -- /demo-http get http://<another pod's IP>:8080/

The cloud:
  curl -H "Authorization: Bearer $(cat %s)" %s/v1/instances
  curl -H "Authorization: Bearer $(cat %s)" %s/v1/clusters/%s/routes

Logs: %s (nodes: <host>/boot.log and <host>/node/logs/ in %s while they run)
Press Ctrl-C to stop.
`,
		plural(len(c.Nodes), "real node"), strings.Join(nodes, ", "), c.Env.APIServerURL, c.CloudURL,
		filepath.Join(dir, "kubeconfig"),
		kubectl,
		kubectl, localcluster.DemoImage, len(c.Nodes),
		kubectl, kubectl, kubectl, kubectl,
		c.CloudTokenFile, c.CloudURL,
		c.CloudTokenFile, c.CloudURL, clusterName,
		strings.Join(c.LogDirs()[:2], ", "), c.LogDirs()[2],
	)
}
