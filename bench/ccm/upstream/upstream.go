package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

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
)

// Run runs upstream's cloud-controller-manager command, as its sample main does, with
// the default controllers and args as its flags, until ctx is done; it is a ccm.Func.
func Run(ctx context.Context, args []string, stderr io.Writer) int {
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
		cl, err := openCloud(cp.Name, cp.CloudConfigFile)
		if err == nil {
			return cl
		}
		initErr = err
		cancel()
		return noCloud{}
	}
	cmd := app.NewCloudControllerManagerCommand(opts, initCloud, app.DefaultInitFuncConstructors,
		names.CCMControllerAliases(), cliflag.NamedFlagSets{}, ctx.Done())
	cmd.SetArgs(args)
	cmd.SetErr(stderr)
	// The error is printed once, below.
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
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

// openCloud builds the local cloud for upstream's command. It does not go through
// k8s.io/cloud-provider's process-wide registry, whose RegisterCloudProvider and
// InitCloudProvider exit the process (klog.Fatal) on a second registration and on an
// unreadable config file, where this returns an error.
func openCloud(name, configPath string) (cloudprovider.Interface, error) {
	switch {
	case name == "":
		return nil, fmt.Errorf("no cloud provider: pass --cloud-provider=%s", upstreamcloud.ProviderName)
	case !slices.Contains(upstreamcloud.Names(), name):
		return nil, fmt.Errorf("--cloud-provider=%s: this controller carries only %q", name, upstreamcloud.Names())
	case configPath == "":
		return nil, errors.New("--cloud-config is required: the local cloud's endpoint and token")
	}
	f, err := os.Open(configPath)
	if err != nil {
		return nil, fmt.Errorf("--cloud-config: %w", err)
	}
	defer f.Close()
	cl, err := upstreamcloud.NewNamed(name, f)
	if err != nil {
		return nil, fmt.Errorf("--cloud-config %s: %w", configPath, err)
	}
	return cl, nil
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
