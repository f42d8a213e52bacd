package manager

import (
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/manager/migration"
)

// testFiles are files the options under test may point at.
type testFiles struct {
	dir        string
	cloudConf  string
	kubeconfig string
	cert, key  string
	migration  string // a valid migration config
}

// writeFile writes data to name under dir and returns the path.
func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func newTestFiles(t *testing.T) testFiles {
	dir := t.TempDir()
	return testFiles{
		dir:        dir,
		cloudConf:  writeFile(t, dir, "cloud.conf", "[Global]\nzone = a\n"),
		kubeconfig: writeFile(t, dir, "kubeconfig", "apiVersion: v1\nkind: Config\n"),
		cert:       writeFile(t, dir, "tls.crt", "cert"),
		key:        writeFile(t, dir, "tls.key", "key"),
		migration: writeFile(t, dir, "migration.yaml", `apiVersion: controllermanager.config.k8s.io/v1
kind: LeaderMigrationConfiguration
leaderName: cloud-provider-extraction-migration
controllerLeaders:
- name: route-controller
  component: kube-controller-manager
- name: service-controller
  component: cloud-controller-manager
- name: cloud-node-lifecycle-controller
  component: "*"
- name: nodeipam
  component: kube-controller-manager
`),
	}
}

// validOptions returns defaults plus the one setting without a default.
func validOptions() *Options {
	o := NewOptions()
	o.CloudProvider = "fake"
	return o
}

func TestDefaultsAreValid(t *testing.T) {
	o := validOptions()
	cfg, err := o.Complete(testSpecs())
	if err != nil {
		t.Fatalf("Complete(defaults): %v", err)
	}
	all := []string{CloudNodeController, CloudNodeLifecycleController, ServiceLBController, NodeRouteController}
	if !reflect.DeepEqual(cfg.EnabledControllers(), all) {
		t.Errorf("EnabledControllers = %q, want %q", cfg.EnabledControllers(), all)
	}
	if !reflect.DeepEqual(cfg.ControllerPlan(), migration.Plan{Owned: all}) {
		t.Errorf("ControllerPlan = %+v, want all owned", cfg.ControllerPlan())
	}
	if cfg.LeaderMigration() != nil || cfg.CloudConfig() != nil {
		t.Errorf("LeaderMigration = %+v, CloudConfig = %q; want nil without the flags", cfg.LeaderMigration(), cfg.CloudConfig())
	}
	// The flags' defaults are the controllers' defaults: one definition for both.
	if got, want := cfg.Controllers(), DefaultControllerConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("controller settings from default flags = %+v, want DefaultControllerConfig() %+v", got, want)
	}
}

func TestRunRefusesAnIncompleteConfig(t *testing.T) {
	err := Run(t.Context(), CompletedConfig{}, cloud.NewRegistry())
	if err == nil || !strings.Contains(err.Error(), "Options.Complete") {
		t.Errorf("Run(zero CompletedConfig) = %v, want an error naming Options.Complete", err)
	}
}

func TestCompleteCopiesOptions(t *testing.T) {
	o := validOptions()
	cfg, err := o.Complete(testSpecs())
	if err != nil {
		t.Fatal(err)
	}
	o.ClusterName, o.Controllers[0] = "changed", "-route"
	if got := cfg.Options(); got.ClusterName != "kubernetes" || got.Controllers[0] != "*" {
		t.Errorf("changing Options after Complete changed the completed config: %+v", got)
	}
}

func TestCompleteErrors(t *testing.T) {
	f := newTestFiles(t)
	missing := filepath.Join(f.dir, "missing")
	badMigration := writeFile(t, f.dir, "bad-migration.yaml", "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\n")
	foreignMigration := writeFile(t, f.dir, "foreign.yaml", `apiVersion: controllermanager.config.k8s.io/v1
kind: LeaderMigrationConfiguration
leaderName: lm
controllerLeaders:
- name: nodeipam
  component: "*"
`)
	sameLeaseMigration := writeFile(t, f.dir, "same.yaml", `apiVersion: controllermanager.config.k8s.io/v1
kind: LeaderMigrationConfiguration
leaderName: cloud-controller-manager
controllerLeaders: []
`)
	known := "known controllers are cloud-node-controller, cloud-node-lifecycle-controller, service-lb-controller, node-route-controller"
	cloudsFile := writeFile(t, f.dir, "clouds.yaml", "apiVersion: nephele.dev/v1alpha1\nkind: CloudsConfiguration\nclouds:\n"+
		"- {name: a, provider: fake, cloudConfig: "+f.cloudConf+", loadBalancerClass: x.dev/a, default: true}\n")
	badClouds := writeFile(t, f.dir, "bad-clouds.yaml", "apiVersion: nephele.dev/v1alpha1\nkind: CloudsConfiguration\nclouds:\n"+
		"- {name: a, provider: fake, loadBalancerClass: x.dev/a, default: true}\n")
	multi := func(more func(o *Options)) func(o *Options) {
		return func(o *Options) {
			o.CloudProvider, o.CloudsConfigFile = "", cloudsFile
			more(o)
		}
	}

	tests := []struct {
		name string
		set  func(o *Options)
		want string // the one expected line, or its prefix when it ends in "..."
	}{
		// Cloud provider and cloud calls.
		{"cloud-provider empty", func(o *Options) { o.CloudProvider = "" },
			`invalid value for --cloud-provider: "": required: the name of the cloud provider (or --clouds-config for several)`},
		{"cloud-config missing", func(o *Options) { o.CloudConfigFile = missing },
			"invalid value for --cloud-config: open " + missing + ": no such file or directory"},
		{"cloud-config a directory", func(o *Options) { o.CloudConfigFile = f.dir },
			"invalid value for --cloud-config: reading " + f.dir + ": not a regular file (d---------)"},
		{"cloud-config a device", func(o *Options) { o.CloudConfigFile = "/dev/zero" },
			"invalid value for --cloud-config: reading /dev/zero: not a regular file (Dc---------)"},
		{"clouds-config beside cloud-provider", func(o *Options) { o.CloudsConfigFile = cloudsFile },
			"invalid value for --cloud-provider: not with --clouds-config, where each cloud names its own: remove --cloud-provider"},
		{"clouds-config beside cloud-config", multi(func(o *Options) { o.CloudConfigFile = f.cloudConf }),
			"invalid value for --cloud-config: not with --clouds-config, where each cloud names its own: remove --cloud-config"},
		{"clouds-config beside load-balancer-class", multi(func(o *Options) { o.LoadBalancerClass = "x.dev/b" }),
			"invalid value for --load-balancer-class: not with --clouds-config, where each cloud names its own: remove --load-balancer-class"},
		{"clouds-config beside cloud-provider-platforms", multi(func(o *Options) { o.CloudProviderPlatforms = []string{"b"} }),
			"invalid value for --cloud-provider-platforms: not with --clouds-config, where each cloud names its own: remove --cloud-provider-platforms"},
		{"clouds-config missing", multi(func(o *Options) { o.CloudsConfigFile = missing }),
			"invalid value for --clouds-config: open " + missing + ": no such file or directory"},
		{"clouds-config cloud without credentials", multi(func(o *Options) { o.CloudsConfigFile = badClouds }),
			"invalid value for --clouds-config: " + badClouds + ": clouds[0] (a).cloudConfig: required: the provider's configuration, with this cloud's own credentials"},
		{"cloud-call-timeout zero", func(o *Options) { o.CloudCallTimeout = 0 },
			`invalid value for --cloud-call-timeout: "0s": must be a positive duration`},
		{"cloud-max-retry-after zero", func(o *Options) { o.CloudMaxRetryAfter = 0 },
			`invalid value for --cloud-max-retry-after: "0s": must be a positive duration`},
		{"cloud-qps negative", func(o *Options) { o.CloudQPS = -1 },
			"invalid value for --cloud-qps: -1: must be 0 (no limit) or a positive number"},
		{"cloud-qps NaN", func(o *Options) { o.CloudQPS = math.NaN() },
			"invalid value for --cloud-qps: NaN: must be 0 (no limit) or a positive number"},
		{"cloud-burst zero with qps", func(o *Options) { o.CloudBurst = 0 },
			"invalid value for --cloud-burst: 0: must be at least 1 when --cloud-qps is above 0"},
		{"cloud-qps-min negative", func(o *Options) { o.CloudQPSMin = -1 },
			"invalid value for --cloud-qps-min: -1: must be 0 (the default) or a positive number no larger than --cloud-qps (20)"},
		{"cloud-qps-min above cloud-qps", func(o *Options) { o.CloudQPSMin = 30 },
			"invalid value for --cloud-qps-min: 30: must be 0 (the default) or a positive number no larger than --cloud-qps (20)"},
		{"cloud-qps-max below cloud-qps", func(o *Options) { o.CloudQPSMax = 10 },
			"invalid value for --cloud-qps-max: 10: must be 0 (the default) or a number no smaller than --cloud-qps (20)"},

		// Apiserver connection.
		{"kubeconfig missing", func(o *Options) { o.Kubeconfig = missing },
			"invalid value for --kubeconfig: open " + missing + ": no such file or directory"},
		{"master bad scheme", func(o *Options) { o.Master = "ftp://example.com" },
			`invalid value for --master: "ftp://example.com": must be an http or https URL, or host[:port]`},
		{"master no host", func(o *Options) { o.Master = "https://" },
			`invalid value for --master: "https://": must be an http or https URL, or host[:port]`},
		{"kube-api-qps zero", func(o *Options) { o.KubeAPIQPS = 0 },
			"invalid value for --kube-api-qps: 0: must be a positive number, or -1 for no client-side limit"},
		{"kube-api-burst zero", func(o *Options) { o.KubeAPIQPS, o.KubeAPIBurst = 20, 0 },
			"invalid value for --kube-api-burst: 0: must be at least 1"},
		{"kube-api-content-type", func(o *Options) { o.KubeAPIContentType = "application/yaml" },
			`invalid value for --kube-api-content-type: "application/yaml": must be application/vnd.kubernetes.protobuf or application/json`},
		{"min-resync-period", func(o *Options) { o.MinResyncPeriod = -time.Hour },
			`invalid value for --min-resync-period: "-1h0m0s": must be a positive duration`},

		// Controllers.
		{"controllers unknown", func(o *Options) { o.Controllers = []string{"*", "foo"} },
			`invalid value for --controllers: unknown controller "foo": ` + known},
		{"controllers conflict", func(o *Options) { o.Controllers = []string{"route", "-route-controller"} },
			`invalid value for --controllers: "-route-controller" contradicts "route": both name node-route-controller`},
		{"controllers minus star", func(o *Options) { o.Controllers = []string{"-*"} },
			`invalid value for --controllers: "-*" is not supported: to disable controllers list each as -name`},
		{"controllers none", func(o *Options) { o.Controllers = nil },
			`invalid value for --controllers: "" enables no controller: ` + known},
		{"controller-start-interval negative", func(o *Options) { o.ControllerStartInterval = -time.Second },
			`invalid value for --controller-start-interval: "-1s": must be 0 or a positive duration`},
		{"cluster-name empty", func(o *Options) { o.ClusterName = "" },
			`invalid value for --cluster-name: "": required`},
		{"cluster-cidr bad", func(o *Options) { o.ClusterCIDR = "10.0.0.0/33" },
			`invalid value for --cluster-cidr: "10.0.0.0/33": "10.0.0.0/33" is not a CIDR such as 10.244.0.0/16 or fd00:10:244::/56`},
		{"cluster-cidr an address", func(o *Options) { o.ClusterCIDR = "10.0.0.1" },
			`invalid value for --cluster-cidr: "10.0.0.1": "10.0.0.1" is not a CIDR...`},
		{"cluster-cidr two IPv4", func(o *Options) { o.ClusterCIDR = "10.0.0.0/16,10.1.0.0/16" },
			`invalid value for --cluster-cidr: "10.0.0.0/16,10.1.0.0/16": both CIDRs are IPv4: at most one IPv4 and one IPv6`},
		{"cluster-cidr two IPv6", func(o *Options) { o.ClusterCIDR = "fd00::/48,fd01::/48" },
			`invalid value for --cluster-cidr: "fd00::/48,fd01::/48": both CIDRs are IPv6: at most one IPv4 and one IPv6`},
		{"cluster-cidr three", func(o *Options) { o.ClusterCIDR = "10.0.0.0/16,fd00::/48,10.1.0.0/16" },
			`invalid value for --cluster-cidr: "10.0.0.0/16,fd00::/48,10.1.0.0/16": 3 CIDRs given: at most two, one IPv4 and one IPv6`},
		{"cluster-cidr empty element", func(o *Options) { o.ClusterCIDR = "10.0.0.0/16," },
			`invalid value for --cluster-cidr: "10.0.0.0/16,": "" is not a CIDR...`},
		{"node-monitor-period negative", func(o *Options) { o.NodeMonitorPeriod = -5 * time.Second },
			`invalid value for --node-monitor-period: "-5s": must be a positive duration`},
		{"node-status-update-frequency zero", func(o *Options) { o.NodeStatusUpdateFrequency = 0 },
			`invalid value for --node-status-update-frequency: "0s": must be a positive duration`},
		{"route-reconciliation-period zero", func(o *Options) { o.RouteReconciliationPeriod = 0 },
			`invalid value for --route-reconciliation-period: "0s": must be a positive duration`},
		{"concurrent-service-syncs", func(o *Options) { o.ConcurrentServiceSyncs = 0 },
			"invalid value for --concurrent-service-syncs: 0: must be at least 1"},
		{"concurrent-node-syncs", func(o *Options) { o.ConcurrentNodeSyncs = -2 },
			"invalid value for --concurrent-node-syncs: -2: must be at least 1"},
		{"concurrent-route-syncs", func(o *Options) { o.ConcurrentRouteSyncs = 0 },
			"invalid value for --concurrent-route-syncs: 0: must be at least 1"},
		{"node-deletion-grace-period", func(o *Options) { o.NodeDeletionGracePeriod = 0 },
			`invalid value for --node-deletion-grace-period: "0s": must be a positive duration`},
		{"safe-mode threshold zero", func(o *Options) { o.NodeDeletionSafeModeThreshold = 0 },
			"invalid value for --node-deletion-safe-mode-threshold: 0: must be above 0 and at most 1"},
		{"safe-mode threshold above one", func(o *Options) { o.NodeDeletionSafeModeThreshold = 1.5 },
			"invalid value for --node-deletion-safe-mode-threshold: 1.5: must be above 0 and at most 1"},
		{"safe-mode threshold NaN", func(o *Options) { o.NodeDeletionSafeModeThreshold = math.NaN() },
			"invalid value for --node-deletion-safe-mode-threshold: NaN: must be above 0 and at most 1"},
		{"node-batch-window", func(o *Options) { o.NodeBatchWindow = 0 },
			`invalid value for --node-batch-window: "0s": must be a positive duration`},
		{"load-balancer-class", func(o *Options) { o.LoadBalancerClass = "not a class" },
			`invalid value for --load-balancer-class: "not a class": must be a qualified name such as example.com/my-lb: ...`},
		{"cloud-provider-platforms", func(o *Options) { o.CloudProviderPlatforms = []string{"local", "AWS"} },
			`invalid value for --cloud-provider-platforms: platform "AWS": provider name "AWS": only lower-case letters, digits, '-', '.' and '+' are allowed: each is a provider-ID scheme, or * for every node`},
		{"cloud-config-reload-period", func(o *Options) { o.CloudConfigReloadPeriod = -time.Second },
			`invalid value for --cloud-config-reload-period: "-1s": must be 0 (never reload) or a positive duration`},
		{"undeclared-nodes", func(o *Options) { o.UndeclaredNodes = "delete" },
			`invalid value for --undeclared-nodes: "delete": must be adopt or ignore`},
		{"healthz-stall-timeout", func(o *Options) { o.HealthzStallTimeout = 0 },
			`invalid value for --healthz-stall-timeout: "0s": must be a positive duration`},

		// Leader election.
		{"lease duration zero", func(o *Options) { o.LeaderElectLeaseDuration = 0 },
			`invalid value for --leader-elect-lease-duration: "0s": must be a positive duration`},
		{"renew deadline not below lease", func(o *Options) { o.LeaderElectRenewDeadline = 15 * time.Second },
			`invalid value for --leader-elect-renew-deadline: "15s": must be less than --leader-elect-lease-duration (15s)`},
		{"retry period not below renew", func(o *Options) { o.LeaderElectRetryPeriod = 9 * time.Second },
			`invalid value for --leader-elect-retry-period: "9s": must be less than --leader-elect-renew-deadline (10s) divided by 1.2`},
		{"retry period negative", func(o *Options) { o.LeaderElectRetryPeriod = -time.Second },
			`invalid value for --leader-elect-retry-period: "-1s": must be a positive duration`},
		{"resource lock", func(o *Options) { o.LeaderElectResourceLock = "endpointsleases" },
			`invalid value for --leader-elect-resource-lock: "endpointsleases": must be "leases"`},
		{"resource name", func(o *Options) { o.LeaderElectResourceName = "Bad_Name" },
			`invalid value for --leader-elect-resource-name: "Bad_Name": not a valid Lease name: ...`},
		{"resource namespace", func(o *Options) { o.LeaderElectResourceNamespace = "" },
			`invalid value for --leader-elect-resource-namespace: "": not a valid namespace: ...`},

		// Leader migration.
		{"migration config without enable", func(o *Options) { o.LeaderMigrationConfigFile = f.migration },
			`invalid value for --leader-migration-config: "` + f.migration + `": requires --enable-leader-migration`},
		{"migration without leader election", func(o *Options) { o.EnableLeaderMigration, o.LeaderElect = true, false },
			"invalid value for --enable-leader-migration: true: requires --leader-elect=true, as leader migration coordinates leases"},
		{"migration config missing", func(o *Options) { o.EnableLeaderMigration, o.LeaderMigrationConfigFile = true, missing },
			"invalid value for --leader-migration-config: open " + missing + ": no such file or directory"},
		{"migration config invalid", func(o *Options) { o.EnableLeaderMigration, o.LeaderMigrationConfigFile = true, badMigration },
			"invalid value for --leader-migration-config: " + badMigration + ": leaderName: required: the name of the migration Lease"},
		{"migration config unknown controller for us", func(o *Options) { o.EnableLeaderMigration, o.LeaderMigrationConfigFile = true, foreignMigration },
			"invalid value for --leader-migration-config: " + foreignMigration +
				`: controllerLeaders[0].name: "nodeipam" is listed for component "*" but is not a controller of cloud-controller-manager; ` + known},
		{"migration lease is the main lease", func(o *Options) { o.EnableLeaderMigration, o.LeaderMigrationConfigFile = true, sameLeaseMigration },
			"invalid value for --leader-migration-config: " + sameLeaseMigration +
				`: leaderName "cloud-controller-manager" is the main lease's name (--leader-elect-resource-name): must differ`},
		{"default migration lease is the main lease", func(o *Options) {
			o.EnableLeaderMigration, o.LeaderElectResourceName = true, migration.DefaultLeaderName
		}, `invalid value for --leader-elect-resource-name: "cloud-provider-extraction-migration": is the leader migration lease's name in the default configuration: must differ`},

		// Serving.
		{"secure-port too big", func(o *Options) { o.SecurePort = 70000 },
			"invalid value for --secure-port: 70000: must be 0 (disabled) or between 1 and 65535"},
		{"secure-port negative", func(o *Options) { o.SecurePort = -1 },
			"invalid value for --secure-port: -1: must be 0 (disabled) or between 1 and 65535"},
		{"bind-address", func(o *Options) { o.BindAddress = "localhost" },
			`invalid value for --bind-address: "localhost": must be an IP address`},
		{"cert without key", func(o *Options) { o.TLSCertFile = f.cert },
			`invalid value for --tls-cert-file: "` + f.cert + `": requires --tls-private-key-file as well`},
		{"key without cert", func(o *Options) { o.TLSPrivateKeyFile = f.key },
			`invalid value for --tls-private-key-file: "` + f.key + `": requires --tls-cert-file as well`},
		{"cert missing", func(o *Options) { o.TLSCertFile, o.TLSPrivateKeyFile = missing, f.key },
			"invalid value for --tls-cert-file: open " + missing + ": no such file or directory"},
		{"authentication-kubeconfig missing", func(o *Options) { o.AuthenticationKubeconfig = missing },
			"invalid value for --authentication-kubeconfig: open " + missing + ": no such file or directory"},
		{"authorization-kubeconfig missing", func(o *Options) { o.AuthorizationKubeconfig = missing },
			"invalid value for --authorization-kubeconfig: open " + missing + ": no such file or directory"},
		{"always-allow relative path", func(o *Options) { o.AuthorizationAlwaysAllowPaths = []string{"healthz"} },
			`invalid value for --authorization-always-allow-paths: "healthz": paths must start with "/"`},
		{"always-allow path with inner star", func(o *Options) { o.AuthorizationAlwaysAllowPaths = []string{"/healthz", "/de*bug"} },
			`invalid value for --authorization-always-allow-paths: "/de*bug": only a trailing * is allowed`},

		// Logging.
		{"logging-format", func(o *Options) { o.LoggingFormat = "yaml" },
			`invalid value for --logging-format: "yaml": must be "text" or "json"`},
		{"verbosity", func(o *Options) { o.Verbosity = -1 },
			"invalid value for --v: -1: must be 0 or more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validOptions()
			tt.set(o)
			cfg, err := o.Complete(testSpecs())
			if err == nil {
				t.Fatalf("Complete succeeded, want %q", tt.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != 1 {
				t.Fatalf("Complete gave %d lines, want 1:\n%s", len(lines), err)
			}
			if prefix, ok := strings.CutSuffix(tt.want, "..."); ok {
				if !strings.HasPrefix(lines[0], prefix) {
					t.Errorf("Complete =\n  %s\nwant a line starting\n  %s", lines[0], prefix)
				}
			} else if lines[0] != tt.want {
				t.Errorf("Complete =\n  %s\nwant\n  %s", lines[0], tt.want)
			}
			if cfg.completedConfig != nil {
				t.Errorf("a configuration was returned despite the error: %+v", cfg.completedConfig)
			}
		})
	}
}

func TestCompleteOneLinePerFlag(t *testing.T) {
	o := validOptions()
	o.CloudProvider = ""
	o.NodeMonitorPeriod = -time.Second
	o.SecurePort = 70000
	// Two problems with one flag: only the first is reported.
	o.LeaderElectRenewDeadline = -time.Second
	_, err := o.Complete(testSpecs())
	if err == nil {
		t.Fatal("Complete succeeded")
	}
	want := []string{
		`invalid value for --cloud-provider: "": required: the name of the cloud provider (or --clouds-config for several)`,
		`invalid value for --node-monitor-period: "-1s": must be a positive duration`,
		`invalid value for --leader-elect-renew-deadline: "-1s": must be a positive duration`,
		"invalid value for --secure-port: 70000: must be 0 (disabled) or between 1 and 65535",
	}
	if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("Complete =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCompleteBadSpecs(t *testing.T) {
	o := validOptions()
	_, err := o.Complete(testSpecs(ControllerSpec{Name: "x", Aliases: []string{"route"}}))
	if err == nil || !strings.Contains(err.Error(), `controller registration: controller "x": name or alias "route" is already used`) {
		t.Errorf("Complete = %v, want a controller registration error", err)
	}
}

func TestCompleteResults(t *testing.T) {
	f := newTestFiles(t)
	specs := testSpecs(optIn)

	t.Run("files and selection", func(t *testing.T) {
		o := validOptions()
		o.CloudConfigFile = f.cloudConf
		o.Kubeconfig = f.kubeconfig
		o.TLSCertFile, o.TLSPrivateKeyFile = f.cert, f.key
		o.Controllers = []string{"*", "-service", "opt-in"}
		cfg, err := o.Complete(specs)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if string(cfg.CloudConfig()) != "[Global]\nzone = a\n" {
			t.Errorf("CloudConfig = %q", cfg.CloudConfig())
		}
		want := []string{CloudNodeController, CloudNodeLifecycleController, NodeRouteController, "opt-in-controller"}
		if !reflect.DeepEqual(cfg.EnabledControllers(), want) {
			t.Errorf("EnabledControllers = %q, want %q", cfg.EnabledControllers(), want)
		}
	})

	t.Run("clouds", func(t *testing.T) {
		o := validOptions()
		o.CloudProvider = ""
		o.CloudsConfigFile = writeFile(t, f.dir, "clouds.yaml", "apiVersion: nephele.dev/v1alpha1\nkind: CloudsConfiguration\nclouds:\n"+
			"- {name: a, provider: fake, cloudConfig: "+f.cloudConf+", loadBalancerClass: x.dev/a, default: true}\n")
		cfg, err := o.Complete(specs)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if !cfg.MultiCloud() || len(cfg.clouds) != 1 || cfg.clouds[0].Name != "a" || string(cfg.clouds[0].Config) != "[Global]\nzone = a\n" || cfg.CloudConfig() != nil {
			t.Errorf("MultiCloud %t, clouds %+v, CloudConfig %q", cfg.MultiCloud(), cfg.clouds, cfg.CloudConfig())
		}
	})

	t.Run("no client-side apiserver limit ignores the burst", func(t *testing.T) {
		o := validOptions()
		o.KubeAPIQPS, o.KubeAPIBurst = -1, 0
		if _, err := o.Complete(specs); err != nil {
			t.Fatalf("Complete: %v", err)
		}
	})

	t.Run("default migration config", func(t *testing.T) {
		o := validOptions()
		o.EnableLeaderMigration = true
		cfg, err := o.Complete(specs)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if !reflect.DeepEqual(cfg.LeaderMigration(), migration.Default()) {
			t.Errorf("LeaderMigration = %+v, want upstream's default", cfg.LeaderMigration())
		}
		want := migration.Plan{
			Owned:    []string{CloudNodeController},
			Migrated: []string{CloudNodeLifecycleController, ServiceLBController, NodeRouteController},
		}
		if !reflect.DeepEqual(cfg.ControllerPlan(), want) {
			t.Errorf("ControllerPlan = %+v, want %+v", cfg.ControllerPlan(), want)
		}
	})

	t.Run("migration config file", func(t *testing.T) {
		o := validOptions()
		o.EnableLeaderMigration, o.LeaderMigrationConfigFile = true, f.migration
		cfg, err := o.Complete(specs)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if cfg.LeaderMigration() == nil || cfg.LeaderMigration().LeaderName != "cloud-provider-extraction-migration" {
			t.Fatalf("LeaderMigration = %+v", cfg.LeaderMigration())
		}
		want := migration.Plan{
			Owned:    []string{CloudNodeController},
			Migrated: []string{CloudNodeLifecycleController, ServiceLBController},
			Unowned:  []string{NodeRouteController},
		}
		if !reflect.DeepEqual(cfg.ControllerPlan(), want) {
			t.Errorf("ControllerPlan = %+v, want %+v", cfg.ControllerPlan(), want)
		}
	})

	t.Run("a later failure leaves an earlier result alone", func(t *testing.T) {
		o := validOptions()
		o.CloudConfigFile = f.cloudConf
		cfg, err := o.Complete(specs)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		o.SecurePort = -1
		if bad, err := o.Complete(specs); err == nil || bad.completedConfig != nil {
			t.Fatalf("Complete with a bad port = %+v, %v; want no configuration and an error", bad, err)
		}
		if cfg.CloudConfig() == nil || cfg.Options().SecurePort == -1 {
			t.Errorf("the earlier configuration changed after a failed Complete: %q port %d", cfg.CloudConfig(), cfg.Options().SecurePort)
		}
	})
}

func TestAddFlagsParse(t *testing.T) {
	f := newTestFiles(t)
	o := NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	args := []string{
		"--cloud-provider=local",
		"--cloud-config=" + f.cloudConf,
		"--kubeconfig", f.kubeconfig,
		"--controllers=*,-route",
		"--cluster-cidr=10.244.1.7/16, fd00:10:244::/56",
		"--configure-cloud-routes=false",
		"--allocate-node-cidrs",
		"--node-monitor-period=7s",
		"--concurrent-service-syncs=3",
		"--node-deletion-safe-mode-threshold=0.5",
		"--load-balancer-class=example.com/lb",
		"--cloud-provider-platforms=hcloud,hrobot",
		"--undeclared-nodes=ignore",
		"--leader-elect-resource-name=my-ccm",
		"--secure-port=0",
		"--authorization-always-allow-paths=/healthz,/metrics*",
		"--logging-format=json",
		"-v=4",
	}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("Parse: %v", err)
	}
	cfg, err := o.Complete(testSpecs())
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if o.CloudProvider != "local" || o.Kubeconfig != f.kubeconfig || o.Verbosity != 4 || o.LoggingFormat != "json" ||
		o.SecurePort != 0 || !o.AllocateNodeCIDRs || o.LeaderElectResourceName != "my-ccm" {
		t.Errorf("parsed options = %+v", o)
	}
	if !reflect.DeepEqual(o.AuthorizationAlwaysAllowPaths, []string{"/healthz", "/metrics*"}) {
		t.Errorf("AuthorizationAlwaysAllowPaths = %q", o.AuthorizationAlwaysAllowPaths)
	}
	wantEnabled := []string{CloudNodeController, CloudNodeLifecycleController, ServiceLBController}
	if !reflect.DeepEqual(cfg.EnabledControllers(), wantEnabled) {
		t.Errorf("EnabledControllers = %q, want %q", cfg.EnabledControllers(), wantEnabled)
	}

	cc := cfg.Controllers()
	want := ControllerConfig{
		ClusterName:                   "kubernetes",
		ClusterCIDRs:                  []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/56")},
		ConfigureCloudRoutes:          false,
		NodeMonitorPeriod:             7 * time.Second,
		NodeStatusUpdateFrequency:     5 * time.Minute,
		ConcurrentNodeSyncs:           10,
		ConcurrentServiceSyncs:        3,
		ConcurrentRouteSyncs:          10,
		RouteReconciliationPeriod:     5 * time.Minute,
		NodeDeletionGracePeriod:       40 * time.Second,
		NodeDeletionSafeModeThreshold: 0.5,
		LoadBalancerClass:             "example.com/lb",
		NodeBatchWindow:               time.Second,
		Ownership:                     cloud.NodeOwnership{Platforms: []string{"hcloud", "hrobot"}, Undeclared: cloud.UndeclaredIgnore},
	}
	if !reflect.DeepEqual(cc, want) {
		t.Errorf("ControllerConfig =\n%+v\nwant\n%+v", cc, want)
	}

	// --v works as well as -v.
	fs2 := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o2 := NewOptions()
	o2.AddFlags(fs2)
	if err := fs2.Parse([]string{"--v", "2"}); err != nil || o2.Verbosity != 2 {
		t.Errorf("--v 2: err %v, verbosity %d", err, o2.Verbosity)
	}
}

func TestFlagDefaults(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	NewOptions().AddFlags(fs)
	// Defaults as the help shows them: upstream's unless marked nephele's.
	want := map[string]string{
		"controllers":                       "[*]",
		"cluster-name":                      "kubernetes",
		"configure-cloud-routes":            "true",
		"allocate-node-cidrs":               "false",
		"node-monitor-period":               "5s",
		"node-status-update-frequency":      "5m0s",
		"route-reconciliation-period":       "5m0s", // nephele
		"concurrent-service-syncs":          "20",   // nephele
		"concurrent-node-syncs":             "10",   // nephele
		"concurrent-route-syncs":            "10",
		"node-deletion-grace-period":        "40s",
		"node-deletion-safe-mode-threshold": "0.1",
		"node-batch-window":                 "1s",
		"cloud-call-timeout":                "30s",
		"cloud-qps":                         "20",
		"cloud-qps-min":                     "0",
		"cloud-qps-max":                     "0",
		"cloud-burst":                       "40",
		"kube-api-qps":                      "-1",
		"kube-api-burst":                    "30",
		"kube-api-content-type":             "application/vnd.kubernetes.protobuf",
		"leader-elect":                      "true",
		"leader-elect-lease-duration":       "15s",
		"leader-elect-renew-deadline":       "10s",
		"leader-elect-retry-period":         "2s",
		"leader-elect-resource-lock":        "leases",
		"leader-elect-resource-name":        "cloud-controller-manager",
		"leader-elect-resource-namespace":   "kube-system",
		"enable-leader-migration":           "false",
		"secure-port":                       "10258",
		"bind-address":                      "0.0.0.0",
		"authorization-always-allow-paths":  "[/healthz,/readyz,/livez]",
		"profiling":                         "true",
		"logging-format":                    "text",
		"v":                                 "0",
		"use-service-account-credentials":   "false",
		"controller-start-interval":         "0s",
		"min-resync-period":                 "12h0m0s",
		"healthz-stall-timeout":             "2m0s",
	}
	for name, def := range want {
		fl := fs.Lookup(name)
		if fl == nil {
			t.Errorf("flag --%s not registered", name)
			continue
		}
		if fl.DefValue != def {
			t.Errorf("--%s default = %q, want %q", name, fl.DefValue, def)
		}
	}
	for _, name := range []string{"cloud-provider", "cloud-config", "kubeconfig", "master", "load-balancer-class",
		"leader-migration-config", "tls-cert-file", "tls-private-key-file", "authentication-kubeconfig",
		"authorization-kubeconfig", "authentication-skip-lookup"} {
		if fs.Lookup(name) == nil {
			t.Errorf("flag --%s not registered", name)
		}
	}
	// Flags nephele adds or whose defaults it changes say so.
	for _, name := range []string{"route-reconciliation-period", "concurrent-service-syncs", "concurrent-route-syncs",
		"node-deletion-grace-period", "node-deletion-safe-mode-threshold", "node-batch-window", "load-balancer-class",
		"cloud-call-timeout", "cloud-qps", "cloud-qps-min", "cloud-qps-max", "cloud-burst", "healthz-stall-timeout", "allocate-node-cidrs", "kube-api-qps",
		"concurrent-node-syncs", "cloud-provider-platforms", "undeclared-nodes", "cloud-config-reload-period"} {
		if u := fs.Lookup(name).Usage; !strings.Contains(u, "(nephele: ") {
			t.Errorf("--%s help does not mark the nephele change: %q", name, u)
		}
	}
}

// TestCloudQPSBounds checks that a --cloud-qps outside the default bounds, valid before
// the budget adapted, widens them instead of failing, and that given bounds are kept.
func TestCloudQPSBounds(t *testing.T) {
	tests := []struct {
		name           string
		qps, min, max  float64
		wantLo, wantHi float64
	}{
		{"defaults", 20, 0, 0, DefaultCloudQPSMin, DefaultCloudQPSMax},
		{"qps above the default ceiling", 200, 0, 0, DefaultCloudQPSMin, 200},
		{"qps below the default floor", 0.5, 0, 0, 0.5, DefaultCloudQPSMax},
		{"given bounds", 20, 5, 40, 5, 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOptions()
			o.CloudQPS, o.CloudQPSMin, o.CloudQPSMax = tt.qps, tt.min, tt.max
			if lo, hi := o.CloudQPSBounds(); lo != tt.wantLo || hi != tt.wantHi {
				t.Errorf("CloudQPSBounds() = %v, %v; want %v, %v", lo, hi, tt.wantLo, tt.wantHi)
			}
		})
	}
}
