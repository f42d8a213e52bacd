// Package migration reads the upstream LeaderMigrationConfiguration
// (controllermanager.config.k8s.io) and decides, for one controller manager, which of its
// controllers run under the main lease, which run only while it holds the migration
// lease, and which it leaves to another component.
//
// Leader migration moves controllers from kube-controller-manager to a
// cloud-controller-manager without a window in which both or neither run them: during
// the migration both components campaign for one extra Lease (the config's leaderName)
// and only its holder runs the controllers listed in the config. The file format is the
// upstream one, so one config file can be handed to both components.
package migration
