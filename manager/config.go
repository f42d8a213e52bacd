package manager

import (
	"time"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/manager/clouds"
	"github.com/nephele-dev/nephele/manager/instrumented"
	"github.com/nephele-dev/nephele/manager/migration"
)

// DefaultCloudMaxRetryAfter is the default --cloud-max-retry-after: the call path's own.
const DefaultCloudMaxRetryAfter = instrumented.DefaultMaxRetryAfter

// The cloud budget's defaults (docs/manager.md says why).
const (
	// DefaultCloudQPS is the default --cloud-qps, the rate the budget starts at: the
	// fixed rate nephele used before its budget adapted, safe under any quota we know
	// of for a burst's first seconds.
	DefaultCloudQPS = 20
	// DefaultCloudQPSMin is the default --cloud-qps-min: however hard the cloud
	// throttles, one call a second keeps every controller moving.
	DefaultCloudQPSMin = 1
	// DefaultCloudQPSMax is the default --cloud-qps-max. The budget finds the quota by
	// itself; the ceiling bounds what one manager may take when nothing throttles it.
	DefaultCloudQPSMax = 100
)

// DefaultControllerConfig returns the controllers' default settings: the flags'
// defaults, and what a controller built outside a manager uses for a zero field. It is
// the one place these defaults are defined.
func DefaultControllerConfig() ControllerConfig {
	return ControllerConfig{
		ClusterName:               "kubernetes",
		ConfigureCloudRoutes:      true,
		NodeMonitorPeriod:         5 * time.Second,
		NodeStatusUpdateFrequency: 5 * time.Minute,
		// Upstream's is 10s; routes are re-checked when nodes change, so the period is
		// only a safety net against drift in the cloud.
		RouteReconciliationPeriod: 5 * time.Minute,
		// Upstream's is 1, which lets one slow load balancer hold up every other. A
		// load balancer with thousands of backends takes a cloud call of a few hundred
		// milliseconds and two apiserver writes to create; at a quota of 50 calls/s that
		// is ten to twenty syncs in flight, and the shared cloud budget, not the number
		// of workers, keeps the calls within the quota.
		ConcurrentServiceSyncs: 20,
		// Upstream's is 1. One worker's writes bounded the initialization of a burst
		// (about 130 nodes/s); ten make the apiserver the limit instead.
		ConcurrentNodeSyncs:           10,
		ConcurrentRouteSyncs:          10,
		NodeDeletionGracePeriod:       40 * time.Second,
		NodeDeletionSafeModeThreshold: 0.1,
		NodeBatchWindow:               time.Second,
		// Every node is owned and undeclared nodes are adopted, as upstream; Run takes
		// the provider's platforms under --undeclared-nodes=ignore (withPlatforms).
		Ownership: cloud.NodeOwnership{Undeclared: cloud.UndeclaredAdopt},
	}
}

// OrDefault returns v, or def when v is not positive: the rule every controller's
// Config applies to a field left zero.
func OrDefault[T int | float64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// completedConfig is what Complete resolved from Options.
type completedConfig struct {
	// options are the flags as given, copied.
	options Options
	specs   []ControllerSpec
	// clouds are the clouds the manager serves, their configurations read once: one
	// from --cloud-provider and --cloud-config (Name empty), or those of
	// --clouds-config.
	clouds []clouds.Source
	// enabledControllers are the canonical names --controllers enables, in
	// registration order.
	enabledControllers []string
	// leaderMigration is nil unless leader migration is enabled.
	leaderMigration *migration.Config
	// controllerPlan says which enabled controllers run under the main lease, the
	// migration lease, or not at all.
	controllerPlan migration.Plan
	controllers    ControllerConfig
}

// CompletedConfig is a manager configuration that Options.Complete has checked and
// resolved. Only Complete makes a usable one, so Run cannot be handed settings nobody
// validated; the zero value is refused by Run.
type CompletedConfig struct {
	*completedConfig
}

// Options returns a copy of the options the configuration was completed from.
func (c CompletedConfig) Options() Options { return c.options }

// CloudConfig returns the content of --cloud-config, nil when none was given (and with
// --clouds-config, whose clouds each have their own).
func (c CompletedConfig) CloudConfig() []byte {
	if c.MultiCloud() || len(c.clouds) == 0 {
		return nil
	}
	return c.clouds[0].Config
}

// EnabledControllers returns the canonical names of the controllers --controllers
// enables, in registration order.
func (c CompletedConfig) EnabledControllers() []string { return c.enabledControllers }

// LeaderMigration returns the leader migration configuration, nil unless leader
// migration is enabled.
func (c CompletedConfig) LeaderMigration() *migration.Config { return c.leaderMigration }

// ControllerPlan says which enabled controllers run under the main lease (Owned),
// under the migration lease (Migrated) and not at all (Unowned). Without leader
// migration every enabled controller is Owned.
func (c CompletedConfig) ControllerPlan() migration.Plan { return c.controllerPlan }

// MultiCloud reports whether the manager serves several clouds (--clouds-config).
func (c CompletedConfig) MultiCloud() bool { return c.options.CloudsConfigFile != "" }

// Controllers returns the settings the controllers read.
func (c CompletedConfig) Controllers() ControllerConfig { return c.controllers }
