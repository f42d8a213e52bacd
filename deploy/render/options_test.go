package render

import (
	"strings"
	"testing"

	"github.com/nephele-dev/nephele/controllers"
	"github.com/nephele-dev/nephele/manager"
)

// TestValidateNamesTheFlag: every invalid setting gives exactly one line, naming its
// flag, and nothing else is reported.
func TestValidateNamesTheFlag(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"provider empty", func(o *Options) { o.Provider = "" }, `invalid value for --provider: "": want the provider's registered name`},
		{"provider upper case", func(o *Options) { o.Provider = "Local" }, `invalid value for --provider: "Local"`},
		{"image", func(o *Options) { o.Image = "Not A Ref" }, `invalid value for --image: "Not A Ref": not an image reference`},
		{"pull policy", func(o *Options) { o.ImagePullPolicy = "Sometimes" }, `invalid value for --image-pull-policy: "Sometimes": want Always, IfNotPresent or Never`},
		{"namespace", func(o *Options) { o.Namespace = "Kube_System" }, `invalid value for --namespace: "Kube_System"`},
		{"replicas", func(o *Options) { o.Replicas = 0 }, `invalid value for --replicas: 0: must be at least 1`},
		{"cloud config source", func(o *Options) { o.CloudConfig.Source = "vault" }, `invalid value for --cloud-config-source: "vault": want secret, configmap or none`},
		{"cloud config name", func(o *Options) { o.CloudConfig.Name = "" }, `invalid value for --cloud-config-name: ""`},
		{"cloud config key", func(o *Options) { o.CloudConfig.Key = "a/b" }, `invalid value for --cloud-config-key: "a/b"`},
		{"cluster name", func(o *Options) { o.ClusterName = "" }, `invalid value for --cluster-name: "": required`},
		{"cluster cidr syntax", func(o *Options) { o.ClusterCIDR = "10.244.0.0" }, `invalid value for --cluster-cidr: "10.244.0.0": "10.244.0.0" is not a CIDR`},
		{"cluster cidr two v4", func(o *Options) { o.ClusterCIDR = "10.0.0.0/16,10.1.0.0/16" }, `both CIDRs are IPv4: at most one IPv4 and one IPv6`},
		{"cluster cidr three", func(o *Options) { o.ClusterCIDR = "10.0.0.0/16,fd00::/48,10.1.0.0/16" }, `3 CIDRs given: at most two`},
		{"cluster cidr needed for routes", func(o *Options) { o.ClusterCIDR = "" }, `invalid value for --cluster-cidr: "": required while the route controller runs`},
		{"controllers unknown", func(o *Options) { o.Controllers = []string{"*", "-ipam"} }, `invalid value for --controllers: "*,-ipam": unknown controller "ipam"`},
		{"controllers none", func(o *Options) { o.Controllers = []string{"-service"} }, `invalid value for --controllers: "-service": "-service" enables no controller`},
		{"extra arg owned", func(o *Options) { o.ExtraArgs = []string{"--kubeconfig=/x"} }, `invalid value for --extra-arg: "--kubeconfig=/x": --kubeconfig is set by the rendering`},
		{"extra arg unknown", func(o *Options) { o.ExtraArgs = []string{"--no-such-flag=1"} }, `invalid value for --extra-arg: "--no-such-flag=1": the cloud-controller-manager has no flag --no-such-flag`},
		{"extra arg type", func(o *Options) { o.ExtraArgs = []string{"--concurrent-service-syncs=many"} }, `invalid value for --extra-arg: "--concurrent-service-syncs=many": invalid argument "many"`},
		{"extra arg shape", func(o *Options) { o.ExtraArgs = []string{"v=2"} }, `invalid value for --extra-arg: "v=2": want --name=value`},
		{"extra arg missing value", func(o *Options) { o.ExtraArgs = []string{"--concurrent-service-syncs"} }, `invalid value for --extra-arg: "--concurrent-service-syncs": flag needs an argument`},
		{"service monitor without service", func(o *Options) { o.ServiceMonitor, o.MetricsService = true, false }, `invalid value for --service-monitor: true: needs --metrics-service`},
		{"cpu request", func(o *Options) { o.Resources.CPURequest = "lots" }, `invalid value for --cpu-request: "lots": not a quantity`},
		{"memory request zero", func(o *Options) { o.Resources.MemoryRequest = "0" }, `invalid value for --memory-request: "0": must be above 0`},
		{"memory limit below request", func(o *Options) { o.Resources.MemoryLimit = "64Mi" }, `invalid value for --memory-limit: "64Mi": below --memory-request 128Mi`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			tt.change(&o)
			err := o.Validate()
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != 1 {
				t.Errorf("%d lines, want one:\n%s", len(lines), err)
			}
			if !strings.Contains(lines[0], tt.want) {
				t.Errorf("error %q, want it to contain %q", lines[0], tt.want)
			}
			if _, err := Render(o); err == nil {
				t.Error("Render accepted what Validate refused")
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Options)
	}{
		{"defaults", func(*Options) {}},
		{"dual-stack cluster cidr", func(o *Options) { o.ClusterCIDR = "10.244.0.0/16,fd00:10:244::/48" }},
		// Host bits set: the manager's --cluster-cidr (and upstream's) takes the network.
		{"cluster cidr with host bits", func(o *Options) { o.ClusterCIDR = "10.244.0.1/16" }},
		{"no cidr without routes", func(o *Options) { o.ClusterCIDR, o.ConfigureCloudRoutes = "", false }},
		{"no cidr without the route controller", func(o *Options) { o.ClusterCIDR, o.Controllers = "", []string{"*", "-route"} }},
		{"aliases", func(o *Options) { o.Controllers = []string{"cloud-node", "service"} }},
		{"extra args", func(o *Options) {
			o.ExtraArgs = []string{"--concurrent-service-syncs=5", "--v=2", "--profiling=false", "--load-balancer-class=example.com/lb"}
		}},
		{"configmap", func(o *Options) { o.CloudConfig.Source = SourceConfigMap }},
		{"no cloud config, empty name and key", func(o *Options) { o.CloudConfig = CloudConfig{Source: SourceNone} }},
		{"digest image", func(o *Options) {
			o.Image = "registry.example.com/ccm@sha256:0000000000000000000000000000000000000000000000000000000000000000"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			tt.change(&o)
			if err := o.Validate(); err != nil {
				t.Errorf("refused: %v", err)
			}
		})
	}
}

// TestClusterCIDRAsTheManager: `nephele manifests`, and the operator through it, accept
// a --cluster-cidr exactly when the manager does, so that no value the CCM runs with is
// refused before it gets there (issue 25: 10.244.0.1/16 was).
func TestClusterCIDRAsTheManager(t *testing.T) {
	for _, v := range []string{"10.244.0.0/16", "10.244.0.1/16", "fd00:10:244::1/56,10.244.0.0/16", " 10.244.0.0/16 ",
		"10.244.0.0", "010.244.0.0/16", "10.0.0.0/16,10.1.0.0/16", "10.0.0.0/16,fd00::/48,10.1.0.0/16", "10.0.0.0/16,"} {
		t.Run(v, func(t *testing.T) {
			mo := manager.NewOptions()
			mo.CloudProvider, mo.ClusterCIDR = "local", v
			_, err := mo.Complete(controllers.Default())
			managerRefuses := err != nil && strings.Contains(err.Error(), "--cluster-cidr")
			o := DefaultOptions()
			o.ClusterCIDR = v
			err = o.Validate()
			renderRefuses := err != nil && strings.Contains(err.Error(), "--cluster-cidr")
			if managerRefuses != renderRefuses {
				t.Errorf("the manager refuses it: %t; the rendering refuses it: %t (%v)", managerRefuses, renderRefuses, err)
			}
		})
	}
}
