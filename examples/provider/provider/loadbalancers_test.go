package provider_test

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nephele-dev/nephele/cloud"

	"example.com/cloud-provider-example/examplecloud"
	"example.com/cloud-provider-example/provider"
)

// TestEnsureLoadBalancerUnsupportedFields checks that the Service fields the example
// cloud cannot honour are refused by name instead of silently dropped.
func TestEnsureLoadBalancerUnsupportedFields(t *testing.T) {
	tests := []struct {
		name        string
		requestedIP string
		ranges      []string
		// want are substrings of the Invalid error; none means success.
		want []string
	}{
		{name: "neither"},
		{name: "requested IP", requestedIP: "203.0.113.9", want: []string{"spec.loadBalancerIP", `"203.0.113.9"`, "not supported by this provider", "remove"}},
		{name: "source ranges", ranges: []string{"10.0.0.0/8"}, want: []string{"spec.loadBalancerSourceRanges", "10.0.0.0/8", "not supported by this provider", "0.0.0.0/0"}},
		{name: "IPv6 range only", ranges: []string{"::/0"}, want: []string{"spec.loadBalancerSourceRanges", "not supported by this provider"}},
		{name: "every client", ranges: []string{"0.0.0.0/0"}},
		{name: "every client among others", ranges: []string{"10.0.0.0/8", "0.0.0.0/0"}},
		{name: "both", requestedIP: "203.0.113.9", ranges: []string{"10.0.0.0/8"}, want: []string{"spec.loadBalancerIP"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			c, err := examplecloud.Open("", "ex-1")
			if err != nil {
				t.Fatal(err)
			}
			lbs, _ := provider.NewForCloud(c).LoadBalancers()
			spec := &cloud.LoadBalancerSpec{
				Name:        "web",
				Service:     types.NamespacedName{Namespace: "default", Name: "web"},
				Ports:       []cloud.LoadBalancerPort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}},
				RequestedIP: tt.requestedIP,
			}
			for _, r := range tt.ranges {
				spec.SourceRanges = append(spec.SourceRanges, netip.MustParsePrefix(r))
			}
			st, err := lbs.EnsureLoadBalancer(ctx, spec, nil)
			if len(tt.want) == 0 {
				if err != nil || len(st.Ingress) != 1 {
					t.Fatalf("EnsureLoadBalancer = %+v, %v", st, err)
				}
				return
			}
			if !cloud.IsInvalid(err) {
				t.Fatalf("EnsureLoadBalancer = %+v, %v; want Invalid", st, err)
			}
			for _, w := range append([]string{"default/web"}, tt.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("EnsureLoadBalancer: %v\nwant it to contain %q", err, w)
				}
			}
			// Nothing was created for a spec that was refused.
			if _, err := c.GetLoadBalancer(ctx, "web"); examplecloud.Code(err) != 404 {
				t.Errorf("after a refused ensure: %v, want 404", err)
			}
		})
	}
}
