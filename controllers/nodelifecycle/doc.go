// Package nodelifecycle is the cloud-node-lifecycle-controller. Every monitor period it
// looks at the Nodes that are not Ready, and only at those: it taints a node whose
// instance is stopped with node.cloudprovider.kubernetes.io/shutdown (and removes the
// taint when the node is Ready again or its instance runs), and deletes a Node whose
// instance the cloud positively reports as gone.
//
// Deletion is the one destructive thing a cloud controller does, so it is guarded three
// ways. Only the typed NotFound answer (cloud.IsNotFound) counts, never a timeout, a 5xx,
// throttling or absence from a listing. The answer must be seen twice, at least the
// deletion grace period apart. And a round that would delete more than a threshold share
// of the cluster, or in which the cloud mostly failed to answer, deletes nothing: the
// controller enters safe mode, says so with Events and a metric, and leaves it by itself
// once the condition clears. A cloud outage never empties a cluster.
//
// Healthy nodes cost no cloud call. With batch listing, a round costs at most one shared
// listing plus one lookup per not-Ready node the listing lacks.
package nodelifecycle
