package conformance

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"
)

// Clause describes one clause of the contract the suite checks.
type Clause struct {
	// ID names the clause, "<area>/<rule>", in reports and in Setup.Skip.
	ID string
	// Title says in a few words what the clause requires.
	Title string
	// Needs are the capabilities the provider must claim for the clause to apply.
	Needs []Capability
}

// clause is a Clause and its check.
type clause struct {
	Clause
	run func(c *checker)
}

// Clauses returns every clause, in the order the suite checks them.
func Clauses() []Clause {
	all := allClauses()
	out := make([]Clause, len(all))
	for i, c := range all {
		out[i] = c.Clause
	}
	return out
}

func clauseByID(id string) (Clause, bool) {
	for _, c := range allClauses() {
		if c.ID == id {
			return c.Clause, true
		}
	}
	return Clause{}, false
}

// allClauses lists the checks in run order. The order matters: instances are deleted
// last, after every check that needs them alive.
func allClauses() []clause {
	return []clause{
		{Clause{"provider/name", "ProviderName is a valid provider ID scheme", nil}, checkProviderName},
		{Clause{"provider/capabilities", "the provider reports exactly the capabilities it claims", nil}, checkCapabilities},

		{Clause{"instances/metadata-complete", "instance metadata is complete: provider ID of this provider, node name, type, zone, region, addresses, running", []Capability{Instances}}, checkMetadataComplete},
		{Clause{"instances/labels-valid", "extra labels are valid label pairs outside the kubernetes.io and k8s.io domains", []Capability{Instances}}, checkLabelsValid},
		{Clause{"instances/metadata-stable", "repeated lookups return the same metadata", []Capability{Instances}}, checkMetadataStable},
		{Clause{"instances/lookup-agree", "lookups by provider ID and by node name agree; the provider ID wins", []Capability{Instances}}, checkLookupAgree},
		{Clause{"instances/unknown-not-found", "a node name no instance has is NotFound", []Capability{Instances}}, checkUnknownNotFound},
		{Clause{"instances/stopped-not-gone", "a stopped instance is found (and listed), stopped or terminated, never NotFound", []Capability{Instances}}, checkStoppedNotGone},
		{Clause{"lister/complete", "the listing holds every instance once, as a per-instance lookup returns it", []Capability{InstanceLister}}, checkListerComplete},

		{Clause{"lb/get-missing-not-found", "a load balancer never ensured is NotFound", []Capability{LoadBalancers}}, checkLBGetMissing},
		{Clause{"lb/delete-missing", "deleting a load balancer that does not exist succeeds", []Capability{LoadBalancers}}, checkLBDeleteMissing},
		{Clause{"lb/ensure-status", "ensure returns a status with at least one valid ingress address", []Capability{LoadBalancers}}, checkLBEnsureStatus},
		{Clause{"lb/ensure-idempotent", "ensuring twice returns the same status", []Capability{LoadBalancers}}, checkLBEnsureIdempotent},
		{Clause{"lb/get-after-ensure", "get returns the addresses ensure returned", []Capability{LoadBalancers}}, checkLBGetAfterEnsure},
		{Clause{"lb/update-backends", "backend updates succeed, are idempotent and keep the load balancer's addresses", []Capability{LoadBalancers}}, checkLBUpdateBackends},
		{Clause{"lb/delete-idempotent", "deleting a load balancer twice succeeds", []Capability{LoadBalancers}}, checkLBDeleteIdempotent},
		{Clause{"lb/gone-after-delete", "a deleted load balancer is NotFound", []Capability{LoadBalancers}}, checkLBGoneAfterDelete},

		{Clause{"routes/create-list", "a created route is listed with its destination and target", []Capability{Routes}}, checkRouteCreateList},
		{Clause{"routes/create-idempotent", "creating an existing route succeeds and lists it once", []Capability{Routes}}, checkRouteCreateIdempotent},
		{Clause{"routes/cluster-scoped", "a cluster's routes are not listed for another cluster", []Capability{Routes}}, checkRouteClusterScoped},
		{Clause{"routes/delete-idempotent", "a deleted route is no longer listed; deleting it again succeeds", []Capability{Routes}}, checkRouteDeleteIdempotent},
		{Clause{"routes/batch", "routes that batch (cloud.RouteBatcher, optional) create, list once, delete and are idempotent in ApplyRoutes", []Capability{Routes}}, checkRouteBatch},

		{Clause{"context/canceled", "every call with a canceled context returns promptly with an error that is not NotFound", nil}, checkCanceled},
		{Clause{"errors/failing-not-not-found", "every call to a failing cloud returns an error, never NotFound", nil}, checkFailing},
		{Clause{"errors/throttled-retry-after", "every throttled call returns a Throttled error carrying Retry-After", nil}, checkThrottled},
		{Clause{"context/deadline", "every call to a slow cloud returns promptly at its deadline with an error that is not NotFound", nil}, checkDeadline},

		{Clause{"instances/deleted-not-found", "a deleted instance is NotFound by provider ID and by node name; other instances are unaffected", []Capability{Instances}}, checkDeletedNotFound},
		{Clause{"lister/deleted-absent", "a deleted instance is no longer listed", []Capability{InstanceLister}}, checkListerDeletedAbsent},
	}
}

// RunSuite runs every check against the provider setup describes and returns the
// report. It does not stop at the first failure. An invalid setup is an error; every
// problem with the provider is a failed check in the report.
func RunSuite(ctx context.Context, setup Setup) (*Report, error) {
	return RunClauses(ctx, setup, func(_ Clause, check func() Result) Result { return check() })
}

// ClauseRunner runs one clause's check for a front end of the suite, which may wrap it
// (cloudtest.Run runs it as a subtest) and must return its result.
type ClauseRunner func(cl Clause, check func() Result) Result

// RunClauses is the one implementation behind RunSuite and every other front end: it
// runs the suite, handing each clause's check to each, and returns the report.
func RunClauses(ctx context.Context, setup Setup, each ClauseRunner) (*Report, error) {
	cfg, err := resolve(setup)
	if err != nil {
		return nil, err
	}
	rep := &Report{Start: time.Now()}
	s := newSuite(cfg)
	defer func() { rep.Duration = time.Since(rep.Start) }()

	p, err := buildProvider(ctx, cfg)
	if err != nil {
		res := each(Clause{ID: "provider/new", Title: "the provider can be built"}, func() Result {
			return Result{Clause: "provider/new", Title: "the provider can be built", Status: Fail, Message: err.Error()}
		})
		rep.Results = append(rep.Results, res)
		if cfg.OnResult != nil {
			cfg.OnResult(res)
		}
		return rep, nil
	}
	s.setProvider(p)
	rep.Provider = s.name

	for _, cl := range allClauses() {
		res := each(cl.Clause, func() Result { return s.runClause(ctx, cl) })
		rep.Results = append(rep.Results, res)
		if cfg.OnResult != nil {
			cfg.OnResult(res)
		}
		if ctx.Err() != nil {
			break
		}
	}
	rep.Cleanup = s.cleanup(context.WithoutCancel(ctx))
	return rep, nil
}

// buildProvider calls NewProvider within the call timeout.
func buildProvider(ctx context.Context, cfg *config) (cloud.Provider, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
	defer cancel()
	p, err := within(ctx, cfg.CancelBound, cfg.NewProvider)
	switch {
	case err != nil:
		return nil, fmt.Errorf("NewProvider: %w", err)
	case p == nil:
		return nil, errors.New("NewProvider returned no provider and no error")
	}
	return p, nil
}

// suite is the state of one run: the provider, the instances, load balancers and
// routes the checks created, and names made up for this run.
type suite struct {
	cfg      *config
	provider cloud.Provider
	name     string

	instances cloud.Instances
	lister    cloud.InstanceLister
	lbs       cloud.LoadBalancers
	routes    cloud.Routes

	// fixtures are the test instances by key, created on first use.
	fixtures map[string]*fixture
	// lbNames and routeCIDRs name what the checks may have created, for cleanup.
	lbNames    []string
	routeCIDRs []netip.Prefix
	// seed makes this run's ports, CIDRs and UIDs.
	seed uint64
}

// fixture is one test instance.
type fixture struct {
	nodeName string
	// meta is the metadata by node name read right after creation.
	meta *cloud.Instance
	// err is why the instance or its first read failed; it is reported by every
	// check that needs the instance.
	err     error
	deleted bool
}

func newSuite(cfg *config) *suite {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return &suite{cfg: cfg, fixtures: map[string]*fixture{}, seed: binary.LittleEndian.Uint64(b[:])}
}

func (s *suite) setProvider(p cloud.Provider) {
	s.provider = p
	s.name = p.ProviderName()
	// Only claimed capabilities are tested; provider/capabilities reports mismatches.
	if in, ok := p.Instances(); ok && s.cfg.claims[Instances] {
		s.instances = in
	}
	if l, ok := p.InstanceLister(); ok && s.cfg.claims[InstanceLister] {
		s.lister = l
	}
	if l, ok := p.LoadBalancers(); ok && s.cfg.claims[LoadBalancers] {
		s.lbs = l
	}
	if r, ok := p.Routes(); ok && s.cfg.claims[Routes] {
		s.routes = r
	}
}

// runClause runs one check and turns what it recorded into a Result.
func (s *suite) runClause(ctx context.Context, cl clause) (res Result) {
	start := time.Now()
	res = Result{Clause: cl.ID, Title: cl.Title}
	defer func() { res.Duration = time.Since(start) }()
	if reason, ok := s.cfg.Skip[cl.ID]; ok {
		res.Status, res.Message = Skip, "skipped by the setup: "+reason
		return res
	}
	for _, need := range cl.Needs {
		if !s.cfg.claims[need] {
			res.Status, res.Message = Skip, fmt.Sprintf("the provider does not claim the %s capability", need)
			return res
		}
		if !s.has(need) {
			res.Status, res.Message = Fail, fmt.Sprintf("the provider claims the %s capability but does not report it", need)
			return res
		}
	}
	c := &checker{ctx: ctx, s: s}
	func() {
		defer func() {
			if r := recover(); r != nil {
				c.errorf("the check panicked (a provider call or the factory panicked?): %v", r)
			}
		}()
		cl.run(c)
	}()
	switch {
	case len(c.problems) > 0:
		res.Status, res.Message = Fail, strings.Join(c.problems, "\n")
	case c.skipped != "":
		res.Status, res.Message = Skip, c.skipped
	default:
		res.Status = Pass
	}
	return res
}

func (s *suite) has(c Capability) bool {
	switch c {
	case Instances:
		return s.instances != nil
	case InstanceLister:
		return s.lister != nil
	case LoadBalancers:
		return s.lbs != nil
	case Routes:
		return s.routes != nil
	}
	return false
}

// name returns a name unique to the run.
func (s *suite) nameFor(suffix string) string { return s.cfg.NamePrefix + "-" + suffix }

// rand returns a number derived from the run's seed and i, below n.
func (s *suite) rand(i, n uint64) uint64 {
	x := s.seed + i*0x9e3779b97f4a7c15
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 29
	return x % n
}

// fixture returns the test instance for key, creating it on first use. The returned
// fixture's err says why it is unusable.
func (s *suite) fixture(ctx context.Context, key string) *fixture {
	if f, ok := s.fixtures[key]; ok {
		return f
	}
	f := &fixture{}
	s.fixtures[key] = f
	if s.cfg.Instances == nil {
		f.err = errNoFactory
		return f
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	name, err := within(cctx, s.cfg.CancelBound, func(ctx context.Context) (string, error) {
		return s.cfg.Instances.CreateInstance(ctx, s.nameFor(key))
	})
	switch {
	case err != nil:
		f.err = fmt.Errorf("the instance factory could not create instance %q: %w", s.nameFor(key), err)
		return f
	case name == "":
		f.err = fmt.Errorf("the instance factory created instance %q but returned no node name", s.nameFor(key))
		return f
	}
	f.nodeName = name
	if s.instances == nil {
		return f
	}
	meta, err := within(cctx, s.cfg.CancelBound, func(ctx context.Context) (*cloud.Instance, error) {
		return s.instances.InstanceMetadata(ctx, nodeByName(name))
	})
	switch {
	case err != nil:
		f.err = fmt.Errorf("InstanceMetadata of new instance %s (by node name): %w", name, err)
	case meta == nil:
		f.err = fmt.Errorf("InstanceMetadata of new instance %s (by node name) returned neither an instance nor an error", name)
	default:
		f.meta = meta
	}
	return f
}

// errNoFactory is the reason instance checks are skipped without an InstanceFactory.
var errNoFactory = errors.New("the setup has no InstanceFactory to create test instances")

// backends returns the load balancer backends: the setup's, or the test instances'.
func (s *suite) backends(ctx context.Context) []cloud.Backend {
	if len(s.cfg.Backends) > 0 {
		return s.cfg.Backends
	}
	var out []cloud.Backend
	for _, key := range []string{"a", "b"} {
		f := s.fixture(ctx, key)
		if f.err != nil || f.meta == nil {
			continue
		}
		node := &corev1.Node{}
		node.Name = f.nodeName
		node.Spec.ProviderID = f.meta.ProviderID
		node.Status.Addresses = f.meta.Addresses
		out = append(out, cloud.Backend{NodeName: f.nodeName, ProviderID: f.meta.ProviderID, Addresses: f.meta.Addresses, Node: node})
	}
	return out
}

// routeTarget returns the node name test routes point at.
func (s *suite) routeTarget(ctx context.Context) string {
	if s.cfg.RouteTarget != "" {
		return s.cfg.RouteTarget
	}
	if f := s.fixture(ctx, "a"); f.err == nil {
		return f.nodeName
	}
	return s.nameFor("route-target")
}

// routeCIDR returns the i-th destination of this run, a /24 in 10.0.0.0/8.
func (s *suite) routeCIDR(i uint64) netip.Prefix {
	n := s.rand(100+i, 1<<16)
	p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(n >> 8), byte(n), 0}), 24)
	for _, known := range s.routeCIDRs {
		if known == p {
			return p
		}
	}
	s.routeCIDRs = append(s.routeCIDRs, p)
	return p
}

// cleanup removes what the run created and returns what it could not remove.
func (s *suite) cleanup(ctx context.Context) []string {
	var left []string
	call := func(what string, fn func(ctx context.Context) error) {
		cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
		defer cancel()
		_, err := within(cctx, s.cfg.CancelBound, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
		if err != nil && !cloud.IsNotFound(err) {
			left = append(left, fmt.Sprintf("%s: %v", what, err))
		}
	}
	if s.lbs != nil {
		for _, name := range s.lbNames {
			spec, svc := s.lbSpecNamed(name, nil)
			call("load balancer "+name, func(ctx context.Context) error { return s.lbs.EnsureLoadBalancerDeleted(ctx, spec, svc) })
		}
	}
	if s.routes != nil {
		for _, cidr := range s.routeCIDRs {
			route := cloud.Route{DestinationCIDR: cidr}
			call(fmt.Sprintf("route to %s in cluster %s", cidr, s.cfg.ClusterName), func(ctx context.Context) error {
				routes, err := s.routes.ListRoutes(ctx, s.cfg.ClusterName)
				if err != nil {
					return err
				}
				for _, r := range routes {
					if r.DestinationCIDR.Masked() == cidr {
						route = r
					}
				}
				return s.routes.DeleteRoute(ctx, s.cfg.ClusterName, route)
			})
		}
	}
	for _, key := range sortedKeys(s.fixtures) {
		f := s.fixtures[key]
		if f.nodeName == "" || f.deleted {
			continue
		}
		call("instance "+f.nodeName, func(ctx context.Context) error {
			err := s.cfg.Instances.DeleteInstance(ctx, f.nodeName)
			if cloud.IsNotImplemented(err) {
				return nil // the setup cannot delete instances; nothing is expected of it
			}
			return err
		})
	}
	return left
}

// hungError reports a call that had not returned a while after its context ended.
type hungError struct{ wait time.Duration }

func (e *hungError) Error() string {
	return fmt.Sprintf("the call had not returned %s after its context ended: it ignores its context", e.wait)
}

// isHung reports whether err is a *hungError.
func isHung(err error) bool {
	var h *hungError
	return errors.As(err, &h)
}

// within runs fn with ctx and waits for it until ctx has ended and then grace more.
// When fn has not returned by then it ignores its context: within returns a
// *hungError and abandons the call, whose goroutine ends whenever fn returns. A panic
// in fn is returned as an error.
func within[T any](ctx context.Context, grace time.Duration, fn func(context.Context) (T, error)) (T, error) {
	type outcome struct {
		v   T
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		var o outcome
		defer func() {
			if r := recover(); r != nil {
				o.err = fmt.Errorf("panic: %v", r)
			}
			done <- o
		}()
		o.v, o.err = fn(ctx)
	}()
	select {
	case o := <-done:
		return o.v, o.err
	case <-ctx.Done():
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case o := <-done:
		return o.v, o.err
	case <-t.C:
		var zero T
		return zero, &hungError{wait: grace}
	}
}

// sortedKeys returns the keys of m, sorted.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func nodeByName(name string) *corev1.Node {
	n := &corev1.Node{}
	n.Name = name
	return n
}

func nodeByProviderID(name, providerID string) *corev1.Node {
	n := nodeByName(name)
	n.Spec.ProviderID = providerID
	return n
}
