package api

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"path"
	"sort"
	"strings"
	"time"
)

// FieldError reports an invalid request field. Field is a path into the request,
// such as "spec.ports[0].protocol" or "backends[2].address".
type FieldError struct {
	Field   string
	Message string
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Length limits. Names follow Kubernetes' limits for the objects they mirror.
const (
	maxNameLen  = 253
	maxTokenLen = 63
	maxLabelKey = 317
	maxLabelVal = 63
	// maxFaultCost bounds Fault.Cost: a call costing more tokens than that is an outage.
	maxFaultCost = 10000
)

// ValidateName checks an instance name (a Node name: a lower-case DNS subdomain).
func ValidateName(field, name string) error {
	if name == "" {
		return fieldErr(field, "required")
	}
	if len(name) > maxNameLen {
		return fieldErr(field, "%d characters, at most %d allowed", len(name), maxNameLen)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || (r == '-' || r == '.') && i > 0 && i < len(name)-1
		if !ok {
			return fieldErr(field, "%q: want lower-case letters, digits, '-' and '.', starting and ending with a letter or digit", name)
		}
	}
	return nil
}

// ValidateObjectName checks a load balancer, route or cluster name: letters, digits,
// '-', '_' and '.', starting with a letter or digit, at most 253 characters. Such
// names are safe in URL paths.
func ValidateObjectName(field, name string) error {
	if name == "" {
		return fieldErr(field, "required")
	}
	if len(name) > maxNameLen {
		return fieldErr(field, "%d characters, at most %d allowed", len(name), maxNameLen)
	}
	for i, r := range name {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || r != '-' && r != '_' && r != '.') {
			return fieldErr(field, "%q: want letters, digits, '-', '_' and '.', starting with a letter or digit", name)
		}
	}
	return nil
}

// validateToken checks a zone, region or instance type: empty (the default) or a short
// name of letters, digits, '-', '_' and '.'.
func validateToken(field, v string) error {
	if v == "" {
		return nil
	}
	if len(v) > maxTokenLen {
		return fieldErr(field, "%d characters, at most %d allowed", len(v), maxTokenLen)
	}
	return ValidateObjectName(field, v)
}

// Validate checks an instance create request. Fields are named under "spec.".
func (s *InstanceSpec) Validate() error {
	if err := ValidateName("spec.name", s.Name); err != nil {
		return err
	}
	if err := validateToken("spec.zone", s.Zone); err != nil {
		return err
	}
	if err := validateToken("spec.region", s.Region); err != nil {
		return err
	}
	if err := validateToken("spec.instanceType", s.InstanceType); err != nil {
		return err
	}
	for i, a := range s.Addresses {
		field := fmt.Sprintf("spec.addresses[%d]", i)
		switch a.Type {
		case AddressInternalIP, AddressExternalIP:
			if _, err := netip.ParseAddr(a.Address); err != nil {
				return fieldErr(field+".address", "%q is not an IP address", a.Address)
			}
		case AddressHostname, AddressInternalDNS, AddressExternalDNS:
			if a.Address == "" || len(a.Address) > maxNameLen || strings.ContainsAny(a.Address, " \t\r\n/") {
				return fieldErr(field+".address", "%q is not a host name", a.Address)
			}
		default:
			return fieldErr(field+".type", "%q: want one of InternalIP, ExternalIP, Hostname, InternalDNS, ExternalDNS", a.Type)
		}
	}
	if err := validateLabels("spec.labels", s.Labels); err != nil {
		return err
	}
	return s.validateHost()
}

// maxLabels bounds the labels of one object.
const maxLabels = 64

// validateLabels checks the labels of an instance or volume.
func validateLabels(field string, labels map[string]string) error {
	if len(labels) > maxLabels {
		return fieldErr(field, "%d labels, at most %d allowed", len(labels), maxLabels)
	}
	for k, v := range labels {
		f := fmt.Sprintf("%s[%q]", field, k)
		if k == "" || len(k) > maxLabelKey || strings.ContainsAny(k, " \t\r\n") {
			return fieldErr(f, "invalid label key")
		}
		if len(v) > maxLabelVal || strings.ContainsAny(v, " \t\r\n") {
			return fieldErr(f, "invalid label value %q", v)
		}
	}
	return nil
}

// Limits of a host's boot command, environment and private paths.
const (
	maxBootArgs     = 1024
	maxBootBytes    = 128 << 10
	maxEnv          = 256
	maxPrivatePaths = 64
	maxPathLen      = 4096
)

// reservedEnvPrefix starts the names of the environment variables the cloud sets.
const reservedEnvPrefix = "NEPHELE_"

// forbiddenPaths are the kernel's file systems: a private directory over them would
// break the host.
var forbiddenPaths = []string{"/proc", "/sys", "/dev"}

// validateHost checks the kind and the fields only hosts may have.
func (s *InstanceSpec) validateHost() error {
	switch s.Kind {
	case "", InstanceRecord:
		switch {
		case len(s.BootCommand) > 0:
			return fieldErr("spec.bootCommand", "only host instances boot a command; set spec.kind to %q", InstanceHost)
		case len(s.Env) > 0:
			return fieldErr("spec.env", "only host instances have a boot environment; set spec.kind to %q", InstanceHost)
		case len(s.PrivatePaths) > 0:
			return fieldErr("spec.privatePaths", "only host instances have private paths; set spec.kind to %q", InstanceHost)
		}
		return nil
	case InstanceHost:
	default:
		return fieldErr("spec.kind", "%q: want %q (the default) or %q", s.Kind, InstanceRecord, InstanceHost)
	}
	for i, a := range s.Addresses {
		if a.Type == AddressInternalIP {
			return fieldErr(fmt.Sprintf("spec.addresses[%d].type", i), "the cloud assigns a host's InternalIP from its instance range; leave it out")
		}
	}
	if len(s.BootCommand) == 0 {
		return fieldErr("spec.bootCommand", "required for a host: the argv it runs when it boots")
	}
	if len(s.BootCommand) > maxBootArgs {
		return fieldErr("spec.bootCommand", "%d arguments, at most %d allowed", len(s.BootCommand), maxBootArgs)
	}
	size := 0
	for i, a := range s.BootCommand {
		field := fmt.Sprintf("spec.bootCommand[%d]", i)
		if i == 0 && a == "" {
			return fieldErr(field, "the program to run is empty")
		}
		if strings.ContainsRune(a, 0) {
			return fieldErr(field, "contains a NUL byte")
		}
		size += len(a)
	}
	if size > maxBootBytes {
		return fieldErr("spec.bootCommand", "%d bytes, at most %d allowed", size, maxBootBytes)
	}
	if len(s.Env) > maxEnv {
		return fieldErr("spec.env", "%d variables, at most %d allowed", len(s.Env), maxEnv)
	}
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		field := fmt.Sprintf("spec.env[%q]", k)
		if !envName(k) {
			return fieldErr(field, "not an environment variable name: want letters, digits and '_', not starting with a digit")
		}
		if strings.HasPrefix(k, reservedEnvPrefix) {
			return fieldErr(field, "names starting with %s are set by the cloud", reservedEnvPrefix)
		}
		if strings.ContainsRune(s.Env[k], 0) {
			return fieldErr(field, "the value contains a NUL byte")
		}
	}
	if len(s.PrivatePaths) > maxPrivatePaths {
		return fieldErr("spec.privatePaths", "%d paths, at most %d allowed", len(s.PrivatePaths), maxPrivatePaths)
	}
	seen := make(map[string]int, len(s.PrivatePaths))
	for i, p := range s.PrivatePaths {
		field := fmt.Sprintf("spec.privatePaths[%d]", i)
		switch {
		case !path.IsAbs(p) || path.Clean(p) != p || strings.ContainsRune(p, 0):
			return fieldErr(field, "%q: want a clean absolute path, such as /var/lib/kubelet", p)
		case p == "/":
			return fieldErr(field, "the root directory cannot be private")
		case len(p) > maxPathLen:
			return fieldErr(field, "%d characters, at most %d allowed", len(p), maxPathLen)
		}
		for _, f := range forbiddenPaths {
			if p == f || strings.HasPrefix(p, f+"/") {
				return fieldErr(field, "%q is in %s, a kernel file system", p, f)
			}
		}
		if j, dup := seen[p]; dup {
			return fieldErr(field, "%q is already spec.privatePaths[%d]", p, j)
		}
		seen[p] = i
	}
	return nil
}

// envName reports whether k is a portable environment variable name.
func envName(k string) bool {
	if k == "" {
		return false
	}
	for i, r := range k {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Validate checks a load balancer ensure request. Fields are named under "spec.".
// Whether RequestedIP lies in the server's VIP pool is for the server to check.
func (s *LoadBalancerSpec) Validate() error {
	if s.ClusterName != "" {
		if err := ValidateObjectName("spec.clusterName", s.ClusterName); err != nil {
			return err
		}
	}
	if len(s.Service) > 2*maxNameLen+1 {
		return fieldErr("spec.service", "too long")
	}
	if len(s.Ports) == 0 {
		return fieldErr("spec.ports", "at least one port is required")
	}
	if len(s.Ports) > MaxLoadBalancerPorts {
		return fieldErr("spec.ports", "%d ports: a load balancer takes at most %d", len(s.Ports), MaxLoadBalancerPorts)
	}
	if len(s.SourceRanges) > MaxSourceRanges {
		return fieldErr("spec.sourceRanges", "%d ranges: a load balancer takes at most %d; merge adjacent ranges", len(s.SourceRanges), MaxSourceRanges)
	}
	type listener struct {
		proto Protocol
		port  int32
	}
	seen := make(map[listener]int, len(s.Ports))
	for i, p := range s.Ports {
		field := fmt.Sprintf("spec.ports[%d]", i)
		switch p.Protocol {
		case ProtocolTCP, ProtocolUDP:
		case "":
			return fieldErr(field+".protocol", "required: TCP or UDP")
		default:
			return fieldErr(field+".protocol", "%q is not supported by the local cloud: want TCP or UDP", p.Protocol)
		}
		if p.Port < 1 || p.Port > math.MaxUint16 {
			return fieldErr(field+".port", "%d: want 1-65535", p.Port)
		}
		// 0 is a Service without node ports; whether the data plane can serve it is
		// the server's to say.
		if p.NodePort < 0 || p.NodePort > math.MaxUint16 {
			return fieldErr(field+".nodePort", "%d: want 0-65535", p.NodePort)
		}
		if j, dup := seen[listener{p.Protocol, p.Port}]; dup {
			return fieldErr(field+".port", "%s %d is already spec.ports[%d]", p.Protocol, p.Port, j)
		}
		seen[listener{p.Protocol, p.Port}] = i
	}
	if err := ValidateBackends("spec.backends", s.Backends); err != nil {
		return err
	}
	if s.HealthCheckNodePort < 0 || s.HealthCheckNodePort > math.MaxUint16 {
		return fieldErr("spec.healthCheckNodePort", "%d: want 0 (none) or 1-65535", s.HealthCheckNodePort)
	}
	for i, r := range s.SourceRanges {
		if _, err := netip.ParsePrefix(r); err != nil {
			return fieldErr(fmt.Sprintf("spec.sourceRanges[%d]", i), "%q is not a CIDR", r)
		}
	}
	if s.RequestedIP != "" {
		if _, err := netip.ParseAddr(s.RequestedIP); err != nil {
			return fieldErr("spec.requestedIP", "%q is not an IP address", s.RequestedIP)
		}
	}
	switch s.SessionAffinity {
	case "", SessionAffinityNone:
		if s.SessionAffinityTimeoutSeconds != 0 {
			return fieldErr("spec.sessionAffinityTimeoutSeconds", "only with sessionAffinity %s", SessionAffinityClientIP)
		}
	case SessionAffinityClientIP:
		if t := s.SessionAffinityTimeoutSeconds; t < 0 || t > MaxSessionAffinityTimeoutSeconds {
			return fieldErr("spec.sessionAffinityTimeoutSeconds", "%d: want 0 (the default, %d) or 1-%d", t, DefaultSessionAffinityTimeoutSeconds, MaxSessionAffinityTimeoutSeconds)
		}
	default:
		return fieldErr("spec.sessionAffinity", "%q: want %s or %s", s.SessionAffinity, SessionAffinityNone, SessionAffinityClientIP)
	}
	return nil
}

// AffinityTimeout returns how long a client stays on its backend: 0 without ClientIP
// affinity, the default when the spec gives no timeout.
func (s *LoadBalancerSpec) AffinityTimeout() time.Duration {
	if s.SessionAffinity != SessionAffinityClientIP {
		return 0
	}
	secs := s.SessionAffinityTimeoutSeconds
	if secs == 0 {
		secs = DefaultSessionAffinityTimeoutSeconds
	}
	return time.Duration(secs) * time.Second
}

// ValidateBackends checks a backend set named field ("spec.backends" or "backends").
func ValidateBackends(field string, backends []Backend) error {
	if len(backends) > MaxBackends {
		return fieldErr(field, "%d backends: a load balancer takes at most %d", len(backends), MaxBackends)
	}
	seen := make(map[string]int, len(backends))
	for i, b := range backends {
		f := fmt.Sprintf("%s[%d]", field, i)
		if err := ValidateName(f+".nodeName", b.NodeName); err != nil {
			return err
		}
		if j, dup := seen[b.NodeName]; dup {
			return fieldErr(f+".nodeName", "%q is already %s[%d]", b.NodeName, field, j)
		}
		seen[b.NodeName] = i
		if a, err := netip.ParseAddr(b.Address); err != nil || a.Zone() != "" {
			return fieldErr(f+".address", "%q is not an IP address", b.Address)
		}
	}
	return nil
}

// Validate checks a RouteChanges: at least one change and at most MaxRouteChanges,
// valid route names to delete, each creation as RouteSpec.Validate checks it (its
// fields named "create[i].…"), and no destination created twice.
func (c *RouteChanges) Validate() error {
	n := len(c.Delete) + len(c.Create)
	switch {
	case n == 0:
		return fieldErr("changes", "no change: give routes to delete or to create")
	case n > MaxRouteChanges:
		return fieldErr("changes", "%d changes, at most %d in one call: split them", n, MaxRouteChanges)
	}
	for i, name := range c.Delete {
		if err := ValidateObjectName(fmt.Sprintf("delete[%d]", i), name); err != nil {
			return err
		}
	}
	seen := make(map[string]int, len(c.Create))
	for i := range c.Create {
		spec := &c.Create[i]
		if err := spec.Validate(); err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				return fieldErr(fmt.Sprintf("create[%d].%s", i, strings.TrimPrefix(fe.Field, "spec.")), "%s", fe.Message)
			}
			return fmt.Errorf("create[%d]: %w", i, err)
		}
		if j, dup := seen[spec.DestinationCIDR]; dup {
			return fieldErr(fmt.Sprintf("create[%d].destinationCIDR", i), "%s is also create[%d]'s destination: one destination has one route", spec.DestinationCIDR, j)
		}
		seen[spec.DestinationCIDR] = i
	}
	return nil
}

// Validate checks a route create request. Fields are named under "spec.".
func (s *RouteSpec) Validate() error {
	if s.Name != "" {
		if err := ValidateObjectName("spec.name", s.Name); err != nil {
			return err
		}
	}
	if s.DestinationCIDR == "" {
		return fieldErr("spec.destinationCIDR", "required")
	}
	p, err := netip.ParsePrefix(s.DestinationCIDR)
	if err != nil {
		return fieldErr("spec.destinationCIDR", "%q is not a CIDR", s.DestinationCIDR)
	}
	if p.Masked() != p {
		return fieldErr("spec.destinationCIDR", "%q has host bits set; did you mean %s?", s.DestinationCIDR, p.Masked())
	}
	if s.TargetNode == "" && s.TargetInstance == "" {
		return fieldErr("spec.targetNode", "targetNode or targetInstance is required")
	}
	if s.TargetNode != "" {
		if err := ValidateName("spec.targetNode", s.TargetNode); err != nil {
			return err
		}
	}
	if s.TargetInstance != "" {
		if err := ValidateObjectName("spec.targetInstance", s.TargetInstance); err != nil {
			return err
		}
	}
	return validateRouteAddresses(s.TargetNodeAddresses)
}

// maxRouteAddresses bounds the target node addresses a route stores.
const maxRouteAddresses = 64

// validateRouteAddresses checks a route's target node addresses for size only: the
// cloud stores them as the node lists them and routes by instance, so an address it
// would refuse on an instance must not cost a node its route.
func validateRouteAddresses(addrs []Address) error {
	if len(addrs) > maxRouteAddresses {
		return fieldErr("spec.targetNodeAddresses", "%d addresses, at most %d allowed", len(addrs), maxRouteAddresses)
	}
	for i, a := range addrs {
		field := fmt.Sprintf("spec.targetNodeAddresses[%d]", i)
		if a.Type == "" || len(a.Type) > maxTokenLen {
			return fieldErr(field+".type", "%q: want 1-%d characters", a.Type, maxTokenLen)
		}
		if a.Address == "" || len(a.Address) > maxNameLen {
			return fieldErr(field+".address", "%d characters: want 1-%d", len(a.Address), maxNameLen)
		}
	}
	return nil
}

// RouteName is the name a route gets when its create request names none: the
// destination with '.', ':' and '/' turned into '-', so one CIDR has one name.
func RouteName(destination netip.Prefix) string {
	return "r-" + strings.NewReplacer(".", "-", ":", "-", "/", "-").Replace(destination.String())
}

// Validate checks a fault rule named field (such as "faults[0]").
func (f *Fault) Validate(field string) error {
	if !ValidOperationPattern(f.Operation) {
		return fieldErr(field+".operation", "%q: want an operation name, \"<group>.*\" or \"*\"; operations: %s",
			f.Operation, strings.Join(Operations(), ", "))
	}
	if l := f.Latency; l != nil {
		if err := l.validate(field + ".latency"); err != nil {
			return err
		}
	}
	if math.IsNaN(f.ErrorRate) || f.ErrorRate < 0 || f.ErrorRate > 1 {
		return fieldErr(field+".errorRate", "%v: want a fraction from 0 to 1", f.ErrorRate)
	}
	if r := f.RateLimit; r != nil {
		if math.IsNaN(r.QPS) || math.IsInf(r.QPS, 0) || r.QPS <= 0 {
			return fieldErr(field+".rateLimit.qps", "%v: want a positive rate", r.QPS)
		}
		if r.Burst < 0 {
			return fieldErr(field+".rateLimit.burst", "%d: want 0 (one second's worth) or more", r.Burst)
		}
	}
	if f.Cost < 0 || f.Cost > maxFaultCost {
		return fieldErr(field+".cost", "%d: want 0 (one token) to %d tokens a call", f.Cost, maxFaultCost)
	}
	if f.InvisibleFor.Duration < 0 {
		return fieldErr(field+".invisibleFor", "%s: want a positive duration", f.InvisibleFor)
	}
	if f.InvisibleFor.Duration > 0 && f.Operation != "*" && !strings.HasPrefix(f.Operation, "instances.") {
		return fieldErr(field+".invisibleFor", "only instance operations can hide new instances, not %q", f.Operation)
	}
	if f.InvisibleFor.Duration > 0 && f.Operation == OpInstancesCreate {
		return fieldErr(field+".invisibleFor", "set it on the operations that read instances (e.g. instances.get, instances.list or instances.*), not on instances.create")
	}
	return nil
}

func (l *Latency) validate(field string) error {
	neg := func(name string, d Duration) error {
		if d.Duration < 0 {
			return fieldErr(field+"."+name, "%s: want a positive duration", d)
		}
		return nil
	}
	for _, c := range []struct {
		name string
		d    Duration
	}{{"fixed", l.Fixed}, {"min", l.Min}, {"max", l.Max}, {"mean", l.Mean}, {"stddev", l.StdDev}} {
		if err := neg(c.name, c.d); err != nil {
			return err
		}
	}
	switch l.Distribution {
	case "", DistributionFixed:
		if l.Min.Duration != 0 || l.Max.Duration != 0 || l.Mean.Duration != 0 || l.StdDev.Duration != 0 {
			return fieldErr(field, "a fixed latency takes only \"fixed\"")
		}
	case DistributionUniform:
		if l.Fixed.Duration != 0 || l.Mean.Duration != 0 || l.StdDev.Duration != 0 {
			return fieldErr(field, "a uniform latency takes only \"min\" and \"max\"")
		}
		if l.Max.Duration < l.Min.Duration {
			return fieldErr(field+".max", "%s is below min %s", l.Max, l.Min)
		}
	case DistributionNormal:
		if l.Fixed.Duration != 0 || l.Min.Duration != 0 || l.Max.Duration != 0 {
			return fieldErr(field, "a normal latency takes only \"mean\" and \"stddev\"")
		}
	default:
		return fieldErr(field+".distribution", "%q: want fixed, uniform or normal", l.Distribution)
	}
	return nil
}

// ValidateFaults checks a whole fault list: every rule, and at most one rule per
// operation pattern.
func ValidateFaults(faults []Fault) error {
	seen := make(map[string]int, len(faults))
	for i := range faults {
		field := fmt.Sprintf("faults[%d]", i)
		if err := faults[i].Validate(field); err != nil {
			return err
		}
		if j, dup := seen[faults[i].Operation]; dup {
			return fieldErr(field+".operation", "%q already has a rule, faults[%d]", faults[i].Operation, j)
		}
		seen[faults[i].Operation] = i
	}
	return nil
}
