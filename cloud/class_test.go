package cloud

import (
	"context"
	"testing"
)

func TestClassFrom(t *testing.T) {
	bg := context.Background()
	tests := []struct {
		name   string
		ctx    context.Context
		want   Class
		wantOK bool
	}{
		{name: "untagged", ctx: bg},
		{name: "critical", ctx: WithClass(bg, ClassCritical), want: ClassCritical, wantOK: true},
		{name: "refine", ctx: WithClass(bg, ClassRefine), want: ClassRefine, wantOK: true},
		{name: "the innermost tag wins", ctx: WithClass(WithClass(bg, ClassCritical), ClassRefine), want: ClassRefine, wantOK: true},
		{name: "an unknown class is no class", ctx: WithClass(bg, Class("urgent")), want: Class("urgent")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ClassFrom(tt.ctx)
			if ok != tt.wantOK || (ok && got != tt.want) {
				t.Errorf("ClassFrom = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
