package examplecloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Instance states.
const (
	StateRunning = "running"
	StateStopped = "stopped"
)

// Instance is a virtual machine.
type Instance struct {
	// ID is the cloud's identifier, "vm-" and six digits, never reused.
	ID string `json:"id"`
	// Name is the machine's host name, which is also its Node's name.
	Name      string            `json:"name"`
	Zone      string            `json:"zone"`
	Type      string            `json:"type"`
	PrivateIP string            `json:"privateIP"`
	PublicIP  string            `json:"publicIP,omitempty"`
	Tags      map[string]string `json:"tags,omitempty"`
	State     string            `json:"state"`
	Created   time.Time         `json:"created"`
}

// InstanceSpec asks for a new instance. Empty Zone, Type and PrivateIP take defaults.
type InstanceSpec struct {
	Name      string            `json:"name"`
	Zone      string            `json:"zone,omitempty"`
	Type      string            `json:"type,omitempty"`
	PrivateIP string            `json:"privateIP,omitempty"`
	PublicIP  string            `json:"publicIP,omitempty"`
	Tags      map[string]string `json:"tags,omitempty"`
}

// Listener forwards a port of a load balancer's VIP to a port on every target.
type Listener struct {
	Protocol   string `json:"protocol"`
	Port       int32  `json:"port"`
	TargetPort int32  `json:"targetPort"`
}

// LoadBalancer is a load balancer with a VIP.
type LoadBalancer struct {
	Name      string     `json:"name"`
	Cluster   string     `json:"cluster"`
	VIP       string     `json:"vip"`
	Listeners []Listener `json:"listeners"`
	// Targets are the IP addresses traffic is forwarded to.
	Targets []string  `json:"targets"`
	Created time.Time `json:"created"`
}

// Route sends a destination CIDR to an instance.
type Route struct {
	Name        string `json:"name"`
	Cluster     string `json:"cluster"`
	Destination string `json:"destination"`
	// NextHop is the name of the instance traffic goes to.
	NextHop string `json:"nextHop"`
}

// APIError is an error answer of the cloud's API.
type APIError struct {
	// Code is the HTTP status the API answered: 400, 404, 409, 429, 500 or 503.
	Code    int
	Message string
	// RetryAfter is set on 429 answers.
	RetryAfter time.Duration
}

// Error implements error.
func (e *APIError) Error() string {
	return fmt.Sprintf("example cloud API: %d %s: %s", e.Code, http.StatusText(e.Code), e.Message)
}

func apiErr(code int, format string, args ...any) *APIError {
	return &APIError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Code returns the API status of err, or 0 when err is not an API answer.
func Code(err error) int {
	var e *APIError
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// Faults make the cloud misbehave, for tests.
type Faults struct {
	// Latency delays every call; a call whose context ends first returns its error.
	Latency time.Duration
	// Outage answers every call 503.
	Outage bool
	// Throttle, when positive, answers every call 429 asking to retry after it.
	Throttle time.Duration
}

// state is what the file holds.
type state struct {
	Region        string                   `json:"region"`
	NextID        int                      `json:"nextID"`
	Instances     map[string]*Instance     `json:"instances"`
	LoadBalancers map[string]*LoadBalancer `json:"loadBalancers"`
	Routes        map[string]*Route        `json:"routes"`
}

// Cloud is one region of the example cloud. It is safe for concurrent use. Only one
// process may use a state file at a time.
type Cloud struct {
	path   string
	region string

	mu     sync.Mutex
	st     state
	faults Faults
	calls  map[string]int
}

// Pools the cloud hands addresses out of: instances get 10.0.0.0/16, VIPs the
// documentation range 203.0.113.0/24.
var (
	instancePool = netip.MustParsePrefix("10.0.0.0/16")
	vipPool      = netip.MustParsePrefix("203.0.113.0/24")
)

// Open opens the region kept in the state file at path, creating it when missing.
// An empty path keeps the state in memory only. A state file the API could never have
// written (see state.check) is an error naming the file, the entry and the fix.
func Open(path, region string) (*Cloud, error) {
	if region == "" {
		return nil, errors.New("example cloud: the region is required")
	}
	c := &Cloud{path: path, region: region, st: state{
		Region:        region,
		Instances:     map[string]*Instance{},
		LoadBalancers: map[string]*LoadBalancer{},
		Routes:        map[string]*Route{},
	}}
	if path == "" {
		return c, nil
	}
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return c, c.save()
	case err != nil:
		return nil, fmt.Errorf("example cloud: reading the state: %w", err)
	}
	var st state
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("example cloud: state file %s: %w", path, err)
	}
	if st.Region != region {
		return nil, fmt.Errorf("example cloud: state file %s holds region %q, not %q", path, st.Region, region)
	}
	if err := st.check(); err != nil {
		return nil, fmt.Errorf("example cloud: state file %s: %w", path, err)
	}
	c.st = st
	return c, nil
}

// check returns an error for a state the API could never have written: a missing map,
// a null entry, an entry under another key than its ID or name, an instance ID not of
// the cloud's form, two instances with one name, or a nextID behind an instance ID
// (CreateInstance would then replace that instance). The error names the entry and the
// fix.
func (st *state) check() error {
	var missing string
	switch {
	case st.Instances == nil:
		missing = "instances"
	case st.LoadBalancers == nil:
		missing = "loadBalancers"
	case st.Routes == nil:
		missing = "routes"
	}
	if missing != "" {
		return fmt.Errorf("no %q object: add %q: {} for none", missing, missing)
	}
	if st.NextID < 0 {
		return fmt.Errorf("nextID %d is negative: set nextID to at least 0", st.NextID)
	}
	names := map[string]string{} // instance name -> ID
	for _, key := range slices.Sorted(maps.Keys(st.Instances)) {
		inst := st.Instances[key]
		switch {
		case inst == nil:
			return fmt.Errorf("instances[%q] is null: remove the entry or replace null with the instance", key)
		case inst.ID != key:
			return fmt.Errorf("instances[%q] has id %q: the key must equal the instance's id; fix the key or the id", key, inst.ID)
		}
		n, ok := instanceNumber(inst.ID)
		if !ok {
			return fmt.Errorf("instances[%q]: id %q is not \"vm-\" and digits (e.g. \"vm-000001\"): fix the id and the key", key, inst.ID)
		}
		if n > st.NextID {
			return fmt.Errorf("nextID %d is below the number of instances[%q], so CreateInstance would reuse that ID and replace the instance: set nextID to at least %d", st.NextID, key, n)
		}
		if other, dup := names[inst.Name]; dup {
			return fmt.Errorf("instances[%q] and instances[%q] have the same name %q: rename or remove one of them", other, key, inst.Name)
		}
		names[inst.Name] = key
	}
	for _, key := range slices.Sorted(maps.Keys(st.LoadBalancers)) {
		switch lb := st.LoadBalancers[key]; {
		case lb == nil:
			return fmt.Errorf("loadBalancers[%q] is null: remove the entry or replace null with the load balancer", key)
		case lb.Name != key:
			return fmt.Errorf("loadBalancers[%q] has name %q: the key must equal the load balancer's name; fix the key or the name", key, lb.Name)
		case key == "":
			return fmt.Errorf("loadBalancers[%q]: the name is empty: give the load balancer a name and use it as the key", key)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(st.Routes)) {
		switch r := st.Routes[key]; {
		case r == nil:
			return fmt.Errorf("routes[%q] is null: remove the entry or replace null with the route", key)
		case r.Name != key:
			return fmt.Errorf("routes[%q] has name %q: the key must equal the route's name; fix the key or the name", key, r.Name)
		case key == "":
			return fmt.Errorf("routes[%q]: the name is empty: give the route a name and use it as the key", key)
		}
	}
	return nil
}

// instanceNumber returns n of an instance ID "vm-<n>", and whether id has that form.
func instanceNumber(id string) (int, bool) {
	digits, ok := strings.CutPrefix(id, "vm-")
	if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil
}

// Region returns the cloud's region.
func (c *Cloud) Region() string { return c.region }

// SetFaults replaces the fault knobs.
func (c *Cloud) SetFaults(f Faults) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = f
}

// save writes the state through a temporary file, so that a crash never leaves half a
// file. Callers hold c.mu (or own c alone).
func (c *Cloud) save() error {
	if c.path == "" {
		return nil
	}
	raw, err := json.MarshalIndent(c.st, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), ".state-*")
	if err != nil {
		return fmt.Errorf("example cloud: writing the state: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(raw); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("example cloud: writing the state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("example cloud: writing the state: %w", err)
	}
	if err := os.Rename(tmp.Name(), c.path); err != nil {
		return fmt.Errorf("example cloud: writing the state: %w", err)
	}
	return nil
}

// Calls returns how many times each API method (by its name, "CreateRoute") has been
// called, failed calls included, for tests that count a provider's API calls.
func (c *Cloud) Calls() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.calls)
}

// do runs the API call method: the fault knobs, then fn under the lock, then a save
// when fn changed something. A failed save undoes nothing in memory but fails the call,
// as a cloud that could not commit would.
func (c *Cloud) do(ctx context.Context, method string, write bool, fn func() error) error {
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[method]++
	f := c.faults
	c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if f.Latency > 0 {
		t := time.NewTimer(f.Latency)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	switch {
	case f.Outage:
		return apiErr(http.StatusServiceUnavailable, "the region is unavailable")
	case f.Throttle > 0:
		e := apiErr(http.StatusTooManyRequests, "request rate exceeded")
		e.RetryAfter = f.Throttle
		return e
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := fn(); err != nil {
		return err
	}
	if write {
		return c.save()
	}
	return nil
}

// CreateInstance creates a running instance. A name in use is a 409.
func (c *Cloud) CreateInstance(ctx context.Context, spec InstanceSpec) (*Instance, error) {
	var out *Instance
	err := c.do(ctx, "CreateInstance", true, func() error {
		if spec.Name == "" {
			return apiErr(http.StatusBadRequest, "name is required")
		}
		if c.byName(spec.Name) != nil {
			return apiErr(http.StatusConflict, "an instance named %s exists", spec.Name)
		}
		c.st.NextID++
		inst := &Instance{
			ID: fmt.Sprintf("vm-%06d", c.st.NextID), Name: spec.Name, Zone: spec.Zone, Type: spec.Type,
			PrivateIP: spec.PrivateIP, PublicIP: spec.PublicIP, Tags: spec.Tags, State: StateRunning, Created: time.Now().UTC(),
		}
		if inst.Zone == "" {
			inst.Zone = c.region + "a"
		}
		if inst.Type == "" {
			inst.Type = "ex.small"
		}
		if inst.PrivateIP == "" {
			inst.PrivateIP = nthAddr(instancePool, c.st.NextID).String()
		}
		c.st.Instances[inst.ID] = inst
		out = copyInstance(inst)
		return nil
	})
	return out, err
}

// GetInstance returns the instance with id; 404 when there is none.
func (c *Cloud) GetInstance(ctx context.Context, id string) (*Instance, error) {
	var out *Instance
	err := c.do(ctx, "GetInstance", false, func() error {
		inst, ok := c.st.Instances[id]
		if !ok {
			return apiErr(http.StatusNotFound, "no instance %s", id)
		}
		out = copyInstance(inst)
		return nil
	})
	return out, err
}

// FindInstance returns the instance with host name name; 404 when there is none.
func (c *Cloud) FindInstance(ctx context.Context, name string) (*Instance, error) {
	var out *Instance
	err := c.do(ctx, "FindInstance", false, func() error {
		inst := c.byName(name)
		if inst == nil {
			return apiErr(http.StatusNotFound, "no instance named %s", name)
		}
		out = copyInstance(inst)
		return nil
	})
	return out, err
}

// ListInstances returns every instance, by ID.
func (c *Cloud) ListInstances(ctx context.Context) ([]Instance, error) {
	var out []Instance
	err := c.do(ctx, "ListInstances", false, func() error {
		for _, id := range slices.Sorted(maps.Keys(c.st.Instances)) {
			out = append(out, *copyInstance(c.st.Instances[id]))
		}
		return nil
	})
	return out, err
}

// StopInstance stops the instance with id; 404 when there is none.
func (c *Cloud) StopInstance(ctx context.Context, id string) error {
	return c.do(ctx, "StopInstance", true, func() error {
		inst, ok := c.st.Instances[id]
		if !ok {
			return apiErr(http.StatusNotFound, "no instance %s", id)
		}
		inst.State = StateStopped
		return nil
	})
}

// DeleteInstance deletes the instance with id; 404 when there is none.
func (c *Cloud) DeleteInstance(ctx context.Context, id string) error {
	return c.do(ctx, "DeleteInstance", true, func() error {
		if _, ok := c.st.Instances[id]; !ok {
			return apiErr(http.StatusNotFound, "no instance %s", id)
		}
		delete(c.st.Instances, id)
		return nil
	})
}

// PutLoadBalancer creates the load balancer lb.Name or replaces its listeners and
// targets. A new load balancer gets the lowest free VIP; an existing one keeps its own.
func (c *Cloud) PutLoadBalancer(ctx context.Context, lb LoadBalancer) (*LoadBalancer, error) {
	var out *LoadBalancer
	err := c.do(ctx, "PutLoadBalancer", true, func() error {
		if lb.Name == "" || len(lb.Listeners) == 0 {
			return apiErr(http.StatusBadRequest, "a load balancer needs a name and at least one listener")
		}
		for _, l := range lb.Listeners {
			if l.Protocol != "TCP" && l.Protocol != "UDP" {
				return apiErr(http.StatusBadRequest, "listener protocol %q: want TCP or UDP", l.Protocol)
			}
		}
		cur, ok := c.st.LoadBalancers[lb.Name]
		if !ok {
			vip, err := c.freeVIP()
			if err != nil {
				return err
			}
			cur = &LoadBalancer{Name: lb.Name, VIP: vip, Created: time.Now().UTC()}
			c.st.LoadBalancers[lb.Name] = cur
		}
		cur.Cluster = lb.Cluster
		cur.Listeners = append([]Listener(nil), lb.Listeners...)
		cur.Targets = append([]string(nil), lb.Targets...)
		out = copyLB(cur)
		return nil
	})
	return out, err
}

// GetLoadBalancer returns the load balancer name; 404 when there is none.
func (c *Cloud) GetLoadBalancer(ctx context.Context, name string) (*LoadBalancer, error) {
	var out *LoadBalancer
	err := c.do(ctx, "GetLoadBalancer", false, func() error {
		lb, ok := c.st.LoadBalancers[name]
		if !ok {
			return apiErr(http.StatusNotFound, "no load balancer %s", name)
		}
		out = copyLB(lb)
		return nil
	})
	return out, err
}

// SetTargets replaces the targets of load balancer name; 404 when there is none.
func (c *Cloud) SetTargets(ctx context.Context, name string, targets []string) error {
	return c.do(ctx, "SetTargets", true, func() error {
		lb, ok := c.st.LoadBalancers[name]
		if !ok {
			return apiErr(http.StatusNotFound, "no load balancer %s", name)
		}
		lb.Targets = append([]string(nil), targets...)
		return nil
	})
}

// DeleteLoadBalancer deletes load balancer name and frees its VIP; 404 when there is
// none.
func (c *Cloud) DeleteLoadBalancer(ctx context.Context, name string) error {
	return c.do(ctx, "DeleteLoadBalancer", true, func() error {
		if _, ok := c.st.LoadBalancers[name]; !ok {
			return apiErr(http.StatusNotFound, "no load balancer %s", name)
		}
		delete(c.st.LoadBalancers, name)
		return nil
	})
}

// ListRoutes returns the routes of cluster, by name.
func (c *Cloud) ListRoutes(ctx context.Context, cluster string) ([]Route, error) {
	var out []Route
	err := c.do(ctx, "ListRoutes", false, func() error {
		for _, name := range slices.Sorted(maps.Keys(c.st.Routes)) {
			if r := c.st.Routes[name]; r.Cluster == cluster {
				out = append(out, *r)
			}
		}
		return nil
	})
	return out, err
}

// CreateRoute creates r. A name in use, or a destination of the cluster already
// routed, is a 409; a next hop that is no instance is a 400.
func (c *Cloud) CreateRoute(ctx context.Context, r Route) error {
	return c.do(ctx, "CreateRoute", true, func() error {
		if _, err := netip.ParsePrefix(r.Destination); err != nil || r.Name == "" {
			return apiErr(http.StatusBadRequest, "a route needs a name and a destination CIDR")
		}
		if c.byName(r.NextHop) == nil {
			return apiErr(http.StatusBadRequest, "next hop %s is no instance", r.NextHop)
		}
		if _, ok := c.st.Routes[r.Name]; ok {
			return apiErr(http.StatusConflict, "route %s exists", r.Name)
		}
		for _, cur := range c.st.Routes {
			if cur.Cluster == r.Cluster && cur.Destination == r.Destination {
				return apiErr(http.StatusConflict, "destination %s is routed by %s", r.Destination, cur.Name)
			}
		}
		rc := r
		c.st.Routes[r.Name] = &rc
		return nil
	})
}

// DeleteRoute deletes route name; 404 when there is none.
func (c *Cloud) DeleteRoute(ctx context.Context, name string) error {
	return c.do(ctx, "DeleteRoute", true, func() error {
		if _, ok := c.st.Routes[name]; !ok {
			return apiErr(http.StatusNotFound, "no route %s", name)
		}
		delete(c.st.Routes, name)
		return nil
	})
}

// byName returns the instance with host name name, or nil. Callers hold c.mu.
func (c *Cloud) byName(name string) *Instance {
	for _, inst := range c.st.Instances {
		if inst.Name == name {
			return inst
		}
	}
	return nil
}

// freeVIP returns the lowest VIP no load balancer holds. Callers hold c.mu.
func (c *Cloud) freeVIP() (string, error) {
	used := map[string]bool{}
	for _, lb := range c.st.LoadBalancers {
		used[lb.VIP] = true
	}
	for a := vipPool.Addr().Next(); vipPool.Contains(a.Next()); a = a.Next() {
		if !used[a.String()] {
			return a.String(), nil
		}
	}
	return "", apiErr(http.StatusConflict, "no free VIP in %s", vipPool)
}

// nthAddr returns the n-th address of p (n from 1).
func nthAddr(p netip.Prefix, n int) netip.Addr {
	a := p.Addr()
	for range n {
		a = a.Next()
	}
	return a
}

func copyInstance(in *Instance) *Instance {
	out := *in
	out.Tags = maps.Clone(in.Tags)
	return &out
}

func copyLB(in *LoadBalancer) *LoadBalancer {
	out := *in
	out.Listeners = append([]Listener(nil), in.Listeners...)
	out.Targets = append([]string(nil), in.Targets...)
	return &out
}
