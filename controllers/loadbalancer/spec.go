package loadbalancer

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nephele-dev/nephele/cloud"
)

// Finalizer is the finalizer the controller puts on a Service before it creates anything
// in the cloud, and removes only once the cloud load balancer is deleted.
const Finalizer = "service.kubernetes.io/load-balancer-cleanup"

// sourceRangesAnnotation is upstream's older way to restrict client addresses, read when
// spec.loadBalancerSourceRanges is empty.
const sourceRangesAnnotation = "service.beta.kubernetes.io/load-balancer-source-ranges"

// maxNameLength is the length upstream's DefaultLoadBalancerName truncates to; many
// clouds limit names to 32 characters.
const maxNameLength = 32

// LoadBalancerName returns the cloud name of the load balancer for svc: "a" followed by
// the Service's UID without dashes, at most 32 characters. It is upstream's
// DefaultLoadBalancerName, so a cluster moved from an in-tree or upstream CCM keeps its
// load balancers.
func LoadBalancerName(svc *corev1.Service) string {
	name := "a" + strings.ReplaceAll(string(svc.UID), "-", "")
	if len(name) > maxNameLength {
		name = name[:maxNameLength]
	}
	return name
}

// ClassAnnotation records on a Service which controller added its cleanup finalizer:
// the --load-balancer-class it serves, "" for the default. It goes on in the patch that
// adds the finalizer and comes off in the one that removes it, so it always says whose
// the finalizer is, which the Service itself stops saying when its type changes away
// from LoadBalancer: the apiserver then clears spec.loadBalancerClass, and the
// finalizer, which every implementation shares (KEP-1959), names nobody.
const ClassAnnotation = "loadbalancer.nephele.dev/class"

// classes are the Services whose load balancers a controller makes: those of its class,
// and, for the default controller, those without a class.
type classes struct {
	// class is --load-balancer-class, "" for none. ClassAnnotation records it: it
	// names the controller, whichever of its classes a Service has.
	class string
	// unclassed is whether Services without a class are served too: always when class
	// is "", and for the default cloud of a manager serving several.
	unclassed bool
}

// newClasses returns the classes of a controller of class that serves Services
// without a class when unclassed (or when class is "").
func newClasses(class string, unclassed bool) classes {
	return classes{class: class, unclassed: unclassed || class == ""}
}

// servesClass reports whether svc's spec.loadBalancerClass is one this controller
// serves: none when cls serves unclassed Services, cls.class when it has one.
func servesClass(svc *corev1.Service, cls classes) bool {
	if svc.Spec.LoadBalancerClass == nil {
		return cls.unclassed
	}
	return cls.class != "" && *svc.Spec.LoadBalancerClass == cls.class
}

// wantsLoadBalancer reports whether svc asks this controller for a load balancer:
// type LoadBalancer and a class this controller serves.
func wantsLoadBalancer(svc *corev1.Service, cls classes) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && servesClass(svc, cls)
}

// hasFinalizer reports whether svc carries the cleanup finalizer.
func hasFinalizer(svc *corev1.Service) bool {
	return slices.Contains(svc.Finalizers, Finalizer)
}

// className returns svc's load balancer class for messages, "(none)" when it has none.
func className(svc *corev1.Service) string {
	if svc.Spec.LoadBalancerClass == nil {
		return "(none)"
	}
	return *svc.Spec.LoadBalancerClass
}

// annotatedFor reports whether svc's ClassAnnotation names class.
func annotatedFor(svc *corev1.Service, class string) bool {
	v, ok := svc.Annotations[ClassAnnotation]
	return ok && v == class
}

// ownsFinalizer reports whether the cleanup finalizer on svc is this controller's to
// act on. held is whether this process has ensured a load balancer for svc (its UID).
//
// The finalizer is shared by every implementation of load balancers (KEP-1959), so it
// alone says nothing about who added it. For a LoadBalancer the class does: the
// apiserver refuses to change it while the type stays LoadBalancer, so it names the
// implementation the Service belongs to now. For any other type the apiserver has
// cleared the class, and only a record tells: this process's own, or ClassAnnotation.
// A finalizer without either was added by upstream's service controller or a nephele
// from before the annotation; upstream's default controller cleans such Services up,
// and so does the default class here, while a class controller cannot know and leaves
// them alone.
func ownsFinalizer(svc *corev1.Service, cls classes, held bool) bool {
	switch {
	case !hasFinalizer(svc):
		return false
	case svc.Spec.Type == corev1.ServiceTypeLoadBalancer:
		return servesClass(svc, cls)
	case held:
		return true
	}
	if v, ok := svc.Annotations[ClassAnnotation]; ok {
		// "" names the default controller, which the default cloud of a manager serving
		// several clouds is, whatever its own class.
		return v == cls.class || (v == "" && cls.unclassed)
	}
	return cls.unclassed
}

// needsCleanup reports whether the controller must delete svc's cloud load balancer,
// then clear its status and remove its finalizer: the finalizer is this controller's
// (see ownsFinalizer) and the Service is going away or no longer asks this controller
// for a load balancer.
func needsCleanup(svc *corev1.Service, cls classes, held bool) bool {
	return ownsFinalizer(svc, cls, held) && (svc.DeletionTimestamp != nil || !wantsLoadBalancer(svc, cls))
}

// movedAway reports whether svc is a LoadBalancer of another class for which this
// controller made a load balancer: its type went from LoadBalancer of this class to
// another type and back to LoadBalancer of another class (the only way a class can
// change) without this controller seeing the type in between. That load balancer is
// this controller's to delete; the finalizer and status are the new class's.
func movedAway(svc *corev1.Service, cls classes, held bool) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && !servesClass(svc, cls) && (held || annotatedFor(svc, cls.class))
}

// SourceRangeError reports a load balancer source range that does not parse. The
// Service needs fixing; no cloud call can help.
type SourceRangeError struct {
	// Range is the offending value.
	Range string
	// Field names where it came from.
	Field string
	// Err is the parse error.
	Err error
}

// Error implements error.
func (e *SourceRangeError) Error() string {
	return fmt.Sprintf("%s: %q is not a CIDR (want e.g. 203.0.113.0/24): %v", e.Field, e.Range, e.Err)
}

// Unwrap returns the parse error.
func (e *SourceRangeError) Unwrap() error { return e.Err }

// sourceRanges returns svc's allowed client prefixes: spec.loadBalancerSourceRanges, or
// when that is empty the upstream annotation. Nil allows every client.
func sourceRanges(svc *corev1.Service) ([]netip.Prefix, error) {
	values, field := svc.Spec.LoadBalancerSourceRanges, "spec.loadBalancerSourceRanges"
	if len(values) == 0 {
		if a := strings.TrimSpace(svc.Annotations[sourceRangesAnnotation]); a != "" {
			values, field = strings.Split(a, ","), "annotation "+sourceRangesAnnotation
		}
	}
	var out []netip.Prefix
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return nil, &SourceRangeError{Range: v, Field: field, Err: err}
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// buildSpec returns the normalized load balancer spec for svc without backends. It fails
// only with a *SourceRangeError.
func buildSpec(svc *corev1.Service, clusterName string) (*cloud.LoadBalancerSpec, error) {
	ranges, err := sourceRanges(svc)
	if err != nil {
		return nil, err
	}
	spec := &cloud.LoadBalancerSpec{
		Name:                  LoadBalancerName(svc),
		ClusterName:           clusterName,
		Service:               types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name},
		ExternalTrafficPolicy: svc.Spec.ExternalTrafficPolicy,
		SourceRanges:          ranges,
		IPFamilies:            slices.Clone(svc.Spec.IPFamilies),
		RequestedIP:           svc.Spec.LoadBalancerIP,
	}
	if spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		spec.HealthCheckNodePort = svc.Spec.HealthCheckNodePort
	}
	spec.SessionAffinity, spec.SessionAffinityTimeout = sessionAffinity(svc)
	spec.Ports = make([]cloud.LoadBalancerPort, 0, len(svc.Spec.Ports))
	for _, p := range svc.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		var appProtocol string
		if p.AppProtocol != nil {
			appProtocol = *p.AppProtocol
		}
		spec.Ports = append(spec.Ports, cloud.LoadBalancerPort{
			Name: p.Name, Protocol: proto, Port: p.Port, NodePort: p.NodePort,
			TargetPort: p.TargetPort, AppProtocol: appProtocol,
		})
	}
	return spec, nil
}

// sessionAffinity returns svc's session affinity and, with ClientIP, its timeout
// (Kubernetes' default when the Service gives none; the API server defaults it too, but
// a Service from a client that skipped defaulting must not pin clients forever).
func sessionAffinity(svc *corev1.Service) (corev1.ServiceAffinity, time.Duration) {
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
		return corev1.ServiceAffinityNone, 0
	}
	secs := corev1.DefaultClientIPServiceAffinitySeconds
	if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil && *c.ClientIP.TimeoutSeconds > 0 {
		secs = *c.ClientIP.TimeoutSeconds
	}
	return corev1.ServiceAffinityClientIP, time.Duration(secs) * time.Second
}

// cleanupSpec returns a spec good enough to delete svc's load balancer: the name and the
// Service, plus whatever else parses. Deleting must not depend on the Service being valid.
func cleanupSpec(svc *corev1.Service, clusterName string) *cloud.LoadBalancerSpec {
	if spec, err := buildSpec(svc, clusterName); err == nil {
		return spec
	}
	return &cloud.LoadBalancerSpec{
		Name:        LoadBalancerName(svc),
		ClusterName: clusterName,
		Service:     types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name},
	}
}

// specKey returns a canonical encoding of everything that, when it changes, needs a full
// EnsureLoadBalancer rather than a backend update: the spec without its backends, and the
// Service fields and annotations providers may read. Equal keys mean equal inputs.
func specKey(spec *cloud.LoadBalancerSpec, svc *corev1.Service) string {
	key := struct {
		UID                   types.UID
		Spec                  *cloud.LoadBalancerSpec
		Annotations           map[string]string
		SessionAffinity       corev1.ServiceAffinity
		SessionAffinityConfig *corev1.SessionAffinityConfig
		ExternalIPs           []string
		IPFamilyPolicy        *corev1.IPFamilyPolicy
		AllocateNodePorts     *bool
	}{
		UID:                   svc.UID,
		Annotations:           svc.Annotations,
		SessionAffinity:       svc.Spec.SessionAffinity,
		SessionAffinityConfig: svc.Spec.SessionAffinityConfig,
		ExternalIPs:           svc.Spec.ExternalIPs,
		IPFamilyPolicy:        svc.Spec.IPFamilyPolicy,
		AllocateNodePorts:     svc.Spec.AllocateLoadBalancerNodePorts,
	}
	// Backends are not part of the key: they are compared by their own hash.
	withoutBackends := *spec
	withoutBackends.Backends = nil
	key.Spec = &withoutBackends
	b, err := json.Marshal(key)
	if err != nil {
		// Every field above marshals, so this cannot happen; an empty key never
		// matches (see specUnchanged), which only costs an extra EnsureLoadBalancer.
		return ""
	}
	return string(b)
}

// specUnchanged reports whether a load balancer ensured with key applied is still right
// for a spec whose key is current.
func specUnchanged(applied, current string) bool {
	return applied != "" && applied == current
}
