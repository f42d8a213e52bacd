package loadbalancer

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/cloud"
)

// TaintToBeDeleted is set by the cluster autoscaler on a node it is about to remove. It
// does not take the node out of load balancers: with KEP-3458 (StableLoadBalancerNodeSet,
// GA) the node stays a backend until the Node is deleted, and kube-proxy's /healthz on
// :10256 fails for it (KEP-3836), so the load balancers' health checks drain its
// connections instead of cutting them.
const TaintToBeDeleted = "ToBeDeletedByClusterAutoscaler"

// IsBackend reports whether node may receive load balancer traffic: it is initialized
// (has a provider ID and no uninitialized taint), is not being deleted and is not
// labelled node.kubernetes.io/exclude-from-external-load-balancers (unless the value is
// "false", as upstream). Readiness and the autoscaler's TaintToBeDeleted do not matter:
// the load balancer's health checks decide where traffic goes, as upstream's
// StableLoadBalancerNodeSet has it.
func IsBackend(node *corev1.Node) bool {
	if node == nil || node.DeletionTimestamp != nil || node.Spec.ProviderID == "" {
		return false
	}
	if v, ok := node.Labels[corev1.LabelNodeExcludeBalancers]; ok {
		// As upstream: "false" keeps the node in, any other value (even one that is
		// not a boolean) takes it out.
		if include, err := strconv.ParseBool(v); err != nil || include {
			return false
		}
	}
	for i := range node.Spec.Taints {
		if node.Spec.Taints[i].Key == cloudproviderapi.TaintExternalCloudProvider {
			return false
		}
	}
	return true
}

// backendSet is the set of eligible nodes, kept up to date from node events. It
// identifies the whole set by a hash that node events update in O(1), so finding the
// load balancers a node change affects costs one comparison per load balancer, and the
// sorted backend list is built at most once per distinct set.
type backendSet struct {
	mu      sync.Mutex
	members map[string]member // eligible nodes by name
	hash    uint64            // sum of the members' hashes: independent of order
	snap    *snapshot         // the sorted list for hash, built on demand; nil if stale
}

// member is one eligible node.
type member struct {
	hash uint64
	node *corev1.Node
}

// snapshot is an immutable view of the backend set, shared by every load balancer that
// uses it.
type snapshot struct {
	// hash identifies the set; equal hashes mean equal sets (see backendHash).
	hash uint64
	// backends are sorted by node name. Shared: never modify.
	backends []cloud.Backend
}

func newBackendSet() *backendSet {
	return &backendSet{members: map[string]member{}}
}

// update records the current state of the node called name (nil when it was deleted)
// and reports whether the set of backends, as load balancers see it, changed.
func (s *backendSet) update(name string, node *corev1.Node) bool {
	eligible := node != nil && IsBackend(node)
	var h uint64
	if eligible {
		h = backendHash(node)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.members[name]
	switch {
	case !eligible && !had:
		return false
	case !eligible:
		delete(s.members, name)
		s.hash -= old.hash
	case had && old.hash == h:
		// Nothing load balancers see changed (a heartbeat, a condition, a label that
		// does not matter): keep the newer object for the next snapshot, no more.
		s.members[name] = member{hash: h, node: node}
		return false
	default:
		s.members[name] = member{hash: h, node: node}
		s.hash += h - old.hash // old.hash is 0 when !had
	}
	s.snap = nil
	return true
}

// currentHash returns the hash of the current set.
func (s *backendSet) currentHash() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hash
}

// current returns a snapshot of the current set, building it if the set changed since
// the last call.
func (s *backendSet) current() *snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap != nil {
		return s.snap
	}
	backends := make([]cloud.Backend, 0, len(s.members))
	for name, m := range s.members {
		backends = append(backends, cloud.Backend{
			NodeName:   name,
			ProviderID: m.node.Spec.ProviderID,
			Addresses:  m.node.Status.Addresses,
			Node:       m.node,
		})
	}
	slices.SortFunc(backends, func(a, b cloud.Backend) int { return strings.Compare(a.NodeName, b.NodeName) })
	s.snap = &snapshot{hash: s.hash, backends: backends}
	return s.snap
}

// backendHash hashes what a load balancer sees of node: its name, provider ID and
// addresses. The set's hash is the sum of its members' hashes, so two sets collide only
// with probability about 2^-64, and a collision would cost one missed update that the
// next node change repairs.
func backendHash(node *corev1.Node) uint64 {
	h := uint64(fnvOffset)
	h = fnvString(h, node.Name)
	h = fnvString(h, node.Spec.ProviderID)
	for _, a := range node.Status.Addresses {
		h = fnvString(h, string(a.Type))
		h = fnvString(h, a.Address)
	}
	return mix(h)
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// fnvString folds s and a terminator into an FNV-1a hash, without allocating.
func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	h ^= 0xff // terminator: "ab","c" differs from "a","bc"
	h *= fnvPrime
	return h
}

// mix is the splitmix64 finalizer: it spreads FNV's output over all 64 bits so that
// sums of hashes stay well distributed.
func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
