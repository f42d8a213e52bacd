package render

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
)

// TestOptionErrors: every refused option comes back as an *OptionError naming the
// option, the item of a repeated one and the value, with the parser's error reachable;
// its Reason names other options so that a caller can name them its own way.
func TestOptionErrors(t *testing.T) {
	tests := []struct {
		name      string
		change    func(*Options)
		option    string
		index     int
		value     any
		cause     error  // errors.Is target, or nil
		explained string // Explain with options named <option>, or ""
	}{
		{name: "image", change: func(o *Options) { o.Image = "Not A Ref" }, option: "image", index: -1, value: "Not A Ref", cause: &name.ErrBadName{}},
		{name: "replicas", change: func(o *Options) { o.Replicas = 0 }, option: "replicas", index: -1, value: 0},
		{name: "cluster cidr", change: func(o *Options) { o.ClusterCIDR = "10.0.0.0/33" }, option: "cluster-cidr", index: -1, value: "10.0.0.0/33"},
		{name: "cluster cidr required", change: func(o *Options) { o.ClusterCIDR = "" }, option: "cluster-cidr", index: -1, value: "",
			explained: `"": required while the route controller runs (<configure-cloud-routes>); set it, or <configure-cloud-routes>=false, or <controllers>=*,-route`},
		{name: "second extra arg", change: func(o *Options) { o.ExtraArgs = []string{"--v=2", "--cloud-provider=aws"} }, option: "extra-arg", index: 1,
			value: "--cloud-provider=aws", explained: `"--cloud-provider=aws": --cloud-provider is set by the rendering: use <provider>`},
		{name: "service monitor", change: func(o *Options) { o.ServiceMonitor, o.MetricsService = true, false }, option: "service-monitor", index: -1, value: true,
			explained: `true: needs <metrics-service>, the Service it selects`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			tt.change(&o)
			err := o.Validate()
			var list OptionErrors
			if !errors.As(err, &list) || len(list) != 1 {
				t.Fatalf("Validate() = %v, want OptionErrors of one", err)
			}
			var oe *OptionError
			if !errors.As(err, &oe) || oe != list[0] {
				t.Fatalf("errors.As does not find the *OptionError in %v", err)
			}
			if oe.Option != tt.option || oe.Index != tt.index || oe.Value != tt.value {
				t.Errorf("got option %q index %d value %#v, want %q %d %#v", oe.Option, oe.Index, oe.Value, tt.option, tt.index, tt.value)
			}
			if tt.cause != nil && !errors.Is(err, tt.cause) {
				t.Errorf("errors.Is(%v, %T) is false: the parser's error is lost", err, tt.cause)
			}
			if tt.explained != "" {
				if got := oe.Explain(func(o string) string { return "<" + o + ">" }); got != tt.explained {
					t.Errorf("Explain = %q, want %q", got, tt.explained)
				}
				if strings.ContainsAny(err.Error(), "{}<>") {
					t.Errorf("Error() = %q: options not named as flags", err)
				}
			}
		})
	}
	// An untyped nil, not an empty OptionErrors: callers compare with nil.
	if err := DefaultOptions().Validate(); err != nil {
		t.Errorf("the defaults are refused: %v", err)
	}
}
