package instrumented

import (
	"context"
	"testing"

	"github.com/nephele-dev/nephele/cloud"
)

func TestClassOf(t *testing.T) {
	bg := context.Background()
	tests := []struct {
		name string
		ctx  context.Context
		op   cloud.Operation
		want cloud.Class
	}{
		{name: "a joining node's lookup", ctx: bg, op: cloud.OpInstanceMetadata, want: cloud.ClassCritical},
		{name: "a listing", ctx: bg, op: cloud.OpListInstances, want: cloud.ClassCritical},
		{name: "a new node's route", ctx: bg, op: cloud.OpCreateRoute, want: cloud.ClassCritical},
		{name: "a load balancer's creation", ctx: bg, op: cloud.OpEnsureLoadBalancer, want: cloud.ClassCritical},
		{name: "a load balancer's deletion", ctx: bg, op: cloud.OpEnsureLoadBalancerDeleted, want: cloud.ClassCritical},
		{name: "a backend update", ctx: bg, op: cloud.OpUpdateLoadBalancerBackends, want: cloud.ClassRefine},
		{name: "a stale route's deletion", ctx: bg, op: cloud.OpDeleteRoute, want: cloud.ClassRefine},
		{name: "a load balancer read", ctx: bg, op: cloud.OpGetLoadBalancer, want: cloud.ClassRefine},
		{name: "tagged refine wins over the default", ctx: cloud.WithClass(bg, cloud.ClassRefine), op: cloud.OpEnsureLoadBalancer, want: cloud.ClassRefine},
		{name: "tagged critical wins over the default", ctx: cloud.WithClass(bg, cloud.ClassCritical), op: cloud.OpUpdateLoadBalancerBackends, want: cloud.ClassCritical},
		{name: "an unknown class is ignored", ctx: cloud.WithClass(bg, cloud.Class("urgent")), op: cloud.OpDeleteRoute, want: cloud.ClassRefine},
	}
	for _, tt := range tests {
		if got := ClassOf(tt.ctx, tt.op); got != tt.want {
			t.Errorf("%s: ClassOf(%s) = %s, want %s", tt.name, tt.op, got, tt.want)
		}
	}
}
