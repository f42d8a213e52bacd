package server_test

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/server"
)

func TestInstanceLifecycle(t *testing.T) {
	c := startCloud(t, func(cfg *server.Config) { cfg.Zones = []string{"z1", "z2"} })
	cl := c.client

	a := must(cl.CreateInstance(ctx(), api.InstanceSpec{Name: "node-a"})).of(t)
	b := must(cl.CreateInstance(ctx(), api.InstanceSpec{Name: "node-b"})).of(t)
	custom := must(cl.CreateInstance(ctx(), api.InstanceSpec{
		Name: "node-c", Zone: "elsewhere", Region: "r2", InstanceType: "big",
		Addresses: []api.Address{{Type: api.AddressInternalIP, Address: "10.1.2.3"}, {Type: api.AddressExternalIP, Address: "192.0.2.1"}},
		Labels:    map[string]string{"example.com/role": "edge"},
	})).of(t)
	wantA := api.Instance{
		ID: "i-000000000001", Name: "node-a", Zone: "z1", Region: "local", InstanceType: "local.small", State: api.InstanceRunning,
		Addresses: []api.Address{{Type: api.AddressInternalIP, Address: "127.200.0.1"}, {Type: api.AddressHostname, Address: "node-a"}},
	}
	if a.ID != wantA.ID || a.Zone != wantA.Zone || a.Region != wantA.Region || a.InstanceType != wantA.InstanceType ||
		a.State != wantA.State || !slices.Equal(a.Addresses, wantA.Addresses) || a.CreatedAt.IsZero() {
		t.Fatalf("created %+v, want defaults like %+v", a, wantA)
	}
	if b.Zone != "z2" || b.Addresses[0].Address != "127.200.0.2" {
		t.Fatalf("second instance %+v: want zone z2 (round robin) and the next address", b)
	}
	if custom.Zone != "elsewhere" || custom.Region != "r2" || custom.InstanceType != "big" ||
		custom.Addresses[0].Address != "10.1.2.3" || custom.Labels["example.com/role"] != "edge" ||
		custom.Addresses[len(custom.Addresses)-1] != (api.Address{Type: api.AddressHostname, Address: "node-c"}) {
		t.Fatalf("overrides not kept: %+v", custom)
	}

	_, err := cl.CreateInstance(ctx(), api.InstanceSpec{Name: "node-a"})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != http.StatusConflict || ce.Reason != api.ReasonAlreadyExists {
		t.Fatalf("duplicate name: %v, want 409 AlreadyExists", err)
	}

	if got := must(cl.GetInstance(ctx(), a.ID)).of(t); got.Name != "node-a" {
		t.Fatalf("GetInstance = %+v", got)
	}
	if got := must(cl.GetInstanceByName(ctx(), "node-b")).of(t); got.ID != b.ID {
		t.Fatalf("GetInstanceByName = %+v", got)
	}
	if _, err := cl.GetInstanceByName(ctx(), "node-z"); !cloud.IsNotFound(err) {
		t.Fatalf("GetInstanceByName(unknown) = %v, want NotFound", err)
	}

	steps := []struct {
		name string
		do   func(id string) (*api.Instance, error)
		want api.InstanceState
		code int
	}{
		{name: "stop", do: func(id string) (*api.Instance, error) { return cl.StopInstance(ctx(), id) }, want: api.InstanceStopped},
		{name: "stop again", do: func(id string) (*api.Instance, error) { return cl.StopInstance(ctx(), id) }, want: api.InstanceStopped},
		{name: "start", do: func(id string) (*api.Instance, error) { return cl.StartInstance(ctx(), id) }, want: api.InstanceRunning},
		{name: "terminate", do: func(id string) (*api.Instance, error) { return cl.TerminateInstance(ctx(), id) }, want: api.InstanceTerminated},
		{name: "start terminated", do: func(id string) (*api.Instance, error) { return cl.StartInstance(ctx(), id) }, code: http.StatusConflict},
	}
	for _, s := range steps {
		got, err := s.do(a.ID)
		if s.code != 0 {
			if !errors.As(err, &ce) || ce.StatusCode != s.code {
				t.Fatalf("%s: %v, want status %d", s.name, err, s.code)
			}
			continue
		}
		if err != nil || got.State != s.want {
			t.Fatalf("%s: %+v, %v; want state %s", s.name, got, err, s.want)
		}
	}
	// Terminated instances are still listed, as terminated.
	if got := must(cl.GetInstance(ctx(), a.ID)).of(t); got.State != api.InstanceTerminated {
		t.Fatalf("terminated instance reads %s", got.State)
	}
	if err := cl.DeleteInstance(ctx(), a.ID); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"get":    func() error { _, err := cl.GetInstance(ctx(), a.ID); return err }(),
		"stop":   func() error { _, err := cl.StopInstance(ctx(), a.ID); return err }(),
		"delete": cl.DeleteInstance(ctx(), a.ID),
	} {
		if !cloud.IsNotFound(err) {
			t.Errorf("%s after delete: %v, want NotFound", name, err)
		}
	}
	all := must(cl.ListAllInstances(ctx(), 0)).of(t)
	if len(all) != 2 {
		t.Fatalf("instances after one delete: %d, want 2", len(all))
	}
}

func TestPagination(t *testing.T) {
	c := startCloud(t)
	const n = 250
	for i := range n {
		must(c.client.CreateInstance(ctx(), api.InstanceSpec{Name: fmt.Sprintf("node-%03d", i)})).of(t)
	}
	before := must(c.client.CallCounts(ctx())).of(t)
	first := must(c.client.ListAllInstances(ctx(), 100)).of(t)
	calls := must(c.client.CallCounts(ctx())).of(t).Since(before)
	if got := calls.Code(api.OpInstancesList, 200); got != 3 {
		t.Errorf("250 instances in pages of 100 took %d list calls, want 3", got)
	}
	if len(first) != n {
		t.Fatalf("listed %d instances, want %d", len(first), n)
	}
	seen := map[string]bool{}
	for i, inst := range first {
		if seen[inst.ID] {
			t.Fatalf("%s listed twice", inst.ID)
		}
		seen[inst.ID] = true
		if i > 0 && inst.ID <= first[i-1].ID {
			t.Fatalf("listing not in ID order at %d: %s after %s", i, inst.ID, first[i-1].ID)
		}
	}
	second := must(c.client.ListAllInstances(ctx(), 100)).of(t)
	for i := range first {
		if first[i].ID != second[i].ID {
			t.Fatalf("two listings differ at %d: %s vs %s", i, first[i].ID, second[i].ID)
		}
	}
	// Page by page, with the default page size.
	page := must(c.client.ListInstances(ctx(), client.ListOptions{})).of(t)
	if len(page.Items) != server.DefaultPageSize || page.NextPageToken == "" {
		t.Fatalf("default page: %d items, token %q", len(page.Items), page.NextPageToken)
	}
	last := must(c.client.ListInstances(ctx(), client.ListOptions{Limit: 1000})).of(t)
	if len(last.Items) != n || last.NextPageToken != "" {
		t.Fatalf("one big page: %d items, token %q", len(last.Items), last.NextPageToken)
	}
}

func TestBadPayloadsWriteNothing(t *testing.T) {
	c := startCloud(t)
	must(c.client.CreateInstance(ctx(), api.InstanceSpec{Name: "node-1"})).of(t)
	lb := must(c.client.EnsureLoadBalancer(ctx(), "web", api.LoadBalancerSpec{
		Ports:    []api.Port{{Protocol: api.ProtocolTCP, Port: 9, NodePort: 30009}},
		Backends: []api.Backend{{NodeName: "node-1", Address: nodeA.String()}},
	})).of(t)

	okPorts := `"ports":[{"protocol":"TCP","port":80,"nodePort":30080}]`
	tests := []struct {
		name, method, path, body string
		field                    string
	}{
		{name: "unknown instance field", method: "POST", path: "/v1/instances", body: `{"name":"n2","colour":"red"}`, field: "spec.colour"},
		{name: "bad instance name", method: "POST", path: "/v1/instances", body: `{"name":"N_2"}`, field: "spec.name"},
		{name: "bad address", method: "POST", path: "/v1/instances", body: `{"name":"n2","addresses":[{"type":"InternalIP","address":"300.1.1.1"}]}`, field: "spec.addresses[0].address"},
		{name: "wrong JSON type", method: "POST", path: "/v1/instances", body: `{"name":7}`, field: "spec.name"},
		{name: "malformed JSON", method: "POST", path: "/v1/instances", body: `{"name":`, field: "spec"},
		{name: "trailing data", method: "POST", path: "/v1/instances", body: `{"name":"n2"} {"name":"n3"}`, field: "spec"},
		{name: "no body", method: "POST", path: "/v1/instances", body: ``, field: "spec"},
		{name: "SCTP", method: "PUT", path: "/v1/loadbalancers/new", body: `{"ports":[{"protocol":"SCTP","port":80,"nodePort":30080}],"backends":[]}`, field: "spec.ports[0].protocol"},
		{name: "unknown port field", method: "PUT", path: "/v1/loadbalancers/new", body: `{"ports":[{"protocol":"TCP","port":80,"nodePort":30080,"targetPort":8080}]}`, field: "spec.targetPort"},
		{name: "bad source range", method: "PUT", path: "/v1/loadbalancers/new", body: `{` + okPorts + `,"sourceRanges":["everyone"]}`, field: "spec.sourceRanges[0]"},
		{name: "requested IP outside the pool", method: "PUT", path: "/v1/loadbalancers/new", body: `{` + okPorts + `,"requestedIP":"10.9.9.9"}`, field: "spec.requestedIP"},
		{name: "bad LB name", method: "PUT", path: "/v1/loadbalancers/-x", body: `{` + okPorts + `}`, field: "name"},
		{name: "bad backend on update", method: "PUT", path: "/v1/loadbalancers/web/backends", body: `{"backends":[{"nodeName":"node-1","address":"nowhere"}]}`, field: "backends[0].address"},
		{name: "backend on the machine's loopback", method: "PUT", path: "/v1/loadbalancers/new", body: `{` + okPorts + `,"backends":[{"nodeName":"node-1","address":"127.0.0.1"}]}`, field: "spec.backends[0].address"},
		{name: "backend off the instance range on update", method: "PUT", path: "/v1/loadbalancers/web/backends", body: `{"backends":[{"nodeName":"node-1","address":"10.0.0.1"}]}`, field: "backends[0].address"},
		{name: "backend on the range's network address", method: "PUT", path: "/v1/loadbalancers/new", body: `{` + okPorts + `,"backends":[{"nodeName":"node-1","address":"127.200.0.0"}]}`, field: "spec.backends[0].address"},
		{name: "backend on the range's broadcast address", method: "PUT", path: "/v1/loadbalancers/web/backends", body: `{"backends":[{"nodeName":"node-1","address":"127.200.255.255"}]}`, field: "backends[0].address"},
		{name: "too many ports", method: "PUT", path: "/v1/loadbalancers/new", body: `{"ports":[` + manyPorts(api.MaxLoadBalancerPorts+1) + `]}`, field: "spec.ports"},
		{name: "too many source ranges", method: "PUT", path: "/v1/loadbalancers/new", body: `{` + okPorts + `,"sourceRanges":[` + strings.Repeat(`"10.0.0.0/8",`, api.MaxSourceRanges) + `"10.0.0.0/8"]}`, field: "spec.sourceRanges"},
		{name: "unknown field on update", method: "PUT", path: "/v1/loadbalancers/web/backends", body: `{"backends":[],"drain":true}`, field: "drain"},
		{name: "route host bits", method: "POST", path: "/v1/clusters/k/routes", body: `{"destinationCIDR":"10.244.1.1/24","targetNode":"node-1"}`, field: "spec.destinationCIDR"},
		{name: "route without target", method: "POST", path: "/v1/clusters/k/routes", body: `{"destinationCIDR":"10.244.1.0/24"}`, field: "spec.targetNode"},
		{name: "limit 0", method: "GET", path: "/v1/instances?limit=0", field: "limit"},
		{name: "limit too big", method: "GET", path: "/v1/instances?limit=1001", field: "limit"},
		{name: "bad page token", method: "GET", path: "/v1/instances?pageToken=!!!", field: "pageToken"},
		{name: "malformed query", method: "GET", path: "/v1/instances?limit=%%%", field: "query"},
		{name: "unknown query parameter", method: "GET", path: "/v1/instances?page_token=x", field: "page_token"},
		{name: "bad fault rule", method: "PUT", path: "/admin/faults", body: `{"faults":[{"operation":"lb.explode","outage":true}]}`, field: "faults[0].operation"},
		{name: "fault rule path mismatch", method: "PUT", path: "/admin/faults/lb.get", body: `{"operation":"lb.ensure","outage":true}`, field: "fault.operation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := c.raw(tt.method, tt.path, tt.body, nil)
			if code != http.StatusBadRequest {
				t.Fatalf("status %d (%s), want 400", code, body)
			}
			e := apiError(t, body)
			if e.Field != tt.field || e.Reason != api.ReasonInvalid || e.Message == "" {
				t.Fatalf("error %+v, want field %q", e, tt.field)
			}
		})
	}

	// Nothing was written.
	if all := must(c.client.ListAllInstances(ctx(), 0)).of(t); len(all) != 1 {
		t.Errorf("%d instances after bad creates, want 1", len(all))
	}
	if _, err := c.client.GetLoadBalancer(ctx(), "new"); !cloud.IsNotFound(err) {
		t.Errorf("load balancer from a bad ensure: %v", err)
	}
	if got := must(c.client.GetLoadBalancer(ctx(), "web")).of(t); got.Spec.Backends[0].Address != nodeA.String() || !got.UpdatedAt.Equal(lb.UpdatedAt) {
		t.Errorf("bad update changed the load balancer: %+v", got.Spec.Backends)
	}
	if routes := must(c.client.ListRoutes(ctx(), "k")).of(t); len(routes) != 0 {
		t.Errorf("routes after bad creates: %v", routes)
	}
	if rules := must(c.client.Faults(ctx())).of(t); len(rules) != 0 {
		t.Errorf("fault rules after bad puts: %v", rules)
	}
}

func TestAuth(t *testing.T) {
	c := startCloud(t)
	none, wrong, basic := "", "Bearer nope", "Basic dGVzdDp0ZXN0"
	paths := []struct{ method, path string }{
		{"GET", "/v1/instances"},
		{"POST", "/v1/instances"},
		{"GET", "/v1/loadbalancers/web"},
		{"GET", "/v1/clusters/k/routes"},
		{"GET", "/admin/faults"},
		{"DELETE", "/admin/faults"},
		{"GET", "/metrics"},
		{"GET", "/v2/nothing"},
	}
	for _, p := range paths {
		for _, auth := range []*string{&none, &wrong, &basic} {
			code, hdr, body := c.raw(p.method, p.path, `{"name":"x"}`, auth)
			if code != http.StatusUnauthorized {
				t.Errorf("%s %s with %q: %d, want 401", p.method, p.path, *auth, code)
				continue
			}
			if e := apiError(t, body); e.Reason != api.ReasonUnauthorized || hdr.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s: 401 without reason or WWW-Authenticate: %+v", p.method, p.path, e)
			}
		}
	}
	if code, _, _ := c.raw("GET", "/healthz", "", &none); code != http.StatusOK {
		t.Errorf("/healthz without a token: %d, want 200", code)
	}
	if err := c.client.Healthy(ctx()); err != nil {
		t.Errorf("Healthy: %v", err)
	}
	if all := must(c.client.ListAllInstances(ctx(), 0)).of(t); len(all) != 0 {
		t.Errorf("unauthorized creates wrote %d instances", len(all))
	}
	bad, err := client.New(c.srv.URL(), "nope")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.GetInstance(ctx(), "i-1"); err == nil || cloud.IsNotFound(err) {
		t.Errorf("client with a bad token: %v, want a plain error", err)
	}
}

func TestUnknownEndpointIsNotNotFound(t *testing.T) {
	c := startCloud(t)
	code, _, body := c.raw("GET", "/v2/instances", "", nil)
	if e := apiError(t, body); code != http.StatusNotFound || e.Reason != api.ReasonUnknownEndpoint {
		t.Fatalf("unknown endpoint: %d %+v", code, e)
	}
	code, _, _ = c.raw("PATCH", "/v1/instances/i-1", "{}", nil)
	if code == http.StatusOK {
		t.Fatalf("PATCH answered 200")
	}
}

func TestRoutes(t *testing.T) {
	c := startCloud(t)
	cl := c.client
	n1 := must(cl.CreateInstance(ctx(), api.InstanceSpec{Name: "node-1"})).of(t)
	must(cl.CreateInstance(ctx(), api.InstanceSpec{Name: "node-2"})).of(t)

	spec := api.RouteSpec{DestinationCIDR: "10.244.1.0/24", TargetNode: "node-1"}
	code, _, body := c.raw("POST", "/v1/clusters/k/routes", `{"destinationCIDR":"10.244.1.0/24","targetNode":"node-1"}`, nil)
	if code != http.StatusCreated {
		t.Fatalf("first create: %d %s", code, body)
	}
	code, _, _ = c.raw("POST", "/v1/clusters/k/routes", `{"destinationCIDR":"10.244.1.0/24","targetNode":"node-1"}`, nil)
	if code != http.StatusOK {
		t.Fatalf("identical create: %d, want 200", code)
	}
	r := must(cl.CreateRoute(ctx(), "k", spec)).of(t)
	if r.Name != "r-10-244-1-0-24" || r.TargetInstance != n1.ID || r.ClusterName != "k" {
		t.Fatalf("route %+v", r)
	}
	var ce *client.Error
	for name, s := range map[string]api.RouteSpec{
		"destination taken": {DestinationCIDR: "10.244.1.0/24", TargetNode: "node-2"},
		"unknown node":      {DestinationCIDR: "10.244.9.0/24", TargetNode: "node-9"},
	} {
		if _, err := cl.CreateRoute(ctx(), "k", s); !errors.As(err, &ce) || ce.StatusCode != http.StatusConflict || cloud.IsNotFound(err) {
			t.Errorf("%s: %v, want 409", name, err)
		}
	}
	must(cl.CreateRoute(ctx(), "k", api.RouteSpec{Name: "two", DestinationCIDR: "10.244.2.0/24", TargetNode: "node-2"})).of(t)
	must(cl.CreateRoute(ctx(), "other", api.RouteSpec{DestinationCIDR: "10.244.1.0/24", TargetNode: "node-2"})).of(t)

	routes := must(cl.ListRoutes(ctx(), "k")).of(t)
	if len(routes) != 2 || routes[0].Blackhole || routes[1].Blackhole {
		t.Fatalf("routes of k: %+v", routes)
	}
	if err := cl.DeleteInstance(ctx(), n1.ID); err != nil {
		t.Fatal(err)
	}
	routes = must(cl.ListRoutes(ctx(), "k")).of(t)
	for _, r := range routes {
		if r.Blackhole != (r.TargetNode == "node-1") {
			t.Errorf("route %s to %s: blackhole %v", r.Name, r.TargetNode, r.Blackhole)
		}
	}
	if err := cl.DeleteRoute(ctx(), "k", "two"); err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteRoute(ctx(), "k", "two"); !cloud.IsNotFound(err) {
		t.Fatalf("deleting twice: %v, want NotFound", err)
	}
	if routes := must(cl.ListRoutes(ctx(), "other")).of(t); len(routes) != 1 {
		t.Fatalf("routes of another cluster changed: %+v", routes)
	}
}

func TestMetricsCountCalls(t *testing.T) {
	c := startCloud(t)
	cl := c.client
	for i := range 3 {
		must(cl.CreateInstance(ctx(), api.InstanceSpec{Name: fmt.Sprintf("n%d", i)})).of(t)
	}
	must(cl.GetInstance(ctx(), "i-000000000001")).of(t)
	if _, err := cl.GetInstance(ctx(), "i-00000000000f"); !cloud.IsNotFound(err) {
		t.Fatal(err)
	}
	must(cl.ListLoadBalancers(ctx(), "")).of(t)
	_, _, _ = c.raw("POST", "/v1/instances", `{"name":"BAD"}`, nil)
	cc := must(cl.CallCounts(ctx())).of(t)
	want := client.CallCounts{
		api.OpInstancesCreate: {201: 3, 400: 1},
		api.OpInstancesGet:    {200: 1, 404: 1},
		api.OpLBList:          {200: 1},
	}
	if fmt.Sprint(cc) != fmt.Sprint(want) {
		t.Fatalf("call counts = %v, want %v", cc, want)
	}
	// Reading the metrics and the fault rules is not counted as cloud calls.
	must(cl.Faults(ctx())).of(t)
	if again := must(cl.CallCounts(ctx())).of(t); fmt.Sprint(again) != fmt.Sprint(want) {
		t.Fatalf("admin calls were counted: %v", again)
	}
	_, _, body := c.raw("GET", "/metrics", "", nil)
	for _, s := range []string{
		`localcloud_request_duration_seconds_bucket{operation="instances.create",le=`,
		`localcloud_request_duration_seconds_count{operation="instances.get"} 2`,
		`# TYPE localcloud_requests_total counter`,
	} {
		if !strings.Contains(string(body), s) {
			t.Errorf("/metrics lacks %q", s)
		}
	}
}

// manyPorts returns n distinct TCP listeners as JSON array elements.
func manyPorts(n int) string {
	ports := make([]string, n)
	for i := range ports {
		ports[i] = fmt.Sprintf(`{"protocol":"TCP","port":%d,"nodePort":%d}`, 1000+i, 30000+i)
	}
	return strings.Join(ports, ",")
}
