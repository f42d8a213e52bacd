package manager

import (
	"reflect"
	"strings"
	"testing"
)

// testSpecs builds specs like a CCM binary registers them: the four cloud controllers
// with upstream's short aliases and kube-controller-manager's legacy names, plus extra.
func testSpecs(extra ...ControllerSpec) []ControllerSpec {
	specs := []ControllerSpec{
		{Name: CloudNodeController, Aliases: []string{"cloud-node"}},
		{Name: CloudNodeLifecycleController, Aliases: []string{"cloud-node-lifecycle"}},
		{Name: ServiceLBController, Aliases: []string{"service", "service-controller"}},
		{Name: NodeRouteController, Aliases: []string{"route", "route-controller"}},
	}
	return append(specs, extra...)
}

// optIn is a disabled-by-default controller.
var optIn = ControllerSpec{Name: "opt-in-controller", Aliases: []string{"opt-in"}, DisabledByDefault: true}

func TestCanonicalName(t *testing.T) {
	specs := testSpecs(optIn)
	tests := map[string]string{
		"cloud-node":                      CloudNodeController,
		"cloud-node-controller":           CloudNodeController,
		"cloud-node-lifecycle":            CloudNodeLifecycleController,
		"cloud-node-lifecycle-controller": CloudNodeLifecycleController,
		"service":                         ServiceLBController,
		"service-controller":              ServiceLBController,
		"service-lb-controller":           ServiceLBController,
		"route":                           NodeRouteController,
		"route-controller":                NodeRouteController,
		"node-route-controller":           NodeRouteController,
		"opt-in":                          "opt-in-controller",
	}
	for in, want := range tests {
		if got, ok := CanonicalName(specs, in); !ok || got != want {
			t.Errorf("CanonicalName(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"Route", "nodeipam", "", "*", "-route"} {
		if got, ok := CanonicalName(specs, in); ok {
			t.Errorf("CanonicalName(%q) = %q, want not found", in, got)
		}
	}
}

func TestSelectControllers(t *testing.T) {
	all := []string{CloudNodeController, CloudNodeLifecycleController, ServiceLBController, NodeRouteController}
	tests := []struct {
		name  string
		flags []string
		want  []string
	}{
		{"star", []string{"*"}, all},
		{"star disable alias", []string{"*", "-service"}, []string{CloudNodeController, CloudNodeLifecycleController, NodeRouteController}},
		{"disable before star", []string{"-route", "*"}, []string{CloudNodeController, CloudNodeLifecycleController, ServiceLBController}},
		{"disable legacy name", []string{"*", "-route-controller", "-cloud-node-lifecycle"}, []string{CloudNodeController, ServiceLBController}},
		{"star plus opt-in", []string{"*", "opt-in"}, append(append([]string{}, all...), "opt-in-controller")},
		{"only named, registration order", []string{"route", "cloud-node"}, []string{CloudNodeController, NodeRouteController}},
		{"opt-in alone", []string{"opt-in-controller"}, []string{"opt-in-controller"}},
		{"canonical names", []string{ServiceLBController, NodeRouteController}, []string{ServiceLBController, NodeRouteController}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SelectControllers(testSpecs(optIn), tt.flags)
			if err != nil {
				t.Fatalf("SelectControllers(%q): %v", tt.flags, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("SelectControllers(%q) = %q, want %q", tt.flags, got, tt.want)
			}
		})
	}
}

func TestSelectControllersErrors(t *testing.T) {
	known := "known controllers are cloud-node-controller, cloud-node-lifecycle-controller, service-lb-controller, node-route-controller, opt-in-controller"
	tests := []struct {
		name  string
		flags []string
		want  string
	}{
		{"unknown", []string{"*", "foo"}, `unknown controller "foo": ` + known},
		{"unknown disabled", []string{"*", "-foo"}, `unknown controller "foo": ` + known},
		{"case-sensitive", []string{"Route"}, `unknown controller "Route"`},
		{"empty entry", []string{"*", ""}, "empty controller name: " + known},
		{"minus star", []string{"-*"}, `"-*" is not supported: to disable controllers list each as -name`},
		{"star twice", []string{"*", "*"}, `"*" is listed twice`},
		{"duplicate", []string{"route", "route"}, `"route" repeats "route": both name node-route-controller`},
		{"duplicate via alias", []string{"route-controller", "node-route-controller"}, `"node-route-controller" repeats "route-controller": both name node-route-controller`},
		{"duplicate disable", []string{"*", "-service", "-service-controller"}, `"-service-controller" repeats "-service": both name service-lb-controller`},
		{"conflict", []string{"service", "-service"}, `"-service" contradicts "service": both name service-lb-controller`},
		{"conflict via alias", []string{"-cloud-node", "cloud-node-controller"}, `"cloud-node-controller" contradicts "-cloud-node": both name cloud-node-controller`},
		{"nothing enabled", []string{}, `"" enables no controller: ` + known},
		{"all disabled", []string{"*", "-cloud-node", "-cloud-node-lifecycle", "-service", "-route"}, `enables no controller`},
		{"opt-in disabled only", []string{"-opt-in"}, `"-opt-in" enables no controller`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SelectControllers(testSpecs(optIn), tt.flags)
			if err == nil {
				t.Fatalf("SelectControllers(%q) = %q, want an error", tt.flags, got)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestCheckSpecs(t *testing.T) {
	tests := []struct {
		name  string
		specs []ControllerSpec
		want  string
	}{
		{"valid", testSpecs(optIn), ""},
		{"empty name", testSpecs(ControllerSpec{}), `controller "": invalid name or alias ""`},
		{"duplicate name", testSpecs(ControllerSpec{Name: ServiceLBController}), `name or alias "service-lb-controller" is already used by controller "service-lb-controller"`},
		{"alias clashes with another spec", testSpecs(ControllerSpec{Name: "x", Aliases: []string{"route"}}), `controller "x": name or alias "route" is already used by controller "node-route-controller"`},
		{"star alias", testSpecs(ControllerSpec{Name: "x", Aliases: []string{"*"}}), `invalid name or alias "*"`},
		{"minus alias", testSpecs(ControllerSpec{Name: "x", Aliases: []string{"-y"}}), `invalid name or alias "-y"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkSpecs(tt.specs)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("checkSpecs: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("checkSpecs = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
