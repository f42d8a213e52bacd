package handover

import (
	"fmt"
	"strings"
	"time"
)

// DefaultUninitializedBound is how long a Node may carry the uninitialized taint before
// Check fails it: nephele initializes a Node within seconds of its registration.
const DefaultUninitializedBound = 5 * time.Minute

// CheckOptions configure Check.
type CheckOptions struct {
	// From is the component the controllers moved from; empty checks for both.
	From   Source
	Leases Leases
	// Provider is nephele's provider: Nodes' provider IDs must use its scheme. Empty
	// accepts any provider ID.
	Provider string
	// UninitializedBound is how long a Node may stay uninitialized, and a Service stay
	// in deletion with the cleanup finalizer; DefaultUninitializedBound when zero.
	UninitializedBound time.Duration
	// LoadBalancerClass is nephele's --load-balancer-class: it serves the Services of
	// this class, or of none when empty; other Services belong to another controller.
	LoadBalancerClass string
}

// Verdict is the outcome of Check: one Result per failed object, and one per check that
// passed.
type Verdict struct {
	Results []Result
}

// Result is one check of one object (or of all objects of a kind, when it passed).
type Result struct {
	// Check names the check: nodes/provider-id, nodes/initialized,
	// services/load-balancer, leases/nephele, leases/migration, old-component.
	Check string
	OK    bool
	// Object is what failed ("node/a"), or what passed ("nodes").
	Object string
	// Text says what was found.
	Text string
	// Fix says what to do, for a failure.
	Fix string
}

// Passed reports whether every check passed.
func (v *Verdict) Passed() bool {
	for _, r := range v.Results {
		if !r.OK {
			return false
		}
	}
	return true
}

// Failed returns the failures.
func (v *Verdict) Failed() []Result {
	var out []Result
	for _, r := range v.Results {
		if !r.OK {
			out = append(out, r)
		}
	}
	return out
}

// Check gives the verdict on a finished move: every Node has a provider ID (of
// o.Provider), none has been uninitialized longer than the bound, every LoadBalancer
// Service nephele serves has the cleanup finalizer and an address and none is stuck in
// deletion, nephele holds its lease, and the old component holds nothing: the migration
// lease is gone, stale, or nephele's, and the old component's lease is stale (a
// cloud-controller-manager) or it runs without an in-tree provider
// (kube-controller-manager, which keeps running its other controllers).
func Check(s *Snapshot, o CheckOptions) *Verdict {
	if o.UninitializedBound <= 0 {
		o.UninitializedBound = DefaultUninitializedBound
	}
	leases := o.Leases.complete()
	v := &Verdict{}
	c := checker{s: s, o: o, leases: leases, v: v}
	c.nodes()
	c.services()
	c.nepheleLease()
	c.migrationLease()
	c.oldComponent()
	return v
}

type checker struct {
	s      *Snapshot
	o      CheckOptions
	leases Leases
	v      *Verdict
}

func (c *checker) fail(check, object, text, fix string) {
	c.v.Results = append(c.v.Results, Result{Check: check, Object: object, Text: text, Fix: fix})
}

func (c *checker) pass(check, object, text string) {
	c.v.Results = append(c.v.Results, Result{Check: check, OK: true, Object: object, Text: text})
}

func (c *checker) nodes() {
	failed := len(c.v.Results)
	scheme := ""
	if c.o.Provider != "" {
		scheme = c.o.Provider + "://"
	}
	for _, n := range c.s.Nodes {
		switch {
		case n.Uninitialized:
			// Its provider ID comes with its initialization, which the next check judges.
		case n.ProviderID == "":
			c.fail("nodes/provider-id", "node/"+n.Name, "no spec.providerID",
				"nephele sets it when it initializes a Node the kubelet registered with --cloud-provider=external; an older Node without one must be re-registered (delete the Node, restart its kubelet) or given spec.providerID")
		case scheme != "" && !strings.HasPrefix(n.ProviderID, scheme):
			c.fail("nodes/provider-id", "node/"+n.Name, fmt.Sprintf("provider ID %s is not %s…", n.ProviderID, scheme),
				"nephele's provider "+c.o.Provider+" does not know this instance: is nephele running the provider of this cloud?")
		}
	}
	if len(c.v.Results) == failed {
		text := fmt.Sprintf("all %d initialized Nodes have a provider ID", initialized(c.s.Nodes))
		if scheme != "" {
			text += " (" + scheme + "…)"
		}
		c.pass("nodes/provider-id", "nodes", text)
	}

	failed = len(c.v.Results)
	young := 0
	for _, n := range c.s.Nodes {
		if !n.Uninitialized {
			continue
		}
		since := c.s.Time.Sub(n.TaintedSince)
		if since < c.o.UninitializedBound {
			young++
			continue
		}
		c.fail("nodes/initialized", "node/"+n.Name, fmt.Sprintf("uninitialized for %s (bound %s)", age(since), c.o.UninitializedBound),
			fmt.Sprintf("nephele's cloud-node-controller runs under lease %s/%s: check that it is held (`nephele migrate status`) and read nephele's events for the Node (`kubectl describe node %s`)", c.s.Namespace, c.leases.Nephele, n.Name))
	}
	if len(c.v.Results) == failed {
		text := fmt.Sprintf("no Node uninitialized for more than %s", c.o.UninitializedBound)
		if young > 0 {
			text += fmt.Sprintf(" (%d registered more recently)", young)
		}
		c.pass("nodes/initialized", "nodes", text)
	}
}

func (c *checker) services() {
	failed := len(c.v.Results)
	served, other := 0, 0
	for _, svc := range c.s.Services {
		if svc.Class != c.o.LoadBalancerClass {
			other++
			continue
		}
		served++
		obj := "service/" + svc.String()
		switch {
		case !svc.DeletingSince.IsZero():
			if since := c.s.Time.Sub(svc.DeletingSince); since >= c.o.UninitializedBound {
				c.fail("services/load-balancer", obj, fmt.Sprintf("deleted %s ago and still held by the load-balancer-cleanup finalizer", age(since)),
					"nephele's service-lb-controller removes the finalizer once the cloud load balancer is gone: read its events (`kubectl describe service`) for the cloud's answer")
			}
		case !svc.Finalizer:
			c.fail("services/load-balancer", obj, "no service.kubernetes.io/load-balancer-cleanup finalizer: no controller has taken it on",
				"check that nephele runs service-lb-controller (`nephele migrate status`) and serves this class ("+classOrDefault(c.o.LoadBalancerClass)+")")
		case len(svc.Ingress) == 0:
			c.fail("services/load-balancer", obj, "no address in status.loadBalancer.ingress",
				"read nephele's events for it (`kubectl describe service`): the cloud may have refused its load balancer")
		}
	}
	if len(c.v.Results) == failed {
		text := fmt.Sprintf("all %d Services of type LoadBalancer of %s have the cleanup finalizer and an address", served, classOrDefault(c.o.LoadBalancerClass))
		if other > 0 {
			text += fmt.Sprintf("; %d of other classes left to their controllers", other)
		}
		c.pass("services/load-balancer", "services", text)
	}
}

func classOrDefault(class string) string {
	if class == "" {
		return "the default class"
	}
	return "class " + class
}

func (c *checker) nepheleLease() {
	name := c.s.Namespace + "/" + c.leases.Nephele
	l, ok := c.s.Lease(c.leases.Nephele)
	switch {
	case !ok:
		c.fail("leases/nephele", "lease "+name, "does not exist: nephele has never led",
			"start nephele's cloud-controller-manager with --leader-elect-resource-name="+c.leases.Nephele+", or give this check its lease with --lease")
	case !l.Held(c.s.Time):
		c.fail("leases/nephele", "lease "+name, describeLease(l, c.s.Time)+": no nephele replica leads",
			"check that nephele's pods run and reach the apiserver")
	default:
		c.pass("leases/nephele", "lease "+name, "held by "+l.Holder)
	}
}

func (c *checker) migrationLease() {
	name := c.s.Namespace + "/" + c.leases.Migration
	l, ok := c.s.Lease(c.leases.Migration)
	if !ok {
		c.pass("leases/migration", "lease "+name, "gone")
		return
	}
	if !l.Held(c.s.Time) {
		c.pass("leases/migration", "lease "+name, describeLease(l, c.s.Time))
		return
	}
	if main, ok := c.s.Lease(c.leases.Nephele); ok && main.Holder == l.Holder {
		c.pass("leases/migration", "lease "+name, "held by nephele ("+l.Holder+", the holder of "+c.s.Namespace+"/"+c.leases.Nephele+")")
		return
	}
	who := "a component whose main lease is not visible"
	for _, other := range c.s.Leases {
		if other.Name != l.Name && other.Holder == l.Holder {
			who = "the holder of " + other.String()
		}
	}
	c.fail("leases/migration", "lease "+name, fmt.Sprintf("held by %s (%s), not by nephele: it still runs the migrated controllers", l.Holder, who),
		"finish the move's step that stops the old component (`nephele migrate plan`)")
}

func (c *checker) oldComponent() {
	failed := len(c.v.Results)
	if c.o.From == "" || c.o.From == FromKubeControllerManager {
		for _, comp := range c.s.Components {
			if comp.Kind != KubeControllerManager && comp.Kind != KubeAPIServer {
				continue
			}
			if p, ok := comp.Args.Get("cloud-provider"); ok && p != "" && p != "external" {
				fix := "restart it with --cloud-provider=external and without --cloud-config"
				if comp.Kind == KubeAPIServer {
					fix = "restart it without --cloud-provider and --cloud-config"
				}
				c.fail("old-component", comp.Workload, fmt.Sprintf("%s still runs with the in-tree --cloud-provider=%s", comp.Kind, p), fix)
			}
		}
	}
	if c.o.From == "" || c.o.From == FromCloudControllerManager {
		for _, l := range c.s.Leases {
			old := l.Name == c.leases.Old || c.leases.Old == "" && strings.Contains(l.Name, "cloud-controller-manager")
			if !old || l.Name == c.leases.Nephele || l.Name == c.leases.Migration || !l.Held(c.s.Time) {
				continue
			}
			c.fail("old-component", "lease "+l.String(), fmt.Sprintf("held by %s, renewed %s ago: the old cloud-controller-manager still leads", l.Holder, age(c.s.Time.Sub(l.RenewTime))),
				"scale the old cloud-controller-manager to zero replicas")
		}
		// A workload of the old cloud-controller-manager is no failure by itself: it may
		// be kept scaled to zero for a rollback. Its lease says whether it leads.
	}
	if len(c.v.Results) == failed {
		c.pass("old-component", string(c.fromOrAny()), "holds nothing")
	}
}

func (c *checker) fromOrAny() Source {
	if c.o.From == "" {
		return "kube-controller-manager and other cloud-controller-managers"
	}
	return c.o.From
}

func initialized(nodes []Node) int {
	n := 0
	for _, node := range nodes {
		if !node.Uninitialized {
			n++
		}
	}
	return n
}
