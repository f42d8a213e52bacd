package cloudtest

import "github.com/nephele-dev/nephele/cloud/conformance"

// The suite's own names, so that a provider's test imports this package alone. Each is
// package conformance's; see there.
type (
	Setup           = conformance.Setup
	Report          = conformance.Report
	Result          = conformance.Result
	Status          = conformance.Status
	Clause          = conformance.Clause
	Capability      = conformance.Capability
	Fault           = conformance.Fault
	Fixture         = conformance.Fixture
	FixtureProvider = conformance.FixtureProvider
	InstanceFactory = conformance.InstanceFactory
	InstanceFuncs   = conformance.InstanceFuncs
)

// Capabilities a provider claims (conformance's).
const (
	Instances      = conformance.Instances
	InstanceLister = conformance.InstanceLister
	LoadBalancers  = conformance.LoadBalancers
	Routes         = conformance.Routes
)

// Outcomes of a clause (conformance's).
const (
	Pass = conformance.Pass
	Fail = conformance.Fail
	Skip = conformance.Skip
)

// Defaults of Setup (conformance's).
const (
	DefaultClusterName = conformance.DefaultClusterName
	DefaultCallTimeout = conformance.DefaultCallTimeout
	DefaultCancelBound = conformance.DefaultCancelBound
	DefaultDeadline    = conformance.DefaultDeadline
)

// AllCapabilities returns every capability the suite checks (conformance's).
func AllCapabilities() []Capability { return conformance.AllCapabilities() }

// Clauses returns every clause of the suite, in the order it runs them (conformance's).
func Clauses() []Clause { return conformance.Clauses() }
