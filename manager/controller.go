package manager

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/nephele-dev/nephele/cloud"
)

// Canonical controller names, as upstream's cloud-controller-manager spells them.
const (
	CloudNodeController          = "cloud-node-controller"
	CloudNodeLifecycleController = "cloud-node-lifecycle-controller"
	ServiceLBController          = "service-lb-controller"
	NodeRouteController          = "node-route-controller"
)

// Controller is one control loop run by the manager.
type Controller interface {
	// Run runs the controller until ctx is done. It returns nil after a clean stop and
	// an error when the controller cannot go on.
	Run(ctx context.Context) error
}

// ControllerFunc adapts a function to Controller.
type ControllerFunc func(ctx context.Context) error

// Run calls f(ctx).
func (f ControllerFunc) Run(ctx context.Context) error { return f(ctx) }

// ErrControllerDisabled is returned (wrapped, with the reason) by a ControllerSpec's
// New when the controller should not run in this configuration, for example because the
// provider lacks the capability it needs. The manager logs the reason and goes on.
var ErrControllerDisabled = errors.New("controller disabled")

// Disabled returns an error wrapping ErrControllerDisabled with a reason.
func Disabled(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrControllerDisabled)
}

// ControllerSpec describes a controller the manager can run.
type ControllerSpec struct {
	// Name is the canonical name used by --controllers and leader migration.
	Name string
	// Aliases are other names accepted for it (upstream's short names).
	Aliases []string
	// DisabledByDefault excludes the controller from "*"; it runs only when named.
	DisabledByDefault bool
	// ClientName is the service account (in kube-system) whose credentials the
	// controller uses under --use-service-account-credentials. Upstream's names
	// (node-controller, service-controller, route-controller) let the RBAC roles
	// clusters already have apply. Empty means Name.
	ClientName string
	// RBAC are the requests the controller makes with its own client
	// (ControllerContext.Client): its writes and its reads of single objects, one rule per
	// code path, each naming the path in Why. They are declared here, beside the code
	// that makes the requests, so that a provider's own controllers carry theirs too:
	// deploy/render grants them to the controller's service account under
	// --use-service-account-credentials and to the manager's otherwise, and lists them
	// in docs/deploy.md's permission tables. Lists and watches belong in Informers.
	RBAC []RBACRule
	// Informers are the resources the controller registers shared informers for on
	// ControllerContext.Informers. The manager's own client lists and watches them
	// whatever credentials the controller uses, so a rendering grants list and watch on
	// them to the manager's identity.
	Informers []schema.GroupResource
	// New builds the controller. It runs after the manager has the leader lease that
	// covers this controller, before informers start. It returns an error wrapping
	// ErrControllerDisabled to decline, or another error to fail the manager.
	New func(ctx context.Context, cc *ControllerContext) (Controller, error)
}

// ControllerDeps are the dependencies every controller takes from the manager, alike for
// all of them: ControllerContext carries them and each controller's Config embeds them,
// so that a ControllerSpec's New passes them on in one field. What differs between
// controllers (the cloud capability each needs, its settings) stays in its own Config.
type ControllerDeps struct {
	// Client talks to the apiserver with the controller's own user agent (or, under
	// --use-service-account-credentials, its own service account). Required.
	Client kubernetes.Interface
	// Informers is the manager's one shared informer factory. The manager starts it
	// after every controller has been built; controllers only register informers.
	// Required.
	Informers informers.SharedInformerFactory
	// Recorder records Events as this controller. Required.
	Recorder record.EventRecorder
	// Logger is a logger named for the controller; the zero value discards.
	Logger logr.Logger
	// Metrics is where the controller registers its metrics; nil registers nothing.
	Metrics prometheus.Registerer
	// Health reports the controller's progress to /readyz; nil reports nothing.
	Health *Progress
}

// ErrMissingDependency is wrapped by ControllerDeps.Check's error: a controller was
// built without a dependency it cannot run without.
var ErrMissingDependency = errors.New("missing dependency")

// Check returns an error wrapping ErrMissingDependency that names the first required
// dependency (Client, Informers, Recorder) d lacks, or nil.
func (d ControllerDeps) Check() error {
	switch {
	case d.Client == nil:
		return fmt.Errorf("%w: a Kubernetes client (Client)", ErrMissingDependency)
	case d.Informers == nil:
		return fmt.Errorf("%w: an informer factory (Informers)", ErrMissingDependency)
	case d.Recorder == nil:
		return fmt.Errorf("%w: an event recorder (Recorder)", ErrMissingDependency)
	}
	return nil
}

// ControllerContext is what the manager hands each controller.
type ControllerContext struct {
	// Name is the controller's canonical name.
	Name string
	// ControllerDeps are the client, informers, recorder, logger, metrics and health
	// the controller passes on to its Config.
	ControllerDeps
	// Cloud is the provider behind the manager's instrumented call path: every call is
	// counted, timed out, rate limited and held for the cloud's (capped) Retry-After.
	Cloud cloud.Provider
	// Inventory is the shared instance inventory, or nil when the provider has no
	// batch listing.
	Inventory Inventory
	// Config holds the settings that controllers read.
	Config ControllerConfig
}

// Instances returns the provider's per-node instance capability, or an error wrapping
// ErrControllerDisabled that names the provider when it has none: what every node
// controller needs before it can run.
func (cc *ControllerContext) Instances() (cloud.Instances, error) {
	if cc.Cloud == nil {
		return nil, Disabled("no cloud provider")
	}
	instances, ok := cc.Cloud.Instances()
	if !ok || instances == nil {
		return nil, Disabled("provider %s has no Instances capability", cc.Cloud.ProviderName())
	}
	return instances, nil
}

// Inventory is the shared view of every instance in the cloud, kept when the provider
// implements batch listing. The cloud is listed only on demand: controllers ask for a
// listing no older than they need, and concurrent askers share one cloud call, so a
// quiet cluster costs (almost) no cloud calls however many nodes it has.
type Inventory interface {
	// Lookup returns the instance with the given provider ID, or, when providerID is
	// empty, the instance whose NodeName is nodeName, from the last complete listing.
	// ok is false when that listing did not contain it (or there was none yet).
	Lookup(providerID, nodeName string) (inst cloud.Instance, ok bool)
	// Sync returns once a listing that started no more than maxAge ago has completed,
	// starting one when needed, and returns that listing's error. maxAge 0 asks for a
	// listing that starts after the call.
	Sync(ctx context.Context, maxAge time.Duration) error
	// LastSync returns when the last successful listing started, zero if none has.
	LastSync() time.Time
}

// ControllerConfig is the part of the manager's configuration the controllers read.
// Durations are validated positive by the manager before any controller is built;
// DefaultControllerConfig holds the defaults. The cloud call timeout, rate limit and
// Retry-After cap are not here: the cloud call path applies them to every call.
type ControllerConfig struct {
	// ClusterName is --cluster-name.
	ClusterName string
	// ClusterCIDRs are the --cluster-cidr networks, at most one per IP family, masked
	// (ParseClusterCIDRs).
	ClusterCIDRs []netip.Prefix
	// ConfigureCloudRoutes is --configure-cloud-routes.
	ConfigureCloudRoutes bool
	// NodeMonitorPeriod is --node-monitor-period.
	NodeMonitorPeriod time.Duration
	// NodeStatusUpdateFrequency is --node-status-update-frequency.
	NodeStatusUpdateFrequency time.Duration
	// ConcurrentNodeSyncs is --concurrent-node-syncs.
	ConcurrentNodeSyncs int
	// ConcurrentNodeStatusUpdates is --concurrent-node-status-updates: nodes whose
	// addresses are looked up at once in a refresh; 0 means ConcurrentNodeSyncs.
	ConcurrentNodeStatusUpdates int
	// ConcurrentServiceSyncs is --concurrent-service-syncs.
	ConcurrentServiceSyncs int
	// ConcurrentRouteSyncs is --concurrent-route-syncs.
	ConcurrentRouteSyncs int
	// RouteReconciliationPeriod is --route-reconciliation-period.
	RouteReconciliationPeriod time.Duration
	// NodeDeletionGracePeriod is --node-deletion-grace-period.
	NodeDeletionGracePeriod time.Duration
	// NodeDeletionSafeModeThreshold is --node-deletion-safe-mode-threshold, a fraction.
	NodeDeletionSafeModeThreshold float64
	// LoadBalancerClass is --load-balancer-class; empty serves Services without a class.
	LoadBalancerClass string
	// ServeUnclassed serves Services without a class beside those of LoadBalancerClass:
	// the default cloud of a manager serving several (--clouds-config).
	ServeUnclassed bool
	// NodeBatchWindow is --node-batch-window: node changes within it share one
	// backend update per load balancer.
	NodeBatchWindow time.Duration
	// Ownership decides which nodes the node-touching controllers act on
	// (--cloud-provider-platforms, --undeclared-nodes; see withPlatforms).
	Ownership cloud.NodeOwnership
}

// withPlatforms returns c with the ownership's platforms defaulted to provider's own
// (cloud.Platforms) when undeclared nodes are ignored and no flag named them. Without
// either flag the manager owns every node, as upstream and KEP-5778 without a platform
// list: a provider whose provider IDs do not carry its name as their scheme keeps its
// nodes.
func (c ControllerConfig) withPlatforms(provider cloud.Provider) ControllerConfig {
	if len(c.Ownership.Platforms) == 0 && c.Ownership.Undeclared == cloud.UndeclaredIgnore {
		c.Ownership.Platforms = cloud.Platforms(provider)
	}
	return c
}
