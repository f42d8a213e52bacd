package manager

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/smallfile"
	"github.com/nephele-dev/nephele/manager/clouds"
	"github.com/nephele-dev/nephele/manager/migration"
	"github.com/nephele-dev/nephele/manager/serving"
)

// leaderMigrationComponent is the component name a LeaderMigrationConfiguration uses
// for a cloud-controller-manager; upstream's CCM uses the same.
const leaderMigrationComponent = "cloud-controller-manager"

// Content types the apiserver client may use.
const (
	contentTypeProtobuf = "application/vnd.kubernetes.protobuf"
	contentTypeJSON     = "application/json"
)

// Options holds every command-line setting of a cloud-controller-manager. Flag names,
// meanings and defaults are upstream's; settings nephele adds or whose defaults it
// changes say so in their help text.
//
// Complete checks the settings, reads the files they name and returns the resolved
// configuration, the only value Run accepts; the manager never reads the files again.
type Options struct {
	// CloudProvider is --cloud-provider, the provider's registered name.
	CloudProvider string
	// CloudConfigFile is --cloud-config, the provider's configuration file.
	CloudConfigFile string
	// CloudsConfigFile is --clouds-config: several clouds served at once, each with its
	// own provider, cloud config and load balancer class (package clouds). It replaces
	// --cloud-provider, --cloud-config, --load-balancer-class and
	// --cloud-provider-platforms.
	CloudsConfigFile string
	// CloudConfigReloadPeriod is --cloud-config-reload-period: how often --cloud-config
	// (and the files it names) is checked for a change to apply; 0 never reloads.
	CloudConfigReloadPeriod time.Duration

	// Kubeconfig is --kubeconfig; empty means in-cluster configuration.
	Kubeconfig string
	// Master is --master, overriding the kubeconfig's server.
	Master string
	// KubeAPIQPS is --kube-api-qps: the client-side limit on requests per second of each
	// apiserver client. A negative value means no client-side limit.
	KubeAPIQPS float32
	// KubeAPIBurst is --kube-api-burst.
	KubeAPIBurst int
	// KubeAPIContentType is --kube-api-content-type.
	KubeAPIContentType string
	// UseServiceAccountCredentials is --use-service-account-credentials: each
	// controller talks to the apiserver with its own service account's token.
	UseServiceAccountCredentials bool
	// MinResyncPeriod is --min-resync-period.
	MinResyncPeriod time.Duration

	// Controllers is --controllers, resolved by SelectControllers.
	Controllers []string
	// ControllerStartInterval is --controller-start-interval.
	ControllerStartInterval time.Duration
	// ClusterName is --cluster-name.
	ClusterName string
	// ClusterCIDR is --cluster-cidr as given: up to one IPv4 and one IPv6 CIDR,
	// comma-separated.
	ClusterCIDR string
	// AllocateNodeCIDRs is --allocate-node-cidrs, accepted for compatibility only.
	AllocateNodeCIDRs bool
	// ConfigureCloudRoutes is --configure-cloud-routes.
	ConfigureCloudRoutes bool
	// NodeMonitorPeriod is --node-monitor-period.
	NodeMonitorPeriod time.Duration
	// NodeStatusUpdateFrequency is --node-status-update-frequency.
	NodeStatusUpdateFrequency time.Duration
	// RouteReconciliationPeriod is --route-reconciliation-period.
	RouteReconciliationPeriod time.Duration
	// ConcurrentServiceSyncs is --concurrent-service-syncs.
	ConcurrentServiceSyncs int
	// ConcurrentNodeSyncs is --concurrent-node-syncs.
	ConcurrentNodeSyncs int
	// ConcurrentRouteSyncs is --concurrent-route-syncs.
	ConcurrentRouteSyncs int
	// NodeDeletionGracePeriod is --node-deletion-grace-period.
	NodeDeletionGracePeriod time.Duration
	// NodeDeletionSafeModeThreshold is --node-deletion-safe-mode-threshold.
	NodeDeletionSafeModeThreshold float64
	// NodeBatchWindow is --node-batch-window.
	NodeBatchWindow time.Duration
	// LoadBalancerClass is --load-balancer-class.
	LoadBalancerClass string
	// CloudProviderPlatforms is --cloud-provider-platforms: the provider-ID schemes of
	// the nodes this manager owns (KEP-5778); empty means every node, or with
	// --undeclared-nodes=ignore the provider's own (cloud.Platforms); "*" every node.
	CloudProviderPlatforms []string
	// UndeclaredNodes is --undeclared-nodes: what the manager does with a node that has
	// neither a provider ID nor a platform label.
	UndeclaredNodes string
	// HealthzStallTimeout is --healthz-stall-timeout, the stall limit of each
	// controller's Progress.
	HealthzStallTimeout time.Duration

	// CloudCallTimeout is --cloud-call-timeout.
	CloudCallTimeout time.Duration
	// CloudQPS is --cloud-qps, the rate the adaptive cloud budget starts at; 0 means
	// no client-side limit.
	CloudQPS float64
	// CloudQPSMin is --cloud-qps-min, the floor of the adaptive cloud budget; 0 means
	// DefaultCloudQPSMin, or CloudQPS when that is lower.
	CloudQPSMin float64
	// CloudQPSMax is --cloud-qps-max, the ceiling of the adaptive cloud budget; 0 means
	// DefaultCloudQPSMax, or CloudQPS when that is higher.
	CloudQPSMax float64
	// CloudBurst is --cloud-burst, used when CloudQPS > 0.
	CloudBurst int
	// CloudMaxRetryAfter is --cloud-max-retry-after, the longest Retry-After honoured.
	CloudMaxRetryAfter time.Duration

	// LeaderElect is --leader-elect.
	LeaderElect bool
	// LeaderElectLeaseDuration is --leader-elect-lease-duration.
	LeaderElectLeaseDuration time.Duration
	// LeaderElectRenewDeadline is --leader-elect-renew-deadline.
	LeaderElectRenewDeadline time.Duration
	// LeaderElectRetryPeriod is --leader-elect-retry-period.
	LeaderElectRetryPeriod time.Duration
	// LeaderElectResourceLock is --leader-elect-resource-lock; only "leases".
	LeaderElectResourceLock string
	// LeaderElectResourceName is --leader-elect-resource-name, the main Lease's name.
	LeaderElectResourceName string
	// LeaderElectResourceNamespace is --leader-elect-resource-namespace, the namespace
	// of the main and the migration Lease.
	LeaderElectResourceNamespace string
	// EnableLeaderMigration is --enable-leader-migration.
	EnableLeaderMigration bool
	// LeaderMigrationConfigFile is --leader-migration-config; empty means upstream's
	// default configuration.
	LeaderMigrationConfigFile string

	// SecurePort is --secure-port; 0 disables serving.
	SecurePort int
	// BindAddress is --bind-address.
	BindAddress string
	// TLSCertFile is --tls-cert-file.
	TLSCertFile string
	// TLSPrivateKeyFile is --tls-private-key-file.
	TLSPrivateKeyFile string
	// AuthenticationKubeconfig is --authentication-kubeconfig; empty means Kubeconfig.
	AuthenticationKubeconfig string
	// AuthorizationKubeconfig is --authorization-kubeconfig; empty means Kubeconfig.
	AuthorizationKubeconfig string
	// AuthorizationAlwaysAllowPaths is --authorization-always-allow-paths.
	AuthorizationAlwaysAllowPaths []string
	// AuthenticationSkipLookup is --authentication-skip-lookup: do not complete the
	// client CA and request-header settings from the cluster's
	// extension-apiserver-authentication ConfigMap.
	AuthenticationSkipLookup bool
	// Profiling is --profiling: serve pprof.
	Profiling bool

	// LoggingFormat is --logging-format: "text" or "json".
	LoggingFormat string
	// Verbosity is -v/--v.
	Verbosity int

	// The flags below complete upstream's set (options_upstream.go): each is accepted
	// with upstream's meaning, or refused at start saying why nephele has no such thing.

	// FeatureGates is --feature-gates: upstream's cloud-controller-manager gates and
	// nephele's own (package features). NewOptions makes one per Options.
	FeatureGates featuregate.MutableVersionedFeatureGate
	// ConcurrentNodeStatusUpdates is --concurrent-node-status-updates: the nodes whose
	// addresses the cloud-node-controller refreshes at once; 0 means ConcurrentNodeSyncs.
	ConcurrentNodeStatusUpdates int
	// ContentionProfiling is --contention-profiling: with --profiling, record blocking
	// events for /debug/pprof/block and mutex contention for /debug/pprof/mutex.
	ContentionProfiling bool
	// ExternalCloudVolumePlugin is --external-cloud-volume-plugin, accepted as upstream's
	// CCM accepts it: only kube-controller-manager's volume plugins read it.
	ExternalCloudVolumePlugin string

	// TLSMinVersion is --tls-min-version (VersionTLS12, VersionTLS13, ...); empty is Go's.
	TLSMinVersion string
	// TLSCipherSuites is --tls-cipher-suites, by IANA name; empty is Go's defaults.
	TLSCipherSuites []string
	// TLSCurvePreferences is --tls-curve-preferences: crypto/tls CurveIDs.
	TLSCurvePreferences []int32
	// SNICertKeys is --tls-sni-cert-key: certificates served by SNI name.
	SNICertKeys []cliflag.NamedCertKey
	// CertDir is --cert-dir: where the self-signed certificate is kept when no
	// --tls-cert-file is given; empty keeps it in memory.
	CertDir string
	// HTTP2MaxStreamsPerConnection is --http2-max-streams-per-connection; 0 is Go's.
	HTTP2MaxStreamsPerConnection int
	// DisableHTTP2Serving is --disable-http2-serving.
	DisableHTTP2Serving bool
	// PermitPortSharing and PermitAddressSharing are --permit-port-sharing
	// (SO_REUSEPORT) and --permit-address-sharing (SO_REUSEADDR).
	PermitPortSharing, PermitAddressSharing bool

	// ClientCAFile is --client-ca-file: client certificates signed by it authenticate
	// as their common name (user) and organizations (groups).
	ClientCAFile string
	// RequestHeader holds the --requestheader-* flags.
	RequestHeader RequestHeaderOptions
	// AuthenticationTokenCacheTTL is --authentication-token-webhook-cache-ttl.
	AuthenticationTokenCacheTTL time.Duration
	// AuthenticationTolerateLookupFailure is --authentication-tolerate-lookup-failure:
	// a lookup that fails is logged and the flags alone are used.
	AuthenticationTolerateLookupFailure bool
	// AuthorizationAllowCacheTTL and AuthorizationDenyCacheTTL are
	// --authorization-webhook-cache-authorized-ttl and -unauthorized-ttl.
	AuthorizationAllowCacheTTL, AuthorizationDenyCacheTTL time.Duration

	// VModule is --vmodule: pattern=N settings of per-file verbosity.
	VModule string
	// LogFlushFrequency is --log-flush-frequency.
	LogFlushFrequency time.Duration
	// LogTextSplitStream and LogJSONSplitStream are --log-text-split-stream and
	// --log-json-split-stream: errors to stderr, the rest to stdout.
	LogTextSplitStream, LogJSONSplitStream bool
	// LogTextInfoBufferSize and LogJSONInfoBufferSize are the --log-*-info-buffer-size
	// flags; nephele accepts only 0.
	LogTextInfoBufferSize, LogJSONInfoBufferSize resource.QuantityValue

	// Webhooks holds upstream's cloud provider webhook flags (KEP-2699).
	Webhooks WebhookOptions

	// Version is --version: "false", "true" or "raw" (print and exit), or a version
	// reported instead of the binary's.
	Version string

	// featureGatesErr is why FeatureGates could not be built, for Complete to report.
	featureGatesErr error
}

// NewOptions returns Options holding the defaults. The controllers' defaults come
// from DefaultControllerConfig, the one place they are defined.
func NewOptions() *Options {
	d := DefaultControllerConfig()
	gates, gatesErr := newFeatureGates()
	o := &Options{
		KubeAPIQPS:                    -1,
		KubeAPIBurst:                  30,
		KubeAPIContentType:            contentTypeProtobuf,
		MinResyncPeriod:               12 * time.Hour,
		Controllers:                   []string{"*"},
		ClusterName:                   d.ClusterName,
		ConfigureCloudRoutes:          d.ConfigureCloudRoutes,
		NodeMonitorPeriod:             d.NodeMonitorPeriod,
		NodeStatusUpdateFrequency:     d.NodeStatusUpdateFrequency,
		RouteReconciliationPeriod:     d.RouteReconciliationPeriod,
		ConcurrentServiceSyncs:        d.ConcurrentServiceSyncs,
		ConcurrentNodeSyncs:           d.ConcurrentNodeSyncs,
		ConcurrentRouteSyncs:          d.ConcurrentRouteSyncs,
		NodeDeletionGracePeriod:       d.NodeDeletionGracePeriod,
		NodeDeletionSafeModeThreshold: d.NodeDeletionSafeModeThreshold,
		NodeBatchWindow:               d.NodeBatchWindow,
		UndeclaredNodes:               string(d.Ownership.Undeclared),
		HealthzStallTimeout:           2 * time.Minute,
		CloudConfigReloadPeriod:       10 * time.Second,
		CloudCallTimeout:              30 * time.Second,
		CloudQPS:                      DefaultCloudQPS,
		CloudBurst:                    40,
		CloudMaxRetryAfter:            DefaultCloudMaxRetryAfter,
		LeaderElect:                   true,
		LeaderElectLeaseDuration:      15 * time.Second,
		LeaderElectRenewDeadline:      10 * time.Second,
		LeaderElectRetryPeriod:        2 * time.Second,
		LeaderElectResourceLock:       "leases",
		LeaderElectResourceName:       "cloud-controller-manager",
		LeaderElectResourceNamespace:  "kube-system",
		SecurePort:                    10258,
		BindAddress:                   "0.0.0.0",
		AuthorizationAlwaysAllowPaths: []string{"/healthz", "/readyz", "/livez"},
		Profiling:                     true,
		LoggingFormat:                 "text",

		AuthenticationTokenCacheTTL:         serving.DefaultTokenCacheTTL,
		AuthenticationTolerateLookupFailure: true,
		AuthorizationAllowCacheTTL:          serving.DefaultAllowedCacheTTL,
		AuthorizationDenyCacheTTL:           serving.DefaultDeniedCacheTTL,
		LogFlushFrequency:                   5 * time.Second,
		RequestHeader: RequestHeaderOptions{
			UsernameHeaders:     []string{"x-remote-user"},
			GroupHeaders:        []string{"x-remote-group"},
			ExtraHeaderPrefixes: []string{"x-remote-extra-"},
		},
		Webhooks: WebhookOptions{BindAddress: "0.0.0.0", SecurePort: 10260},
		Version:  "false",
	}
	o.FeatureGates, o.featureGatesErr = gates, gatesErr
	return o
}

// AddFlags registers every option on fs, with the current values as defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	// Cloud provider.
	fs.StringVar(&o.CloudProvider, "cloud-provider", o.CloudProvider,
		"The provider for cloud services. Required.")
	fs.StringVar(&o.CloudConfigFile, "cloud-config", o.CloudConfigFile,
		"The path to the cloud provider configuration file. Empty string for no configuration file.")
	fs.StringVar(&o.CloudsConfigFile, "clouds-config", o.CloudsConfigFile,
		"A file naming several clouds to serve at once, each with its own provider, cloud config, provider-ID schemes "+
			"and load balancer class, in place of --cloud-provider, --cloud-config, --load-balancer-class and "+
			"--cloud-provider-platforms. (nephele: not an upstream flag; docs/hybrid.md.)")
	fs.DurationVar(&o.CloudConfigReloadPeriod, "cloud-config-reload-period", o.CloudConfigReloadPeriod,
		"How often --cloud-config, and the files it names (a token file, say), are checked for a change; a change "+
			"rebuilds the provider without a restart, and one that does not load keeps the running provider. 0 never "+
			"reloads. (nephele: not an upstream flag; docs/manager.md.)")
	fs.DurationVar(&o.CloudCallTimeout, "cloud-call-timeout", o.CloudCallTimeout,
		"The longest one call to the cloud may take before it is abandoned and retried. (nephele: not an upstream flag.)")
	fs.Float64Var(&o.CloudQPS, "cloud-qps", o.CloudQPS,
		"The rate, in calls per second, at which the client-side cloud budget shared by all controllers starts; "+
			"it then adapts between --cloud-qps-min and --cloud-qps-max: up while the cloud answers, down on throttled answers. "+
			"0 means no client-side limit. Throttling answers from the cloud (Retry-After) are honoured either way. "+
			"It used to be a fixed rate: for one, set --cloud-qps-min and --cloud-qps-max to the same value. (nephele: not an upstream flag.)")
	fs.Float64Var(&o.CloudQPSMin, "cloud-qps-min", o.CloudQPSMin,
		"The floor of the adaptive cloud budget, in calls per second: however often the cloud throttles, "+
			"calls go at least this fast (Retry-After still holds them). 0 means "+formatFloat(DefaultCloudQPSMin)+", or --cloud-qps when that is lower. (nephele: not an upstream flag.)")
	fs.Float64Var(&o.CloudQPSMax, "cloud-qps-max", o.CloudQPSMax,
		"The ceiling of the adaptive cloud budget, in calls per second: the share of the account's quota this manager may take "+
			"at most, for operators who must leave the rest to others. 0 means "+formatFloat(DefaultCloudQPSMax)+", or --cloud-qps when that is higher. (nephele: not an upstream flag.)")
	fs.IntVar(&o.CloudBurst, "cloud-burst", o.CloudBurst,
		"Calls to the cloud allowed at once; while the budget adapts, at most one second of its current rate. "+
			"Used only when --cloud-qps is above 0. (nephele: not an upstream flag.)")
	fs.DurationVar(&o.CloudMaxRetryAfter, "cloud-max-retry-after", o.CloudMaxRetryAfter,
		"The longest Retry-After from the cloud that is honoured: a throttled answer holds every controller's cloud calls "+
			"and retries for what the cloud asks, at most this long, so one absurd answer cannot stop the controllers for "+
			"hours. (nephele: not an upstream flag.)")

	// Apiserver connection.
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig,
		"Path to kubeconfig file with authorization and master location information (the master location can be overridden by the master flag). "+
			"Empty means the in-cluster configuration.")
	fs.StringVar(&o.Master, "master", o.Master,
		"The address of the Kubernetes API server (overrides any value in kubeconfig).")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS,
		"QPS to use while talking with kubernetes apiserver; -1 means no client-side limit. "+
			"(nephele: default -1, upstream 20. The apiserver's API Priority and Fairness bounds the manager's requests instead, "+
			"and every controller's writes are bounded by its --concurrent-*-syncs workers. A positive value restores a "+
			"client-side limit for each controller's client.)")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst,
		"Burst to use while talking with kubernetes apiserver; used only when --kube-api-qps is above 0.")
	fs.StringVar(&o.KubeAPIContentType, "kube-api-content-type", o.KubeAPIContentType,
		"Content type of requests sent to apiserver: "+contentTypeProtobuf+" or "+contentTypeJSON+".")
	fs.BoolVar(&o.UseServiceAccountCredentials, "use-service-account-credentials", o.UseServiceAccountCredentials,
		"If true, use individual service account credentials for each controller.")
	fs.DurationVar(&o.MinResyncPeriod, "min-resync-period", o.MinResyncPeriod,
		"The resync period in reflectors will be random between MinResyncPeriod and 2*MinResyncPeriod.")

	// Controllers.
	fs.StringSliceVar(&o.Controllers, "controllers", o.Controllers,
		"A list of controllers to enable. '*' enables all on-by-default controllers, 'foo' enables the controller "+
			"named 'foo', '-foo' disables the controller named 'foo'. Upstream's short names (cloud-node, cloud-node-lifecycle, "+
			"service, route) are accepted. (nephele: naming one controller twice, or both enabling and disabling it, is an error.)")
	fs.DurationVar(&o.ControllerStartInterval, "controller-start-interval", o.ControllerStartInterval,
		"Interval between starting controller managers.")
	fs.StringVar(&o.ClusterName, "cluster-name", o.ClusterName, "The instance prefix for the cluster.")
	fs.StringVar(&o.ClusterCIDR, "cluster-cidr", o.ClusterCIDR,
		"CIDR Range for Pods in cluster: one CIDR, or one IPv4 and one IPv6 CIDR separated by a comma.")
	fs.BoolVar(&o.AllocateNodeCIDRs, "allocate-node-cidrs", o.AllocateNodeCIDRs,
		"Accepted for compatibility with upstream manifests. (nephele: never allocates Pod CIDRs, "+
			"kube-controller-manager's node-ipam-controller does; routes follow --configure-cloud-routes.)")
	fs.BoolVar(&o.ConfigureCloudRoutes, "configure-cloud-routes", o.ConfigureCloudRoutes,
		"Should CIDRs allocated to nodes be configured on the cloud provider.")
	fs.DurationVar(&o.NodeMonitorPeriod, "node-monitor-period", o.NodeMonitorPeriod,
		"The period for syncing NodeStatus in "+CloudNodeLifecycleController+".")
	fs.DurationVar(&o.NodeStatusUpdateFrequency, "node-status-update-frequency", o.NodeStatusUpdateFrequency,
		"Specifies how often the controller updates nodes' status.")
	fs.DurationVar(&o.RouteReconciliationPeriod, "route-reconciliation-period", o.RouteReconciliationPeriod,
		"The period for reconciling routes created for Nodes by cloud provider. (nephele: default 5m, upstream 10s: "+
			"routes are re-checked when nodes change, so the period is only a safety net against drift in the cloud.)")
	fs.IntVar(&o.ConcurrentServiceSyncs, "concurrent-service-syncs", o.ConcurrentServiceSyncs,
		"The number of services that are allowed to sync concurrently. (nephele: default 20, upstream 1, "+
			"so that one slow load balancer does not hold up the others and slow cloud calls still fill the cloud's quota; "+
			"the shared cloud budget keeps the calls within it.)")
	fs.IntVar(&o.ConcurrentNodeSyncs, "concurrent-node-syncs", o.ConcurrentNodeSyncs,
		"Number of workers concurrently synchronizing nodes. (nephele: default 10, upstream 1, so that the apiserver, "+
			"not one worker's writes, bounds how fast a burst of joining nodes is initialized; the instances still come "+
			"from shared listings.)")
	fs.IntVar(&o.ConcurrentRouteSyncs, "concurrent-route-syncs", o.ConcurrentRouteSyncs,
		"Number of nodes whose routes are synced concurrently, and so of routes created or deleted at once; with a provider that batches route changes, the bound of the node-condition writes instead (the syncs in flight then fill a batch). (nephele: not an upstream flag; upstream's concurrency is fixed.)")
	fs.DurationVar(&o.NodeDeletionGracePeriod, "node-deletion-grace-period", o.NodeDeletionGracePeriod,
		"How long a node's instance must stay confirmed gone from the cloud before the node is deleted. "+
			"(nephele: not an upstream flag; upstream deletes at once.)")
	fs.Float64Var(&o.NodeDeletionSafeModeThreshold, "node-deletion-safe-mode-threshold", o.NodeDeletionSafeModeThreshold,
		"Fraction of nodes, above 0 and at most 1: when more than this share of the nodes would be deleted at once, "+
			"none are, as that points at a cloud answering wrongly rather than at instances gone. (nephele: not an upstream flag.)")
	fs.DurationVar(&o.NodeBatchWindow, "node-batch-window", o.NodeBatchWindow,
		"Node changes are batched until this long passes without one (at most ten windows); a batch is one backend update per load balancer. (nephele: not an upstream flag.)")
	fs.StringVar(&o.LoadBalancerClass, "load-balancer-class", o.LoadBalancerClass,
		"The spec.loadBalancerClass of the Services this manager serves; empty serves the Services of type "+
			"LoadBalancer without a class. (nephele: not an upstream flag.)")
	fs.StringSliceVar(&o.CloudProviderPlatforms, "cloud-provider-platforms", o.CloudProviderPlatforms,
		"The provider-ID schemes of the nodes this manager owns and acts on (KEP-5778); nodes of other schemes, or "+
			"declaring another platform with the "+cloud.LabelNodePlatform+" or "+cloud.LabelPlatform+" label, are left "+
			"alone. Empty means every node, as upstream, unless --undeclared-nodes=ignore, which takes the provider's own; "+
			"* means every node. (nephele: not an upstream flag yet; "+
			"docs/hybrid.md.)")
	fs.StringVar(&o.UndeclaredNodes, "undeclared-nodes", o.UndeclaredNodes,
		"What to do with a node that has neither a provider ID nor a platform label: adopt (act on it as on an owned "+
			"node, as upstream) or ignore (leave it alone: for clusters whose nodes come from several clouds). "+
			"(nephele: not an upstream flag; docs/hybrid.md.)")
	fs.DurationVar(&o.HealthzStallTimeout, "healthz-stall-timeout", o.HealthzStallTimeout,
		"/readyz reports a controller unhealthy when it has work waiting and has finished none for this long. "+
			"(nephele: not an upstream flag.)")

	// Leader election and migration.
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect,
		"Start a leader election client and gain leadership before executing the main loop. "+
			"Enable this when running replicated components for high availability.")
	fs.DurationVar(&o.LeaderElectLeaseDuration, "leader-elect-lease-duration", o.LeaderElectLeaseDuration,
		"The duration that non-leader candidates will wait after observing a leadership renewal until attempting "+
			"to acquire leadership of a led but unrenewed leader slot. This is effectively the maximum duration that "+
			"a leader can be stopped before it is replaced by another candidate.")
	fs.DurationVar(&o.LeaderElectRenewDeadline, "leader-elect-renew-deadline", o.LeaderElectRenewDeadline,
		"The interval between attempts by the acting master to renew a leadership slot before it stops leading. "+
			"This must be less than the lease duration.")
	fs.DurationVar(&o.LeaderElectRetryPeriod, "leader-elect-retry-period", o.LeaderElectRetryPeriod,
		"The duration the clients should wait between attempting acquisition and renewal of a leadership. "+
			"1.2 times it must be less than the renew deadline.")
	fs.StringVar(&o.LeaderElectResourceLock, "leader-elect-resource-lock", o.LeaderElectResourceLock,
		"The type of resource object that is used for locking during leader election. Supported options are 'leases'.")
	fs.StringVar(&o.LeaderElectResourceName, "leader-elect-resource-name", o.LeaderElectResourceName,
		"The name of resource object that is used for locking during leader election.")
	fs.StringVar(&o.LeaderElectResourceNamespace, "leader-elect-resource-namespace", o.LeaderElectResourceNamespace,
		"The namespace of resource object that is used for locking during leader election.")
	fs.BoolVar(&o.EnableLeaderMigration, "enable-leader-migration", o.EnableLeaderMigration,
		"Whether to enable controller leader migration. (nephele: requires --leader-elect; upstream silently ignores it without.)")
	fs.StringVar(&o.LeaderMigrationConfigFile, "leader-migration-config", o.LeaderMigrationConfigFile,
		"Path to the config file for controller leader migration, or empty to use the default configuration of the "+
			"controller manager. The config file should be of type LeaderMigrationConfiguration, group "+
			migration.Group+", version v1, v1beta1 or v1alpha1.")

	// Serving.
	fs.IntVar(&o.SecurePort, "secure-port", o.SecurePort,
		"The port on which to serve HTTPS with authentication and authorization. If 0, don't serve HTTPS at all.")
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress,
		"The IP address on which to listen for the --secure-port port. 0.0.0.0 (or ::) listens on all interfaces.")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile,
		"File containing the default x509 certificate for HTTPS (CA cert, if any, concatenated after server cert). "+
			"If neither it nor --tls-private-key-file is given, a self-signed certificate is generated in memory.")
	fs.StringVar(&o.TLSPrivateKeyFile, "tls-private-key-file", o.TLSPrivateKeyFile,
		"File containing the default x509 private key matching --tls-cert-file.")
	fs.StringVar(&o.AuthenticationKubeconfig, "authentication-kubeconfig", o.AuthenticationKubeconfig,
		"kubeconfig file pointing at the 'core' kubernetes server with enough rights to create "+
			"tokenreviews.authentication.k8s.io. Empty means --kubeconfig.")
	fs.StringVar(&o.AuthorizationKubeconfig, "authorization-kubeconfig", o.AuthorizationKubeconfig,
		"kubeconfig file pointing at the 'core' kubernetes server with enough rights to create "+
			"subjectaccessreviews.authorization.k8s.io. Empty means --kubeconfig.")
	fs.StringSliceVar(&o.AuthorizationAlwaysAllowPaths, "authorization-always-allow-paths", o.AuthorizationAlwaysAllowPaths,
		"A list of HTTP paths to skip during authorization, i.e. these are authorized without contacting the "+
			"'core' kubernetes server. Each starts with '/'; a trailing '*' matches a prefix.")
	fs.BoolVar(&o.AuthenticationSkipLookup, "authentication-skip-lookup", o.AuthenticationSkipLookup,
		"If false, the authentication-kubeconfig will be used to lookup missing authentication configuration from the cluster "+
			"(kube-system/extension-apiserver-authentication: the client CA without --client-ca-file, the request-header settings without "+
			"--requestheader-client-ca-file). (nephele: read once at start.)")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "Enable profiling via web interface host:port/debug/pprof/")

	// Logging.
	fs.StringVar(&o.LoggingFormat, "logging-format", o.LoggingFormat, `Sets the log format: "text" or "json".`)
	fs.IntVarP(&o.Verbosity, "v", "v", o.Verbosity, "number for the log level verbosity")

	o.addUpstreamFlags(fs)

	// Flags upstream has deprecated but existing manifests still pass: accepted and
	// ignored, with pflag's deprecation warning, so such a manifest keeps starting.
	var ignoredBool bool
	var ignoredDuration time.Duration
	var ignoredString string
	fs.BoolVar(&ignoredBool, "allow-untagged-cloud", false, "Deprecated upstream; ignored.")
	fs.DurationVar(&ignoredDuration, "node-sync-period", 0, "Deprecated upstream; ignored.")
	fs.StringVar(&ignoredString, "cidr-allocator-type", "", "Accepted for compatibility; ignored (the CCM allocates no Pod CIDRs).")
	for _, name := range []string{"allow-untagged-cloud", "node-sync-period", "cidr-allocator-type"} {
		_ = fs.MarkDeprecated(name, "it has no effect in nephele and will be removed with upstream's")
	}
}

// controllerConfig returns the settings controllers read, from options Complete has
// checked.
func (o *Options) controllerConfig() ControllerConfig {
	cidrs, _ := ParseClusterCIDRs(o.ClusterCIDR)
	return ControllerConfig{
		ClusterName:                   o.ClusterName,
		ClusterCIDRs:                  cidrs,
		ConfigureCloudRoutes:          o.ConfigureCloudRoutes,
		NodeMonitorPeriod:             o.NodeMonitorPeriod,
		NodeStatusUpdateFrequency:     o.NodeStatusUpdateFrequency,
		ConcurrentNodeSyncs:           o.ConcurrentNodeSyncs,
		ConcurrentNodeStatusUpdates:   o.ConcurrentNodeStatusUpdates,
		ConcurrentServiceSyncs:        o.ConcurrentServiceSyncs,
		ConcurrentRouteSyncs:          o.ConcurrentRouteSyncs,
		RouteReconciliationPeriod:     o.RouteReconciliationPeriod,
		NodeDeletionGracePeriod:       o.NodeDeletionGracePeriod,
		NodeDeletionSafeModeThreshold: o.NodeDeletionSafeModeThreshold,
		LoadBalancerClass:             o.LoadBalancerClass,
		NodeBatchWindow:               o.NodeBatchWindow,
		Ownership:                     o.ownership(),
	}
}

// ownership returns the node ownership the flags configure; Run fills in the provider's
// platforms when --cloud-provider-platforms is empty.
func (o *Options) ownership() cloud.NodeOwnership {
	return cloud.NodeOwnership{
		Platforms:  slices.Clone(o.CloudProviderPlatforms),
		Undeclared: cloud.UndeclaredPolicy(o.UndeclaredNodes),
	}
}

// Complete checks every option against specs, the controllers the binary carries,
// reads --cloud-config and --leader-migration-config, and returns the resolved
// configuration Run accepts. o is not changed; the result holds its own copy.
//
// It reports at most one problem per flag, each on its own self-contained line of the
// form "invalid value for --flag: <value>: <what is allowed>", joined with errors.Join.
func (o *Options) Complete(specs []ControllerSpec) (CompletedConfig, error) {
	r := &completedConfig{options: *o, specs: slices.Clone(specs)}
	r.options.Controllers = slices.Clone(o.Controllers)
	r.options.AuthorizationAlwaysAllowPaths = slices.Clone(o.AuthorizationAlwaysAllowPaths)
	v := &validator{bad: make(map[string]bool)}

	if err := checkSpecs(specs); err != nil {
		v.errs = append(v.errs, fmt.Errorf("controller registration: %w", err))
	}

	// Cloud provider.
	o.completeClouds(v, r)
	v.positive("cloud-call-timeout", o.CloudCallTimeout)
	if math.IsNaN(o.CloudQPS) || math.IsInf(o.CloudQPS, 0) || o.CloudQPS < 0 {
		v.add("cloud-qps", "%s: must be 0 (no limit) or a positive number", formatFloat(o.CloudQPS))
	}
	if o.CloudQPS > 0 && o.CloudBurst < 1 {
		v.add("cloud-burst", "%d: must be at least 1 when --cloud-qps is above 0", o.CloudBurst)
	}
	if o.CloudQPS > 0 {
		// 0 derives the bound from --cloud-qps (CloudQPSBounds): a --cloud-qps set
		// before the budget adapted, above 100 or below 1, stays valid.
		if o.CloudQPSMin != 0 && (math.IsNaN(o.CloudQPSMin) || math.IsInf(o.CloudQPSMin, 0) || o.CloudQPSMin < 0 || o.CloudQPSMin > o.CloudQPS) {
			v.add("cloud-qps-min", "%s: must be 0 (the default) or a positive number no larger than --cloud-qps (%s)", formatFloat(o.CloudQPSMin), formatFloat(o.CloudQPS))
		}
		if o.CloudQPSMax != 0 && (math.IsNaN(o.CloudQPSMax) || math.IsInf(o.CloudQPSMax, 0) || o.CloudQPSMax < o.CloudQPS) {
			v.add("cloud-qps-max", "%s: must be 0 (the default) or a number no smaller than --cloud-qps (%s)", formatFloat(o.CloudQPSMax), formatFloat(o.CloudQPS))
		}
	}
	v.positive("cloud-max-retry-after", o.CloudMaxRetryAfter)

	// Apiserver connection.
	v.readable("kubeconfig", o.Kubeconfig)
	if o.Master != "" && !validServer(o.Master) {
		v.add("master", "%q: must be an http or https URL, or host[:port]", o.Master)
	}
	// client-go reads a zero QPS as its own default of 5, a surprise nobody asks for on
	// purpose; a negative one turns the limiter off.
	if math.IsNaN(float64(o.KubeAPIQPS)) || math.IsInf(float64(o.KubeAPIQPS), 0) || o.KubeAPIQPS == 0 {
		v.add("kube-api-qps", "%s: must be a positive number, or -1 for no client-side limit", formatFloat(float64(o.KubeAPIQPS)))
	}
	if o.KubeAPIQPS > 0 {
		v.atLeast("kube-api-burst", o.KubeAPIBurst, 1)
	}
	if o.KubeAPIContentType != contentTypeProtobuf && o.KubeAPIContentType != contentTypeJSON {
		v.add("kube-api-content-type", "%q: must be %s or %s", o.KubeAPIContentType, contentTypeProtobuf, contentTypeJSON)
	}
	v.positive("min-resync-period", o.MinResyncPeriod)

	// Controllers.
	enabled, err := SelectControllers(specs, o.Controllers)
	if err != nil {
		v.add("controllers", "%s", err)
	} else {
		r.enabledControllers = enabled
		r.controllerPlan = migration.Plan{Owned: enabled}
	}
	if o.ControllerStartInterval < 0 {
		v.add("controller-start-interval", "%q: must be 0 or a positive duration", o.ControllerStartInterval.String())
	}
	if o.ClusterName == "" {
		v.add("cluster-name", `"": required`)
	}
	if _, err := ParseClusterCIDRs(o.ClusterCIDR); err != nil {
		v.add("cluster-cidr", "%q: %s", o.ClusterCIDR, err)
	}
	v.positive("node-monitor-period", o.NodeMonitorPeriod)
	v.positive("node-status-update-frequency", o.NodeStatusUpdateFrequency)
	v.positive("route-reconciliation-period", o.RouteReconciliationPeriod)
	v.atLeast("concurrent-service-syncs", o.ConcurrentServiceSyncs, 1)
	v.atLeast("concurrent-node-syncs", o.ConcurrentNodeSyncs, 1)
	v.atLeast("concurrent-route-syncs", o.ConcurrentRouteSyncs, 1)
	v.positive("node-deletion-grace-period", o.NodeDeletionGracePeriod)
	if t := o.NodeDeletionSafeModeThreshold; !(t > 0 && t <= 1) {
		v.add("node-deletion-safe-mode-threshold", "%s: must be above 0 and at most 1", formatFloat(t))
	}
	v.positive("node-batch-window", o.NodeBatchWindow)
	if c := o.LoadBalancerClass; c != "" {
		if msgs := validation.IsQualifiedName(c); len(msgs) > 0 {
			v.add("load-balancer-class", "%q: must be a qualified name such as example.com/my-lb: %s", c, strings.Join(msgs, "; "))
		}
	}
	v.positive("healthz-stall-timeout", o.HealthzStallTimeout)
	if o.CloudConfigReloadPeriod < 0 {
		v.add("cloud-config-reload-period", "%q: must be 0 (never reload) or a positive duration", o.CloudConfigReloadPeriod.String())
	}
	o.validateOwnership(v)

	// Leader election.
	o.validateLeaderElection(v)
	o.validateLeaderMigration(v, specs, r)

	// Serving.
	if o.SecurePort < 0 || o.SecurePort > 65535 {
		v.add("secure-port", "%d: must be 0 (disabled) or between 1 and 65535", o.SecurePort)
	}
	if net.ParseIP(o.BindAddress) == nil {
		v.add("bind-address", "%q: must be an IP address", o.BindAddress)
	}
	switch {
	case o.TLSCertFile != "" && o.TLSPrivateKeyFile == "":
		v.add("tls-cert-file", "%q: requires --tls-private-key-file as well", o.TLSCertFile)
	case o.TLSCertFile == "" && o.TLSPrivateKeyFile != "":
		v.add("tls-private-key-file", "%q: requires --tls-cert-file as well", o.TLSPrivateKeyFile)
	default:
		v.readable("tls-cert-file", o.TLSCertFile)
		v.readable("tls-private-key-file", o.TLSPrivateKeyFile)
	}
	v.readable("authentication-kubeconfig", o.AuthenticationKubeconfig)
	v.readable("authorization-kubeconfig", o.AuthorizationKubeconfig)
	for _, p := range o.AuthorizationAlwaysAllowPaths {
		switch {
		case !strings.HasPrefix(p, "/"):
			v.add("authorization-always-allow-paths", "%q: paths must start with \"/\"", p)
		case strings.Contains(strings.TrimSuffix(p, "*"), "*"):
			v.add("authorization-always-allow-paths", "%q: only a trailing * is allowed", p)
		}
	}

	o.validateUpstream(v)

	// Logging.
	if o.LoggingFormat != "text" && o.LoggingFormat != "json" {
		v.add("logging-format", `%q: must be "text" or "json"`, o.LoggingFormat)
	}
	if o.Verbosity < 0 {
		v.add("v", "%d: must be 0 or more", o.Verbosity)
	}

	if len(v.errs) > 0 {
		return CompletedConfig{}, errors.Join(v.errs...)
	}
	r.controllers = o.controllerConfig()
	return CompletedConfig{r}, nil
}

// validateLeaderElection checks the main lease's settings. The timing rules are the
// ones client-go's leader elector enforces, reported here by flag instead of at run time.
func (o *Options) validateLeaderElection(v *validator) {
	v.positive("leader-elect-lease-duration", o.LeaderElectLeaseDuration)
	v.positive("leader-elect-renew-deadline", o.LeaderElectRenewDeadline)
	v.positive("leader-elect-retry-period", o.LeaderElectRetryPeriod)
	if o.LeaderElectLeaseDuration > 0 && o.LeaderElectRenewDeadline > 0 && o.LeaderElectRetryPeriod > 0 {
		if o.LeaderElectRenewDeadline >= o.LeaderElectLeaseDuration {
			v.add("leader-elect-renew-deadline", "%q: must be less than --leader-elect-lease-duration (%s)",
				o.LeaderElectRenewDeadline.String(), o.LeaderElectLeaseDuration)
		}
		// client-go's JitterFactor: the renew deadline must leave room for one jittered retry.
		const jitter = 1.2
		if float64(o.LeaderElectRenewDeadline) <= jitter*float64(o.LeaderElectRetryPeriod) {
			v.add("leader-elect-retry-period", "%q: must be less than --leader-elect-renew-deadline (%s) divided by %.1f",
				o.LeaderElectRetryPeriod.String(), o.LeaderElectRenewDeadline, jitter)
		}
	}
	if o.LeaderElectResourceLock != "leases" {
		v.add("leader-elect-resource-lock", `%q: must be "leases"`, o.LeaderElectResourceLock)
	}
	if msgs := validation.IsDNS1123Subdomain(o.LeaderElectResourceName); len(msgs) > 0 {
		v.add("leader-elect-resource-name", "%q: not a valid Lease name: %s", o.LeaderElectResourceName, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Label(o.LeaderElectResourceNamespace); len(msgs) > 0 {
		v.add("leader-elect-resource-namespace", "%q: not a valid namespace: %s", o.LeaderElectResourceNamespace, strings.Join(msgs, "; "))
	}
}

// validateLeaderMigration loads the migration config and plans, into r, which enabled
// controller runs under which lease. It needs r's enabled controllers, so it runs after
// --controllers is checked.
func (o *Options) validateLeaderMigration(v *validator, specs []ControllerSpec, r *completedConfig) {
	const flag = "leader-migration-config"
	if o.LeaderMigrationConfigFile != "" && !o.EnableLeaderMigration {
		v.add(flag, "%q: requires --enable-leader-migration", o.LeaderMigrationConfigFile)
		return
	}
	if !o.EnableLeaderMigration {
		return
	}
	if !o.LeaderElect {
		// Upstream silently ignores migration without leader election and then runs the
		// migrating controllers unguarded, beside kube-controller-manager's.
		v.add("enable-leader-migration", "true: requires --leader-elect=true, as leader migration coordinates leases")
		return
	}
	// source names the config in messages: the file, or upstream's default.
	source := "default configuration"
	cfg := migration.Default()
	if o.LeaderMigrationConfigFile != "" {
		source = o.LeaderMigrationConfigFile
		var err error
		if cfg, err = migration.Load(o.LeaderMigrationConfigFile); err != nil {
			v.add(flag, "%s", err) // Load's errors start with the path
			return
		}
	}
	if cfg.LeaderName == o.LeaderElectResourceName {
		if o.LeaderMigrationConfigFile != "" {
			v.add(flag, "%s: leaderName %q is the main lease's name (--leader-elect-resource-name): must differ", source, cfg.LeaderName)
		} else {
			v.add("leader-elect-resource-name", "%q: is the leader migration lease's name in the %s: must differ", cfg.LeaderName, source)
		}
		return
	}
	if r.enabledControllers == nil {
		return // --controllers is wrong and already reported
	}
	plan, err := cfg.Classify(leaderMigrationComponent, r.enabledControllers, func(name string) (string, bool) {
		return CanonicalName(specs, name)
	})
	if err != nil {
		msg := err.Error()
		if errors.Is(err, migration.ErrUnknownController) {
			msg += "; " + selectionHelp(specs)
		}
		v.add(flag, "%s: %s", source, msg)
		return
	}
	r.leaderMigration = cfg
	r.controllerPlan = plan
}

// validator collects the first problem per flag.
type validator struct {
	errs []error
	bad  map[string]bool
}

// add records a problem with --flag unless one is already recorded for it.
func (v *validator) add(flag, format string, args ...any) {
	if v.bad[flag] {
		return
	}
	v.bad[flag] = true
	v.errs = append(v.errs, fmt.Errorf("invalid value for --%s: %s", flag, fmt.Sprintf(format, args...)))
}

func (v *validator) positive(flag string, d time.Duration) {
	if d <= 0 {
		v.add(flag, "%q: must be a positive duration", d.String())
	}
}

func (v *validator) atLeast(flag string, n, least int) {
	if n < least {
		v.add(flag, "%d: must be at least %d", n, least)
	}
}

// readable checks that path, when given, can be opened for reading, so that a typo
// fails at start rather than when the file is first needed.
func (v *validator) readable(flag, path string) {
	if path == "" {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		v.add(flag, "%s", err)
		return
	}
	_ = f.Close()
}

// validServer reports whether s is usable as --master: an http(s) URL with a host, or
// host[:port] to which client-go adds the scheme.
func validServer(s string) bool {
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// CloudQPSBounds are the floor and ceiling of the adaptive cloud budget: --cloud-qps-min
// and --cloud-qps-max, or where 0, the defaults widened to take in --cloud-qps.
func (o Options) CloudQPSBounds() (lo, hi float64) {
	lo, hi = o.CloudQPSMin, o.CloudQPSMax
	if lo == 0 {
		lo = min(DefaultCloudQPSMin, o.CloudQPS)
	}
	if hi == 0 {
		hi = max(DefaultCloudQPSMax, o.CloudQPS)
	}
	return lo, hi
}

// completeClouds checks the clouds the manager serves and reads their configurations:
// the one of --cloud-provider and --cloud-config, or those of --clouds-config.
func (o *Options) completeClouds(v *validator, r *completedConfig) {
	if o.CloudsConfigFile == "" {
		if o.CloudProvider == "" {
			v.add("cloud-provider", `"": required: the name of the cloud provider (or --clouds-config for several)`)
		}
		// The class and platforms stay the flags' (ControllerConfig, withPlatforms).
		src := clouds.Source{Cloud: clouds.Cloud{Provider: o.CloudProvider, CloudConfig: o.CloudConfigFile}}
		if o.CloudConfigFile != "" {
			// As a reload reads it (cloudReloader): bounded, and a FIFO or device at the
			// path is refused instead of hanging the start.
			data, err := smallfile.Read(o.CloudConfigFile, maxCloudConfigSize)
			if err != nil {
				v.add("cloud-config", "%s", err)
			}
			src.Config = data
		}
		r.clouds = []clouds.Source{src}
		return
	}
	// Each cloud names its own: a flag beside the file would be silently half-applied.
	for _, f := range []struct {
		flag string
		set  bool
	}{
		{"cloud-provider", o.CloudProvider != ""},
		{"cloud-config", o.CloudConfigFile != ""},
		{"load-balancer-class", o.LoadBalancerClass != ""},
		{"cloud-provider-platforms", len(o.CloudProviderPlatforms) > 0},
	} {
		if f.set {
			v.add(f.flag, "not with --clouds-config, where each cloud names its own: remove --%s", f.flag)
		}
	}
	srcs, err := clouds.Load(o.CloudsConfigFile)
	var invalid *clouds.InvalidError
	switch {
	case errors.As(err, &invalid):
		v.add("clouds-config", "%s: %s", o.CloudsConfigFile, err)
		return
	case err != nil:
		v.add("clouds-config", "%s", err) // it names the file
		return
	}
	r.clouds = srcs
}

// validateOwnership checks --cloud-provider-platforms and --undeclared-nodes.
func (o *Options) validateOwnership(v *validator) {
	if err := (cloud.NodeOwnership{Platforms: o.CloudProviderPlatforms}).Validate(); err != nil {
		v.add("cloud-provider-platforms", "%s", err)
	}
	if v.bad["cloud-provider-platforms"] {
		return
	}
	if err := o.ownership().Validate(); err != nil {
		v.add("undeclared-nodes", "%s", err)
	}
}
