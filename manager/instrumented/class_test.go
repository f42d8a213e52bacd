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
		want Class
	}{
		{name: "a joining node's lookup", ctx: bg, op: cloud.OpInstanceMetadata, want: ClassCritical},
		{name: "a listing", ctx: bg, op: cloud.OpListInstances, want: ClassCritical},
		{name: "a new node's route", ctx: bg, op: cloud.OpCreateRoute, want: ClassCritical},
		{name: "a load balancer's creation", ctx: bg, op: cloud.OpEnsureLoadBalancer, want: ClassCritical},
		{name: "a load balancer's deletion", ctx: bg, op: cloud.OpEnsureLoadBalancerDeleted, want: ClassCritical},
		{name: "a backend update", ctx: bg, op: cloud.OpUpdateLoadBalancerBackends, want: ClassRefine},
		{name: "a stale route's deletion", ctx: bg, op: cloud.OpDeleteRoute, want: ClassRefine},
		{name: "a load balancer read", ctx: bg, op: cloud.OpGetLoadBalancer, want: ClassRefine},
		{name: "tagged refine wins over the default", ctx: WithClass(bg, ClassRefine), op: cloud.OpEnsureLoadBalancer, want: ClassRefine},
		{name: "tagged critical wins over the default", ctx: WithClass(bg, ClassCritical), op: cloud.OpUpdateLoadBalancerBackends, want: ClassCritical},
		{name: "an unknown class is ignored", ctx: WithClass(bg, Class("urgent")), op: cloud.OpDeleteRoute, want: ClassRefine},
	}
	for _, tt := range tests {
		if got := ClassOf(tt.ctx, tt.op); got != tt.want {
			t.Errorf("%s: ClassOf(%s) = %s, want %s", tt.name, tt.op, got, tt.want)
		}
	}
}
