package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nephele-dev/nephele/cloud"
)

// Capability names one capability of cloud.Provider.
type Capability string

// The capabilities a provider may claim.
const (
	Instances      Capability = "instances"
	InstanceLister Capability = "instance-lister"
	LoadBalancers  Capability = "load-balancers"
	Routes         Capability = "routes"
)

// AllCapabilities returns every capability, in the order of the contract.
func AllCapabilities() []Capability {
	return []Capability{Instances, InstanceLister, LoadBalancers, Routes}
}

// Defaults of Setup's optional fields.
const (
	// DefaultClusterName is the cluster name of load balancers and routes.
	DefaultClusterName = "cloudtest"
	// DefaultCallTimeout bounds one ordinary call to the provider.
	DefaultCallTimeout = 30 * time.Second
	// DefaultCancelBound is how long a call may take to return once its context has
	// ended.
	DefaultCancelBound = 5 * time.Second
	// DefaultDeadline is the deadline of the calls made while the cloud is slow.
	DefaultDeadline = 200 * time.Millisecond
)

// Setup describes the provider under test and what the suite may do to its cloud.
// Only NewProvider is required; each check that needs something the setup lacks is
// skipped, saying what is missing.
type Setup struct {
	// NewProvider builds the provider under test. It is called once per run.
	NewProvider func(ctx context.Context) (cloud.Provider, error)
	// Capabilities are the capabilities the provider claims. The suite fails when the
	// provider reports a claimed capability absent, or an unclaimed one present, and
	// tests only the claimed ones.
	Capabilities []Capability
	// ClusterName is the cluster name given to load balancers and routes; empty means
	// DefaultClusterName.
	ClusterName string
	// Instances creates, stops and deletes test instances in the cloud. Without it the
	// instance, listing and deletion checks are skipped.
	Instances InstanceFactory
	// Backends are the nodes put behind test load balancers. When empty, the suite
	// uses the instances it created (or no backends, without an InstanceFactory).
	Backends []cloud.Backend
	// RouteTarget is the node name test routes point at. When empty, the suite uses
	// an instance it created, or a made-up name without an InstanceFactory.
	RouteTarget string

	// Failing puts the cloud in a state where every call fails without anything being
	// gone: a provider built against a closed port, an outage knob, 5xx answers.
	Failing Fault
	// Throttling makes the cloud refuse every call with a rate-limit answer that says
	// how long to wait.
	Throttling Fault
	// Slow makes every call take far longer (seconds at least) than Deadline.
	Slow Fault

	// Skip names clauses the provider cannot support, each with the reason printed in
	// the report. Naming a clause that does not exist is an error.
	Skip map[string]string
	// NamePrefix starts the name of everything the suite creates; empty means "ct-"
	// and random hex digits, so that runs against a shared cloud do not collide. It
	// must be a lower-case DNS label of at most 30 characters.
	NamePrefix string
	// CallTimeout bounds one ordinary call; 0 means DefaultCallTimeout.
	CallTimeout time.Duration
	// CancelBound is how long a call may take to return after its context ended;
	// 0 means DefaultCancelBound.
	CancelBound time.Duration
	// Deadline is the deadline of calls made while the cloud is slow; 0 means
	// DefaultDeadline.
	Deadline time.Duration
	// OnResult, when set, is called with each result as soon as its check ends, so
	// that a tool can show progress.
	OnResult func(Result)
}

// Fixture is the part of a Setup that reaches into the cloud itself: how to make test
// instances and how to make the cloud misbehave.
type Fixture struct {
	Instances  InstanceFactory
	Failing    Fault
	Throttling Fault
	Slow       Fault
	// Skip names clauses the cloud cannot support, with the reasons.
	Skip map[string]string
}

// FixtureProvider is implemented, optionally, by a provider that can exercise its own
// cloud for the suite. Tools that run the suite against any provider compiled into
// them, such as `nephele conformance`, use it so that they need not know the cloud.
type FixtureProvider interface {
	// ConformanceFixture returns the fixture of the provider's cloud.
	ConformanceFixture(ctx context.Context) (Fixture, error)
}

// Use sets the setup's Instances, faults and skips from f. Fields f leaves empty keep
// the setup's values; f's skips are added to the setup's.
func (s *Setup) Use(f Fixture) {
	if f.Instances != nil {
		s.Instances = f.Instances
	}
	if f.Failing != nil {
		s.Failing = f.Failing
	}
	if f.Throttling != nil {
		s.Throttling = f.Throttling
	}
	if f.Slow != nil {
		s.Slow = f.Slow
	}
	if len(f.Skip) > 0 {
		skip := maps.Clone(s.Skip)
		if skip == nil {
			skip = map[string]string{}
		}
		maps.Copy(skip, f.Skip)
		s.Skip = skip
	}
}

// InstanceFactory makes and removes instances in the cloud for the suite. The suite
// calls it only with names it made up and node names CreateInstance returned.
type InstanceFactory interface {
	// CreateInstance creates a running instance and returns the name of the Node it
	// would back. nameHint is unique to the run and a valid Node name; the factory
	// should use it when the cloud lets it choose. The provider must see the
	// instance when CreateInstance returns.
	CreateInstance(ctx context.Context, nameHint string) (nodeName string, err error)
	// DeleteInstance deletes the instance, so that the cloud positively says it does
	// not exist. It returns an error wrapping cloud.ErrNotImplemented when the setup
	// cannot delete one instance alone.
	DeleteInstance(ctx context.Context, nodeName string) error
	// StopInstance shuts the instance down without deleting it. It returns an error
	// wrapping cloud.ErrNotImplemented when the cloud cannot stop instances.
	StopInstance(ctx context.Context, nodeName string) error
}

// InstanceFuncs is an InstanceFactory made of functions; a nil function answers with
// an error wrapping cloud.ErrNotImplemented, so the checks that need it are skipped.
type InstanceFuncs struct {
	Create func(ctx context.Context, nameHint string) (string, error)
	Delete func(ctx context.Context, nodeName string) error
	Stop   func(ctx context.Context, nodeName string) error
}

// CreateInstance implements InstanceFactory.
func (f InstanceFuncs) CreateInstance(ctx context.Context, nameHint string) (string, error) {
	if f.Create == nil {
		return "", fmt.Errorf("creating instances: %w", cloud.ErrNotImplemented)
	}
	return f.Create(ctx, nameHint)
}

// DeleteInstance implements InstanceFactory.
func (f InstanceFuncs) DeleteInstance(ctx context.Context, nodeName string) error {
	if f.Delete == nil {
		return fmt.Errorf("deleting instances: %w", cloud.ErrNotImplemented)
	}
	return f.Delete(ctx, nodeName)
}

// StopInstance implements InstanceFactory.
func (f InstanceFuncs) StopInstance(ctx context.Context, nodeName string) error {
	if f.Stop == nil {
		return fmt.Errorf("stopping instances: %w", cloud.ErrNotImplemented)
	}
	return f.Stop(ctx, nodeName)
}

// Fault puts the cloud in a failure mode. It returns a provider that sees the fault
// (the provider under test when the fault is a knob of the cloud, or a new provider
// built against a broken endpoint) and a function that ends the fault. The suite
// calls end before it goes on, also when the check failed and also when the Fault
// itself returns an error: a Fault that fails after changing the cloud returns the end
// that undoes the change with its error.
type Fault func(ctx context.Context, provider cloud.Provider) (faulty cloud.Provider, end func(context.Context) error, err error)

// config is a Setup with defaults applied and checked.
type config struct {
	Setup
	claims map[Capability]bool
}

// resolve checks s and fills in the defaults.
func resolve(s Setup) (*config, error) {
	var problems []error
	if s.NewProvider == nil {
		problems = append(problems, errors.New("NewProvider is required"))
	}
	claims := map[Capability]bool{}
	for _, c := range s.Capabilities {
		if !slices.Contains(AllCapabilities(), c) {
			problems = append(problems, fmt.Errorf("unknown capability %q: want one of %v", c, AllCapabilities()))
		}
		claims[c] = true
	}
	if claims[InstanceLister] && !claims[Instances] {
		problems = append(problems, errors.New("the instance-lister capability is claimed without instances: the manager needs per-instance lookups to confirm what a listing lacks"))
	}
	for id := range s.Skip {
		if _, ok := clauseByID(id); !ok {
			problems = append(problems, fmt.Errorf("the Skip field names unknown clause %q", id))
		}
	}
	if s.ClusterName == "" {
		s.ClusterName = DefaultClusterName
	}
	if s.NamePrefix == "" {
		b := make([]byte, 4)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("conformance: making a name prefix: %w", err)
		}
		s.NamePrefix = "ct-" + hex.EncodeToString(b)
	} else if err := checkPrefix(s.NamePrefix); err != nil {
		problems = append(problems, err)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"CallTimeout", &s.CallTimeout, DefaultCallTimeout},
		{"CancelBound", &s.CancelBound, DefaultCancelBound},
		{"Deadline", &s.Deadline, DefaultDeadline},
	} {
		switch {
		case *d.v < 0:
			problems = append(problems, fmt.Errorf("%s %s is negative", d.name, *d.v))
		case *d.v == 0:
			*d.v = d.def
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("conformance: invalid setup: %w", errors.Join(problems...))
	}
	return &config{Setup: s, claims: claims}, nil
}

// checkPrefix accepts a lower-case DNS label short enough to leave room for suffixes.
func checkPrefix(p string) error {
	if len(p) > 30 {
		return fmt.Errorf("NamePrefix %q is longer than 30 characters", p)
	}
	for i, r := range p {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' && i > 0 && i < len(p)-1
		if !ok {
			return fmt.Errorf("NamePrefix %q: want a lower-case DNS label (letters, digits, inner '-')", p)
		}
	}
	return nil
}
