package provider_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"

	"example.com/cloud-provider-example/examplecloud"
	"example.com/cloud-provider-example/provider"
)

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name, in, wantErr string
	}{
		{name: "minimal", in: `{"region": "ex-1"}`},
		{name: "full", in: `{"region": "ex-1", "stateFile": "/tmp/x.json", "instances": [{"name": "node-1", "zone": "ex-1b"}]}`},
		{name: "no region", in: `{"stateFile": "/tmp/x.json"}`, wantErr: "region is required"},
		{name: "unknown field", in: `{"region": "ex-1", "zone": "a"}`, wantErr: `unknown field "zone"`},
		{name: "trailing data", in: `{"region": "ex-1"} {}`, wantErr: "trailing data"},
		{name: "not JSON", in: `region: ex-1`, wantErr: "invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := provider.LoadConfig(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LoadConfig = %+v, %v; want an error containing %q", cfg, err, tt.wantErr)
				}
				return
			}
			if err != nil || cfg.Region != "ex-1" {
				t.Fatalf("LoadConfig = %+v, %v", cfg, err)
			}
		})
	}
	if _, err := provider.LoadConfig(nil); err == nil {
		t.Error("LoadConfig(nil) succeeded")
	}
}

// TestStateSurvivesRestarts builds the provider twice from one cloud config, as two
// runs of the cloud-controller-manager would: configured instances are created once,
// and load balancers and routes outlive the process.
func TestStateSurvivesRestarts(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	config := `{"region": "ex-1", "stateFile": "` + state + `", "instances": [{"name": "node-1", "type": "ex.large"}]}`
	ctx := t.Context()

	p1, err := provider.New(strings.NewReader(config))
	if err != nil {
		t.Fatal(err)
	}
	in, _ := p1.Instances()
	inst, err := in.InstanceMetadata(ctx, node("node-1", ""))
	if err != nil {
		t.Fatal(err)
	}
	if inst.InstanceType != "ex.large" || inst.Region != "ex-1" || !strings.HasPrefix(inst.ProviderID, "example://vm-") {
		t.Errorf("instance = %+v", inst)
	}
	lbs, _ := p1.LoadBalancers()
	spec := &cloud.LoadBalancerSpec{Name: "web", Ports: []cloud.LoadBalancerPort{{Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}}}
	st, err := lbs.EnsureLoadBalancer(ctx, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	routes, _ := p1.Routes()
	route := cloud.Route{TargetNode: "node-1", DestinationCIDR: netip.MustParsePrefix("10.244.1.0/24")}
	if err := routes.CreateRoute(ctx, "prod", "", route); err != nil {
		t.Fatal(err)
	}

	p2, err := provider.New(strings.NewReader(config))
	if err != nil {
		t.Fatalf("second start: %v", err)
	}
	list, _ := p2.InstanceLister()
	all, err := list.ListInstances(ctx)
	if err != nil || len(all) != 1 || all[0].ProviderID != inst.ProviderID {
		t.Errorf("after a restart: %+v, %v; want the one instance", all, err)
	}
	lbs2, _ := p2.LoadBalancers()
	if got, err := lbs2.GetLoadBalancer(ctx, spec, nil); err != nil || got.Ingress[0].IP != st.Ingress[0].IP {
		t.Errorf("after a restart: load balancer %+v, %v; want VIP %s", got, err, st.Ingress[0].IP)
	}
	routes2, _ := p2.Routes()
	if rs, err := routes2.ListRoutes(ctx, "prod"); err != nil || len(rs) != 1 || rs[0].DestinationCIDR != route.DestinationCIDR {
		t.Errorf("after a restart: routes %+v, %v", rs, err)
	}
	if _, err := os.Stat(state); err != nil {
		t.Error(err)
	}
}

// TestErrorsKeepTheContract checks the mapping from the cloud's answers to the
// contract's errors, call by call.
func TestErrorsKeepTheContract(t *testing.T) {
	ctx := t.Context()
	c, err := examplecloud.Open("", "ex-1")
	if err != nil {
		t.Fatal(err)
	}
	p := provider.NewForCloud(c)
	in, _ := p.Instances()
	lister, _ := p.InstanceLister()
	lbs, _ := p.LoadBalancers()

	if _, err := in.InstanceMetadata(ctx, node("ghost", "")); !cloud.IsNotFound(err) {
		t.Errorf("unknown name: %v, want NotFound", err)
	}
	if _, err := in.InstanceMetadata(ctx, node("ghost", "example://vm-999999")); !cloud.IsNotFound(err) {
		t.Errorf("unknown provider ID: %v, want NotFound", err)
	}
	if _, err := in.InstanceMetadata(ctx, node("n", "aws:///us-east-1a/i-1")); !cloud.IsInvalid(err) || cloud.IsNotFound(err) {
		t.Errorf("another provider's node: %v, want Invalid and never NotFound", err)
	}
	spec := &cloud.LoadBalancerSpec{Name: "web", Ports: []cloud.LoadBalancerPort{{Protocol: corev1.ProtocolSCTP, Port: 80}}}
	if _, err := lbs.EnsureLoadBalancer(ctx, spec, nil); !cloud.IsInvalid(err) {
		t.Errorf("SCTP: %v, want Invalid", err)
	}
	if err := lbs.UpdateLoadBalancerBackends(ctx, spec, nil); !cloud.IsNotFound(err) {
		t.Errorf("updating a missing load balancer: %v, want NotFound", err)
	}

	c.SetFaults(examplecloud.Faults{Throttle: 3 * time.Second})
	_, err = lister.ListInstances(ctx)
	if after, ok := cloud.RetryAfter(err); !cloud.IsThrottled(err) || !ok || after != 3*time.Second {
		t.Errorf("throttled listing: %v, want Throttled after 3s", err)
	}
	c.SetFaults(examplecloud.Faults{Outage: true})
	_, err = in.InstanceMetadata(ctx, node("ghost", ""))
	if err == nil || cloud.IsNotFound(err) {
		t.Errorf("outage: %v, want a temporary error", err)
	}
	var apiErr *examplecloud.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 503 {
		t.Errorf("the cloud's answer is not kept in %v", err)
	}
}

// TestNewRejectsInconsistentStateFile starts the provider on state files with null or
// mismatched entries: New must fail naming the file and the entry, never panic.
func TestNewRejectsInconsistentStateFile(t *testing.T) {
	tests := []struct {
		name, state, want string
	}{
		{name: "null instance", state: `{"region": "ex-1", "nextID": 1, "instances": {"vm-1": null}, "loadBalancers": {}, "routes": {}}`, want: `instances["vm-1"]`},
		{name: "null load balancer", state: `{"region": "ex-1", "instances": {}, "loadBalancers": {"web": null}, "routes": {}}`, want: `loadBalancers["web"]`},
		{name: "null route", state: `{"region": "ex-1", "instances": {}, "loadBalancers": {}, "routes": {"r1": null}}`, want: `routes["r1"]`},
		{name: "nextID behind", state: `{"region": "ex-1", "nextID": 0, "instances": {"vm-000001": {"id": "vm-000001", "name": "node-0"}}, "loadBalancers": {}, "routes": {}}`, want: "set nextID to at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state.json")
			if err := os.WriteFile(state, []byte(tt.state), 0o600); err != nil {
				t.Fatal(err)
			}
			config := `{"region": "ex-1", "stateFile": "` + state + `", "instances": [{"name": "node-1"}]}`
			p, err := provider.New(strings.NewReader(config))
			if err == nil || !strings.Contains(err.Error(), state) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, %v; want an error naming %s and %q", p, err, state, tt.want)
			}
		})
	}
}

// TestErrorClasses checks that every API answer keeps both the contract's class and
// the cloud's own error, and that the message says the class.
func TestErrorClasses(t *testing.T) {
	instance := func(providerID string) func(context.Context, *provider.Provider) error {
		return func(ctx context.Context, p *provider.Provider) error {
			in, _ := p.Instances()
			_, err := in.InstanceMetadata(ctx, node("n", providerID))
			return err
		}
	}
	tests := []struct {
		name        string
		faults      examplecloud.Faults
		call        func(context.Context, *provider.Provider) error
		wantClass   error
		wantCode    int
		wantMessage string
	}{
		{name: "404 about the instance", call: instance("example://vm-999999"), wantClass: cloud.ErrNotFound, wantCode: 404, wantMessage: "not found in the cloud"},
		{
			name: "400",
			call: func(ctx context.Context, p *provider.Provider) error {
				rs, _ := p.Routes()
				return rs.CreateRoute(ctx, "prod", "", cloud.Route{TargetNode: "ghost", DestinationCIDR: netip.MustParsePrefix("10.244.0.0/24")})
			},
			wantClass: cloud.ErrInvalid, wantCode: 400, wantMessage: "invalid request for the provider",
		},
		{name: "429", faults: examplecloud.Faults{Throttle: time.Second}, call: instance("example://vm-999999"), wantClass: cloud.ErrThrottled, wantCode: 429, wantMessage: "retry after 1s"},
		{name: "503", faults: examplecloud.Faults{Outage: true}, call: instance("example://vm-999999"), wantCode: 503, wantMessage: "503 Service Unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := examplecloud.Open("", "ex-1")
			if err != nil {
				t.Fatal(err)
			}
			c.SetFaults(tt.faults)
			err = tt.call(t.Context(), provider.NewForCloud(c))
			var apiErr *examplecloud.APIError
			if !errors.As(err, &apiErr) || apiErr.Code != tt.wantCode {
				t.Errorf("%v: the cloud's %d answer is not kept", err, tt.wantCode)
			}
			for _, class := range []error{cloud.ErrNotFound, cloud.ErrThrottled, cloud.ErrInvalid} {
				if errors.Is(err, class) != (class == tt.wantClass) {
					t.Errorf("%v: errors.Is(%v) = %v", err, class, errors.Is(err, class))
				}
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantMessage) {
				t.Errorf("%v: want the message to contain %q", err, tt.wantMessage)
			}
		})
	}
}
