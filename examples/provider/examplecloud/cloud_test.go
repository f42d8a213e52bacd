package examplecloud_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"example.com/cloud-provider-example/examplecloud"
)

func open(t *testing.T, path string) *examplecloud.Cloud {
	t.Helper()
	c, err := examplecloud.Open(path, "ex-1")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func wantCode(t *testing.T, what string, err error, code int) {
	t.Helper()
	if got := examplecloud.Code(err); got != code {
		t.Errorf("%s: %v (code %d), want code %d", what, err, got, code)
	}
}

func TestAPIAnswers(t *testing.T) {
	ctx := t.Context()
	c := open(t, "")
	a, err := c.CreateInstance(ctx, examplecloud.InstanceSpec{Name: "node-a"})
	if err != nil || a.ID != "vm-000001" || a.State != examplecloud.StateRunning || a.PrivateIP != "10.0.0.1" || a.Zone != "ex-1a" {
		t.Fatalf("CreateInstance = %+v, %v", a, err)
	}
	_, err = c.CreateInstance(ctx, examplecloud.InstanceSpec{Name: "node-a"})
	wantCode(t, "a second instance named node-a", err, 409)
	_, err = c.GetInstance(ctx, "vm-424242")
	wantCode(t, "an unknown instance", err, 404)
	_, err = c.FindInstance(ctx, "node-z")
	wantCode(t, "an unknown name", err, 404)

	lb1, err := c.PutLoadBalancer(ctx, examplecloud.LoadBalancer{Name: "one", Listeners: []examplecloud.Listener{{Protocol: "TCP", Port: 80, TargetPort: 30080}}})
	if err != nil || lb1.VIP != "203.0.113.1" {
		t.Fatalf("PutLoadBalancer = %+v, %v", lb1, err)
	}
	again, err := c.PutLoadBalancer(ctx, examplecloud.LoadBalancer{Name: "one", Listeners: lb1.Listeners, Targets: []string{"10.0.0.1"}})
	if err != nil || again.VIP != lb1.VIP || len(again.Targets) != 1 {
		t.Errorf("updating keeps the VIP: %+v, %v", again, err)
	}
	_, err = c.PutLoadBalancer(ctx, examplecloud.LoadBalancer{Name: "sctp", Listeners: []examplecloud.Listener{{Protocol: "SCTP", Port: 1}}})
	wantCode(t, "an SCTP listener", err, 400)
	wantCode(t, "deleting a missing load balancer", c.DeleteLoadBalancer(ctx, "nope"), 404)
	wantCode(t, "targets of a missing load balancer", c.SetTargets(ctx, "nope", nil), 404)

	r := examplecloud.Route{Name: "r1", Cluster: "prod", Destination: "10.244.0.0/24", NextHop: "node-a"}
	if err := c.CreateRoute(ctx, r); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "the same route again", c.CreateRoute(ctx, r), 409)
	r2 := r
	r2.Name = "r2"
	wantCode(t, "another route to the same destination", c.CreateRoute(ctx, r2), 409)
	r2.Destination, r2.NextHop = "10.244.1.0/24", "node-z"
	wantCode(t, "a route via no instance", c.CreateRoute(ctx, r2), 400)
	wantCode(t, "deleting a missing route", c.DeleteRoute(ctx, "nope"), 404)
	if rs, err := c.ListRoutes(ctx, "other"); err != nil || len(rs) != 0 {
		t.Errorf("routes of another cluster: %+v, %v", rs, err)
	}
}

func TestFaults(t *testing.T) {
	c := open(t, "")
	c.SetFaults(examplecloud.Faults{Throttle: 2 * time.Second})
	_, err := c.ListInstances(t.Context())
	var apiErr *examplecloud.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 429 || apiErr.RetryAfter != 2*time.Second {
		t.Errorf("throttled: %v", err)
	}
	c.SetFaults(examplecloud.Faults{Outage: true})
	_, err = c.ListInstances(t.Context())
	wantCode(t, "outage", err, 503)
	c.SetFaults(examplecloud.Faults{Latency: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.ListInstances(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow call with a deadline: %v, want DeadlineExceeded", err)
	}
}

func TestPersistence(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state.json")
	c := open(t, path)
	inst, err := c.CreateInstance(ctx, examplecloud.InstanceSpec{Name: "node-a", Tags: map[string]string{"pool": "blue"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutLoadBalancer(ctx, examplecloud.LoadBalancer{Name: "web", Listeners: []examplecloud.Listener{{Protocol: "UDP", Port: 53, TargetPort: 30053}}}); err != nil {
		t.Fatal(err)
	}

	reopened := open(t, path)
	got, err := reopened.GetInstance(ctx, inst.ID)
	if err != nil || got.Tags["pool"] != "blue" {
		t.Errorf("after reopening: %+v, %v", got, err)
	}
	if _, err := reopened.GetLoadBalancer(ctx, "web"); err != nil {
		t.Errorf("after reopening: %v", err)
	}
	next, err := reopened.CreateInstance(ctx, examplecloud.InstanceSpec{Name: "node-b"})
	if err != nil || next.ID != "vm-000002" {
		t.Errorf("IDs continue after reopening: %+v, %v", next, err)
	}

	if _, err := examplecloud.Open(path, "ex-2"); err == nil {
		t.Error("opening another region's state succeeded")
	}
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := examplecloud.Open(path, "ex-1"); err == nil {
		t.Error("opening a corrupt state file succeeded")
	}
	if _, err := examplecloud.Open("", ""); err == nil {
		t.Error("opening without a region succeeded")
	}
}

// TestOpenRejectsInconsistentState checks that Open refuses a state file the API could
// never have written, instead of panicking later or overwriting an instance. Every error
// names the file, the entry and the fix.
func TestOpenRejectsInconsistentState(t *testing.T) {
	const (
		inst1 = `{"id": "vm-000001", "name": "node-a", "state": "running"}`
		lbWeb = `{"name": "web", "vip": "203.0.113.1", "listeners": [{"protocol": "TCP", "port": 80, "targetPort": 30080}]}`
		route = `{"name": "r1", "cluster": "prod", "destination": "10.244.0.0/24", "nextHop": "node-a"}`
	)
	tests := []struct {
		name  string
		state string
		// want are substrings of the error, besides the file's path; none means Open
		// succeeds.
		want []string
	}{
		{
			name:  "consistent",
			state: `{"region": "ex-1", "nextID": 1, "instances": {"vm-000001": ` + inst1 + `}, "loadBalancers": {"web": ` + lbWeb + `}, "routes": {"r1": ` + route + `}}`,
		},
		{
			name:  "empty",
			state: `{"region": "ex-1", "nextID": 0, "instances": {}, "loadBalancers": {}, "routes": {}}`,
		},
		{
			name:  "null instance",
			state: `{"region": "ex-1", "nextID": 1, "instances": {"vm-1": null}, "loadBalancers": {}, "routes": {}}`,
			want:  []string{`instances["vm-1"]`, "null", "remove the entry"},
		},
		{
			name:  "null load balancer",
			state: `{"region": "ex-1", "instances": {}, "loadBalancers": {"web": null}, "routes": {}}`,
			want:  []string{`loadBalancers["web"]`, "null", "remove the entry"},
		},
		{
			name:  "null route",
			state: `{"region": "ex-1", "instances": {}, "loadBalancers": {}, "routes": {"r1": null}}`,
			want:  []string{`routes["r1"]`, "null", "remove the entry"},
		},
		{
			name:  "instance key is not its id",
			state: `{"region": "ex-1", "nextID": 2, "instances": {"vm-000002": ` + inst1 + `}, "loadBalancers": {}, "routes": {}}`,
			want:  []string{`instances["vm-000002"]`, `id "vm-000001"`, "key must equal"},
		},
		{
			name:  "load balancer key is not its name",
			state: `{"region": "ex-1", "instances": {}, "loadBalancers": {"api": ` + lbWeb + `}, "routes": {}}`,
			want:  []string{`loadBalancers["api"]`, `name "web"`, "key must equal"},
		},
		{
			name:  "route key is not its name",
			state: `{"region": "ex-1", "instances": {}, "loadBalancers": {}, "routes": {"r2": ` + route + `}}`,
			want:  []string{`routes["r2"]`, `name "r1"`, "key must equal"},
		},
		{
			name:  "load balancer without a name",
			state: `{"region": "ex-1", "instances": {}, "loadBalancers": {"": {"name": ""}}, "routes": {}}`,
			want:  []string{`loadBalancers[""]`, "name is empty"},
		},
		{
			name:  "route without a name",
			state: `{"region": "ex-1", "instances": {}, "loadBalancers": {}, "routes": {"": {"name": ""}}}`,
			want:  []string{`routes[""]`, "name is empty"},
		},
		{
			name:  "instance ID not of the cloud's form",
			state: `{"region": "ex-1", "nextID": 1, "instances": {"i-abc": {"id": "i-abc", "name": "node-a"}}, "loadBalancers": {}, "routes": {}}`,
			want:  []string{`instances["i-abc"]`, `"vm-" and digits`},
		},
		{
			name:  "empty instance ID",
			state: `{"region": "ex-1", "nextID": 1, "instances": {"": {"id": "", "name": "node-a"}}, "loadBalancers": {}, "routes": {}}`,
			want:  []string{`instances[""]`, `"vm-" and digits`},
		},
		{
			name:  "two instances with one name",
			state: `{"region": "ex-1", "nextID": 2, "instances": {"vm-000001": ` + inst1 + `, "vm-000002": {"id": "vm-000002", "name": "node-a"}}, "loadBalancers": {}, "routes": {}}`,
			want:  []string{`instances["vm-000002"]`, `instances["vm-000001"]`, `name "node-a"`, "rename"},
		},
		{
			name:  "nextID below an existing ID",
			state: `{"region": "ex-1", "nextID": 3, "instances": {"vm-000007": {"id": "vm-000007", "name": "node-a"}}, "loadBalancers": {}, "routes": {}}`,
			want:  []string{"nextID 3", `instances["vm-000007"]`, "set nextID to at least 7"},
		},
		{
			name:  "nextID missing with instances",
			state: `{"region": "ex-1", "instances": {"vm-000001": ` + inst1 + `}, "loadBalancers": {}, "routes": {}}`,
			want:  []string{"nextID 0", "set nextID to at least 1"},
		},
		{
			name:  "negative nextID",
			state: `{"region": "ex-1", "nextID": -1, "instances": {}, "loadBalancers": {}, "routes": {}}`,
			want:  []string{"nextID -1", "set nextID to at least 0"},
		},
		{
			name:  "no instances",
			state: `{"region": "ex-1", "loadBalancers": {}, "routes": {}}`,
			want:  []string{`"instances"`, `add "instances": {}`},
		},
		{
			name:  "null load balancers",
			state: `{"region": "ex-1", "instances": {}, "loadBalancers": null, "routes": {}}`,
			want:  []string{`"loadBalancers"`, `add "loadBalancers": {}`},
		},
		{
			name:  "no routes",
			state: `{"region": "ex-1", "instances": {}, "loadBalancers": {}}`,
			want:  []string{`"routes"`, `add "routes": {}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.json")
			if err := os.WriteFile(path, []byte(tt.state), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := examplecloud.Open(path, "ex-1")
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				// Every call that reads the state works on what was opened.
				ctx := t.Context()
				if _, err := c.ListInstances(ctx); err != nil {
					t.Error(err)
				}
				if _, err := c.FindInstance(ctx, "node-a"); err != nil && examplecloud.Code(err) != 404 {
					t.Error(err)
				}
				if _, err := c.ListRoutes(ctx, "prod"); err != nil {
					t.Error(err)
				}
				if _, err := c.PutLoadBalancer(ctx, examplecloud.LoadBalancer{Name: "new", Listeners: []examplecloud.Listener{{Protocol: "TCP", Port: 1, TargetPort: 30001}}}); err != nil {
					t.Error(err)
				}
				if _, err := c.CreateInstance(ctx, examplecloud.InstanceSpec{Name: "node-new"}); err != nil {
					t.Error(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Open succeeded; want an error containing %q", tt.want)
			}
			for _, w := range append([]string{path}, tt.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Open: %v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

// TestCreateInstanceAfterReopenNeverOverwrites creates instances after reopening a
// state file whose nextID is right, and checks that no instance is replaced.
func TestCreateInstanceAfterReopenNeverOverwrites(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state.json")
	state := `{"region": "ex-1", "nextID": 7, "instances": {"vm-000007": {"id": "vm-000007", "name": "node-a", "state": "running"}}, "loadBalancers": {}, "routes": {}}`
	if err := os.WriteFile(path, []byte(state), 0o600); err != nil {
		t.Fatal(err)
	}
	c := open(t, path)
	b, err := c.CreateInstance(ctx, examplecloud.InstanceSpec{Name: "node-b"})
	if err != nil || b.ID != "vm-000008" {
		t.Fatalf("CreateInstance = %+v, %v; want vm-000008", b, err)
	}
	if a, err := c.GetInstance(ctx, "vm-000007"); err != nil || a.Name != "node-a" {
		t.Errorf("vm-000007 = %+v, %v; want node-a kept", a, err)
	}
}
