package handover

import (
	"slices"
	"strings"
	"time"
)

// DefaultNamespace is where controller managers keep their leases and where the control
// plane's workloads run.
const DefaultNamespace = "kube-system"

// Snapshot is what Survey read from the cluster at one time.
type Snapshot struct {
	// Time is when the survey was made, by the clock Survey was given.
	Time time.Time
	// Namespace is where the leases and workloads were read.
	Namespace string
	// Nodes are every Node, by name.
	Nodes []Node
	// Leases are the Leases in Namespace, by name, without kube-apiserver's identity
	// leases.
	Leases []Lease
	// Components are the control plane's components found among Namespace's
	// Deployments, DaemonSets and Pods.
	Components []Component
	// Services are the Services of type LoadBalancer in every namespace.
	Services []Service
	// Hidden names what could not be read (for lack of RBAC, say): a plan made without
	// it is based on leases alone.
	Hidden []string
}

// Node is what a handover needs of a Node.
type Node struct {
	Name       string
	ProviderID string
	// Uninitialized is whether the node carries node.cloudprovider.kubernetes.io/uninitialized.
	Uninitialized bool
	// TaintedSince is when the uninitialized taint was added, or when the Node was
	// created if the taint carries no time (the kubelet adds it at registration).
	TaintedSince time.Time
	// KubeletVersion is the node's reported kubelet version.
	KubeletVersion string
}

// Lease is a coordination.k8s.io Lease as leader election uses it.
type Lease struct {
	Namespace, Name string
	// Holder is the holder's identity; empty when released.
	Holder string
	// RenewTime is the holder's last renewal, by the holder's clock.
	RenewTime time.Time
	// Duration is the lease duration the holder wrote.
	Duration time.Duration
	// Transitions counts changes of holder.
	Transitions int32
}

// String returns namespace/name.
func (l Lease) String() string { return l.Namespace + "/" + l.Name }

// Held reports whether the lease has a holder whose last renewal is younger than the
// lease duration at now: that holder may be running what the lease guards. A lease
// without a holder, or whose holder has not renewed it within its duration, is stale.
// The renewal time is the holder's clock; clocks skewed by more than a lease
// duration make a stale lease look held (the safe mistake for a check).
func (l Lease) Held(now time.Time) bool {
	return l.Holder != "" && !l.RenewTime.IsZero() && now.Sub(l.RenewTime) < l.Duration
}

// Lease returns the named lease of the snapshot.
func (s *Snapshot) Lease(name string) (Lease, bool) {
	i := slices.IndexFunc(s.Leases, func(l Lease) bool { return l.Name == name })
	if i < 0 {
		return Lease{}, false
	}
	return s.Leases[i], true
}

// Service is what a handover needs of a Service of type LoadBalancer.
type Service struct {
	Namespace, Name string
	// Class is spec.loadBalancerClass; empty for the default class.
	Class string
	// Finalizer is whether the Service carries service.kubernetes.io/load-balancer-cleanup.
	Finalizer bool
	// Ingress are the addresses in status.loadBalancer.ingress.
	Ingress []string
	// DeletingSince is the deletion timestamp; zero unless the Service is being deleted.
	DeletingSince time.Time
}

// String returns namespace/name.
func (s Service) String() string { return s.Namespace + "/" + s.Name }

// ComponentKind says what a control plane component is.
type ComponentKind string

// The components a handover involves.
const (
	KubeAPIServer          ComponentKind = "kube-apiserver"
	KubeControllerManager  ComponentKind = "kube-controller-manager"
	CloudControllerManager ComponentKind = "cloud-controller-manager"
)

// Component is one control plane component found running (or set to run).
type Component struct {
	Kind ComponentKind
	// Nephele is whether it is nephele's cloud-controller-manager: its image, command or
	// labels say "nephele".
	Nephele bool
	// Workload names where it runs: "Deployment kube-system/x", "DaemonSet …", "static
	// Pod …" or "Pod …".
	Workload string
	// Container is the container's name.
	Container string
	// Image is the container image.
	Image string
	// Version is the image tag when it reads as a version ("v1.30.2"), else empty.
	Version string
	// Args are the flags on the container's command line.
	Args Args
}

// Name returns the component's kind, with "nephele" for nephele's.
func (c Component) Name() string {
	if c.Nephele {
		return "nephele " + string(c.Kind)
	}
	return string(c.Kind)
}

// Components returns the snapshot's components of kind.
func (s *Snapshot) ComponentsOf(kind ComponentKind) []Component {
	var out []Component
	for _, c := range s.Components {
		if c.Kind == kind {
			out = append(out, c)
		}
	}
	return out
}

// Args are a command line's flags in order. A flag given as --name with no value is
// "true"; one given twice keeps both, and Get returns the last, as pflag does.
type Args []Flag

// Flag is one --name=value.
type Flag struct {
	Name, Value string
}

// Get returns the value of the last --name.
func (a Args) Get(name string) (string, bool) {
	for i := len(a) - 1; i >= 0; i-- {
		if a[i].Name == name {
			return a[i].Value, true
		}
	}
	return "", false
}

// parseArgs reads the flags of a container's command and args. A shell wrapper
// ("sh -c 'exec binary --flag …'") is read through.
func parseArgs(command, args []string) Args {
	tokens := append(slices.Clone(command), args...)
	if len(tokens) >= 3 && isShell(tokens[0]) && tokens[1] == "-c" {
		tokens = strings.Fields(strings.Join(tokens[2:], " "))
	}
	var out Args
	for i := 0; i < len(tokens); i++ {
		tok := tokens[i]
		if !strings.HasPrefix(tok, "-") || tok == "-" || tok == "--" {
			continue
		}
		name := strings.TrimLeft(tok, "-")
		if n, v, ok := strings.Cut(name, "="); ok {
			out = append(out, Flag{Name: n, Value: v})
			continue
		}
		if i+1 < len(tokens) && !strings.HasPrefix(tokens[i+1], "-") {
			out = append(out, Flag{Name: name, Value: tokens[i+1]})
			i++
			continue
		}
		out = append(out, Flag{Name: name, Value: "true"})
	}
	return out
}

func isShell(s string) bool {
	base := s[strings.LastIndex(s, "/")+1:]
	return base == "sh" || base == "bash" || base == "ash" || base == "dash"
}
