// Package inventory keeps a shared, on-demand view of every instance a provider lists.
//
// Upstream cloud controllers ask the cloud about each node on every period, so their
// cloud calls grow with the cluster. Here controllers instead ask the inventory for a
// listing no older than they can tolerate; one ListInstances call serves every
// controller and every node that asked while it ran. A cluster whose nodes are all
// healthy and initialized asks for nothing but the periodic address refresh.
//
// The manager builds the one inventory of a process, over its instrumented cloud call
// path, when the provider can list instances, and gives it to the controllers that read
// instances; a provider only implements the listing (cloud.InstanceLister).
package inventory
