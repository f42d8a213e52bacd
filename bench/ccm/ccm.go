package ccm

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	cliflag "k8s.io/component-base/cli/flag"

	// The same registrations upstream's sample cloud-controller-manager main makes.
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"

	"github.com/nephele-dev/nephele/bench/upstreamcloud"
	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers"
	"github.com/nephele-dev/nephele/manager"
	"github.com/nephele-dev/nephele/providers/local"
)

// Impl names a cloud-controller-manager implementation.
type Impl string

// The implementations Main runs.
const (
	Nephele  Impl = "nephele"
	Upstream Impl = "upstream"
)

// Main is the entry point of a controller process. args are
//
//	--impl=nephele|upstream --stats-addr-file=FILE -- <cloud-controller-manager flags>
//
// It runs the manager until SIGTERM or SIGINT and returns the process exit code, writing
// errors to stderr.
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("ccm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	impl := fs.String("impl", "", "the implementation: nephele or upstream")
	statsFile := fs.String("stats-addr-file", "", "file to write the address of the memory statistics endpoint to")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *statsFile == "" {
		fmt.Fprintln(stderr, "error: --stats-addr-file is required")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	statsCtx, stopStats := context.WithCancel(ctx)
	stats, err := startStats(statsCtx, *statsFile)
	if err != nil {
		stopStats()
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	defer func() {
		stopStats()
		stats.wait()
	}()

	switch Impl(*impl) {
	case Nephele:
		return runNephele(ctx, fs.Args(), stderr)
	case Upstream:
		return runUpstream(ctx, fs.Args(), stderr)
	default:
		fmt.Fprintf(stderr, "error: --impl %q: want %s or %s\n", *impl, Nephele, Upstream)
		return 2
	}
}

// runNephele runs what cmd/cloud-controller-manager runs.
func runNephele(ctx context.Context, args []string, stderr io.Writer) int {
	registry := cloud.NewRegistry()
	if err := local.Register(registry); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	cmd := manager.NewCommand("cloud-controller-manager", registry, controllers.Default())
	cmd.SetArgs(args)
	cmd.SetErr(stderr)
	cmd.SetContext(ctx)
	return manager.Execute(cmd)
}

// runUpstream runs upstream's cloud-controller-manager command, as its sample main does,
// with the default controllers.
func runUpstream(ctx context.Context, args []string, stderr io.Writer) int {
	upstreamcloud.Register()
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	// Upstream's cloud initializer cannot fail the command (upstream mains exit the
	// process instead), so a failure stops the command through its stop channel and
	// the controllers get a cloud without capabilities, which they decline to run on.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var initErr error
	initCloud := func(c *config.CompletedConfig) cloudprovider.Interface {
		cp := c.ComponentConfig.KubeCloudShared.CloudProvider
		cl, err := cloudprovider.InitCloudProvider(cp.Name, cp.CloudConfigFile)
		switch {
		case err != nil:
			initErr = fmt.Errorf("initializing cloud provider %q: %w", cp.Name, err)
		case cl == nil:
			initErr = errors.New("no cloud provider: pass --cloud-provider")
		default:
			return cl
		}
		cancel()
		return noCloud{}
	}
	cmd := app.NewCloudControllerManagerCommand(opts, initCloud, app.DefaultInitFuncConstructors,
		names.CCMControllerAliases(), cliflag.NamedFlagSets{}, ctx.Done())
	cmd.SetArgs(args)
	cmd.SetErr(stderr)
	cmd.SilenceUsage = true
	err = cmd.ExecuteContext(ctx)
	if err == nil {
		err = initErr
	}
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}

// noCloud is a cloud without capabilities, handed to upstream's command when the real
// one could not be built, while the command is being stopped.
type noCloud struct{}

func (noCloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}
func (noCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool)                  { return nil, false }
func (noCloud) Instances() (cloudprovider.Instances, bool)                        { return nil, false }
func (noCloud) InstancesV2() (cloudprovider.InstancesV2, bool)                    { return nil, false }
func (noCloud) Zones() (cloudprovider.Zones, bool)                                { return nil, false }
func (noCloud) Clusters() (cloudprovider.Clusters, bool)                          { return nil, false }
func (noCloud) Routes() (cloudprovider.Routes, bool)                              { return nil, false }
func (noCloud) ProviderName() string                                              { return "none" }
func (noCloud) HasClusterID() bool                                                { return true }
