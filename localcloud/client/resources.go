package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/nephele-dev/nephele/localcloud/api"
)

// maxPages bounds ListAllInstances, so a server handing out tokens forever cannot
// keep a caller looping.
const maxPages = 1 << 20

// CreateInstance creates an instance: a record, or with spec.Kind api.InstanceHost a
// real host on the cloud's machine, booted when the call returns.
func (c *Client) CreateInstance(ctx context.Context, spec api.InstanceSpec) (*api.Instance, error) {
	var out api.Instance
	if err := c.do(ctx, http.MethodPost, "/v1/instances", nil, spec, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetInstance returns the instance with the given ID; an error wrapping
// cloud.ErrNotFound means the cloud says it does not exist.
func (c *Client) GetInstance(ctx context.Context, id string) (*api.Instance, error) {
	var out api.Instance
	if err := c.do(ctx, http.MethodGet, "/v1/instances/"+seg(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetInstanceByName returns the instance with the given name (a Node name); an error
// wrapping cloud.ErrNotFound means the cloud says there is none.
func (c *Client) GetInstanceByName(ctx context.Context, name string) (*api.Instance, error) {
	var out api.Instance
	if err := c.do(ctx, http.MethodGet, "/v1/instances/by-name/"+seg(name), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListOptions select a page of an instance listing.
type ListOptions struct {
	// Limit is the page size; 0 takes the server's default (100), at most 1000.
	Limit int
	// PageToken continues a listing from a previous page's NextPageToken.
	PageToken string
}

// ListInstances returns one page of instances, in ID (creation) order.
func (c *Client) ListInstances(ctx context.Context, opts ListOptions) (*api.InstanceList, error) {
	q := url.Values{}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.PageToken != "" {
		q.Set("pageToken", opts.PageToken)
	}
	var out api.InstanceList
	if err := c.do(ctx, http.MethodGet, "/v1/instances", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListAllInstances lists every instance, following page tokens with pages of pageSize
// (0 for the server's default). Any failed page fails the whole listing: a partial
// list would make the missing instances look gone.
func (c *Client) ListAllInstances(ctx context.Context, pageSize int) ([]api.Instance, error) {
	var all []api.Instance
	seen := map[string]bool{}
	opts := ListOptions{Limit: pageSize}
	for page := 1; ; page++ {
		if page > maxPages {
			return nil, fmt.Errorf("local cloud: listing instances: more than %d pages", maxPages)
		}
		list, err := c.ListInstances(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("local cloud: listing instances, page %d: %w", page, err)
		}
		all = append(all, list.Items...)
		if list.NextPageToken == "" {
			return all, nil
		}
		if seen[list.NextPageToken] {
			return nil, fmt.Errorf("local cloud: listing instances, page %d: the server repeated page token %q", page, list.NextPageToken)
		}
		seen[list.NextPageToken] = true
		opts.PageToken = list.NextPageToken
	}
}

func (c *Client) instanceAction(ctx context.Context, id, action string) (*api.Instance, error) {
	var out api.Instance
	if err := c.do(ctx, http.MethodPost, "/v1/instances/"+seg(id)+"/"+action, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// StopInstance stops a running instance; stopping a stopped one succeeds.
func (c *Client) StopInstance(ctx context.Context, id string) (*api.Instance, error) {
	return c.instanceAction(ctx, id, "stop")
}

// StartInstance starts a stopped instance; starting a running one succeeds.
func (c *Client) StartInstance(ctx context.Context, id string) (*api.Instance, error) {
	return c.instanceAction(ctx, id, "start")
}

// TerminateInstance terminates an instance. It stays listed, terminated, until deleted.
func (c *Client) TerminateInstance(ctx context.Context, id string) (*api.Instance, error) {
	return c.instanceAction(ctx, id, "terminate")
}

// DeleteInstance removes an instance; afterwards it is not found.
func (c *Client) DeleteInstance(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/instances/"+seg(id), nil, nil, nil)
}

// Console returns the end of a host instance's boot log: at most tailBytes bytes (0 for
// the server's default, 64 KiB). Asking for a record's console is a 409 *Error.
func (c *Client) Console(ctx context.Context, id string, tailBytes int) (*api.ConsoleOutput, error) {
	q := url.Values{}
	if tailBytes > 0 {
		q.Set("tailBytes", strconv.Itoa(tailBytes))
	}
	var out api.ConsoleOutput
	if err := c.do(ctx, http.MethodGet, "/v1/consoles/"+seg(id), q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EnsureLoadBalancer creates the named load balancer or updates it to spec, and
// returns it with its VIP (without its backends for a client made WithMinimalAnswers). A port already in use on the VIP fails with a 409 *Error
// and changes nothing.
func (c *Client) EnsureLoadBalancer(ctx context.Context, name string, spec api.LoadBalancerSpec) (*api.LoadBalancer, error) {
	var out api.LoadBalancer
	if err := c.doWith(ctx, http.MethodPut, "/v1/loadbalancers/"+seg(name), nil, c.writeHeader(), spec, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// writeHeader is the extra headers of a load balancer write.
func (c *Client) writeHeader() http.Header {
	if !c.minimal {
		return nil
	}
	return http.Header{"Prefer": {"return=minimal"}}
}

// UpdateLoadBalancerBackends sets the backends of an existing load balancer.
func (c *Client) UpdateLoadBalancerBackends(ctx context.Context, name string, backends []api.Backend) (*api.LoadBalancer, error) {
	if backends == nil {
		backends = []api.Backend{}
	}
	var out api.LoadBalancer
	if err := c.doWith(ctx, http.MethodPut, "/v1/loadbalancers/"+seg(name)+"/backends", nil, c.writeHeader(), api.BackendsUpdate{Backends: backends}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetLoadBalancer returns the named load balancer with its backends' health.
func (c *Client) GetLoadBalancer(ctx context.Context, name string) (*api.LoadBalancer, error) {
	var out api.LoadBalancer
	if err := c.do(ctx, http.MethodGet, "/v1/loadbalancers/"+seg(name), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListLoadBalancers returns the load balancers of cluster, or all when cluster is "".
func (c *Client) ListLoadBalancers(ctx context.Context, cluster string) ([]api.LoadBalancer, error) {
	q := url.Values{}
	if cluster != "" {
		q.Set("cluster", cluster)
	}
	var out api.LoadBalancerList
	if err := c.do(ctx, http.MethodGet, "/v1/loadbalancers", q, nil, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// DeleteLoadBalancer deletes the named load balancer; its listeners close. Deleting
// one that does not exist returns an error wrapping cloud.ErrNotFound.
func (c *Client) DeleteLoadBalancer(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/loadbalancers/"+seg(name), nil, nil, nil)
}

func routesPath(cluster string) string { return "/v1/clusters/" + seg(cluster) + "/routes" }

// ListRoutes returns the routes of cluster.
func (c *Client) ListRoutes(ctx context.Context, cluster string) ([]api.Route, error) {
	var out api.RouteList
	if err := c.do(ctx, http.MethodGet, routesPath(cluster), nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// CreateRoute creates a route in cluster. Creating a route that exists with the same
// destination and target returns the existing one.
func (c *Client) CreateRoute(ctx context.Context, cluster string, spec api.RouteSpec) (*api.Route, error) {
	var out api.Route
	if err := c.do(ctx, http.MethodPost, routesPath(cluster), nil, spec, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteRoute deletes the named route of cluster. Deleting one that does not exist
// returns an error wrapping cloud.ErrNotFound.
func (c *Client) DeleteRoute(ctx context.Context, cluster, name string) error {
	return c.do(ctx, http.MethodDelete, routesPath(cluster)+"/"+seg(name), nil, nil, nil)
}

// ApplyRoutes applies route deletions and creations in cluster in one call, all or
// none (api.RouteChanges), and returns the created routes in the order of
// changes.Create.
func (c *Client) ApplyRoutes(ctx context.Context, cluster string, changes api.RouteChanges) ([]api.Route, error) {
	var out api.RouteList
	if err := c.do(ctx, http.MethodPost, "/v1/clusters/"+seg(cluster)+"/routechanges", nil, changes, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// Faults returns the fault rules in force.
func (c *Client) Faults(ctx context.Context) ([]api.Fault, error) {
	var out api.FaultList
	if err := c.do(ctx, http.MethodGet, "/admin/faults", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Faults, nil
}

// SetFaults replaces every fault rule.
func (c *Client) SetFaults(ctx context.Context, faults []api.Fault) error {
	if faults == nil {
		faults = []api.Fault{}
	}
	return c.do(ctx, http.MethodPut, "/admin/faults", nil, api.FaultList{Faults: faults}, nil)
}

// PutFault adds the rule or replaces the rule with the same operation pattern.
func (c *Client) PutFault(ctx context.Context, f api.Fault) error {
	return c.do(ctx, http.MethodPut, "/admin/faults/"+seg(f.Operation), nil, f, nil)
}

// DeleteFault removes the rule for an operation pattern.
func (c *Client) DeleteFault(ctx context.Context, operation string) error {
	return c.do(ctx, http.MethodDelete, "/admin/faults/"+seg(operation), nil, nil, nil)
}

// ClearFaults removes every fault rule.
func (c *Client) ClearFaults(ctx context.Context) error {
	return c.do(ctx, http.MethodDelete, "/admin/faults", nil, nil, nil)
}
