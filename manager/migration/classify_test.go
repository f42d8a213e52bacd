package migration

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const ccm = "cloud-controller-manager"

// resolver answers for nephele's four controllers and their upstream and legacy names.
func resolver() Resolver {
	names := map[string]string{
		"cloud-node-controller":           "cloud-node-controller",
		"cloud-node":                      "cloud-node-controller",
		"cloud-node-lifecycle-controller": "cloud-node-lifecycle-controller",
		"cloud-node-lifecycle":            "cloud-node-lifecycle-controller",
		"service-lb-controller":           "service-lb-controller",
		"service":                         "service-lb-controller",
		"service-controller":              "service-lb-controller",
		"node-route-controller":           "node-route-controller",
		"route":                           "node-route-controller",
		"route-controller":                "node-route-controller",
	}
	return func(name string) (string, bool) {
		c, ok := names[name]
		return c, ok
	}
}

var allEnabled = []string{"cloud-node-controller", "cloud-node-lifecycle-controller", "service-lb-controller", "node-route-controller"}

// config builds a Config listing name=component pairs.
func config(pairs ...string) *Config {
	c := &Config{APIVersion: Group + "/v1", Kind: Kind, LeaderName: "lm", ResourceLock: ResourceLockLeases}
	for _, p := range pairs {
		name, component, _ := strings.Cut(p, "=")
		c.ControllerLeaders = append(c.ControllerLeaders, ControllerLeader{Name: name, Component: component})
	}
	return c
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name    string
		config  *Config
		enabled []string
		want    Plan
	}{
		{
			name:    "upstream default config matches through legacy names",
			config:  Default(),
			enabled: allEnabled,
			want: Plan{
				Owned:    []string{"cloud-node-controller"},
				Migrated: []string{"cloud-node-lifecycle-controller", "service-lb-controller", "node-route-controller"},
			},
		},
		{
			name:    "short aliases and canonical names",
			config:  config("route="+ccm, "service-lb-controller=*"),
			enabled: allEnabled,
			want: Plan{
				Owned:    []string{"cloud-node-controller", "cloud-node-lifecycle-controller"},
				Migrated: []string{"service-lb-controller", "node-route-controller"},
			},
		},
		{
			name:    "listed for kube-controller-manager is unowned",
			config:  config("route-controller=kube-controller-manager", "service-controller="+ccm),
			enabled: allEnabled,
			want: Plan{
				Owned:    []string{"cloud-node-controller", "cloud-node-lifecycle-controller"},
				Migrated: []string{"service-lb-controller"},
				Unowned:  []string{"node-route-controller"},
			},
		},
		{
			name: "controllers only kube-controller-manager has are ignored",
			config: config("garbage-collector-controller=kube-controller-manager", "route-controller="+ccm,
				"nodeipam=kube-controller-manager"),
			enabled: allEnabled,
			want: Plan{
				Owned:    []string{"cloud-node-controller", "cloud-node-lifecycle-controller", "service-lb-controller"},
				Migrated: []string{"node-route-controller"},
			},
		},
		{
			name:    "listed but not enabled does not appear",
			config:  config("route-controller=*", "service-controller=kube-controller-manager"),
			enabled: []string{"cloud-node-controller", "service-lb-controller"},
			want: Plan{
				Owned:   []string{"cloud-node-controller"},
				Unowned: []string{"service-lb-controller"},
			},
		},
		{
			name:    "one controller under two names placed alike",
			config:  config("route-controller=*", "node-route-controller="+ccm),
			enabled: allEnabled,
			want: Plan{
				Owned:    []string{"cloud-node-controller", "cloud-node-lifecycle-controller", "service-lb-controller"},
				Migrated: []string{"node-route-controller"},
			},
		},
		{
			name:    "empty config owns everything",
			config:  config(),
			enabled: allEnabled,
			want:    Plan{Owned: allEnabled},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.config.Classify(ccm, tt.enabled, resolver())
			if err != nil {
				t.Fatalf("Classify: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Classify = %+v, want %+v", got, tt.want)
			}
			for _, name := range tt.enabled {
				if _, ok := got.Class(name); !ok {
					t.Errorf("Plan.Class(%q) not found", name)
				}
			}
		})
	}
}

func TestClassifyErrors(t *testing.T) {
	tests := []struct {
		name        string
		config      *Config
		want        string
		wantUnknown bool
	}{
		{
			name:        "unknown controller for this component",
			config:      config("route-controller=*", "frobnicator="+ccm),
			want:        `controllerLeaders[1].name: "frobnicator" is listed for component "cloud-controller-manager" but is not a controller of cloud-controller-manager`,
			wantUnknown: true,
		},
		{
			name:        "unknown controller for any component",
			config:      config("nodeipam=*"),
			want:        `controllerLeaders[0].name: "nodeipam" is listed for component "*"`,
			wantUnknown: true,
		},
		{
			name:   "one controller placed two ways",
			config: config("route-controller=kube-controller-manager", "route="+ccm),
			want:   `controllerLeaders[1].name: "route" and controllerLeaders[0].name "route-controller" both name controller node-route-controller but place it differently`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.config.Classify(ccm, allEnabled, resolver())
			if err == nil {
				t.Fatalf("Classify = %+v, want an error", p)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if got := errors.Is(err, ErrUnknownController); got != tt.wantUnknown {
				t.Errorf("errors.Is(err, ErrUnknownController) = %v, want %v", got, tt.wantUnknown)
			}
		})
	}
}

func TestPlanClass(t *testing.T) {
	p := Plan{Owned: []string{"a"}, Migrated: []string{"b"}, Unowned: []string{"c"}}
	for name, want := range map[string]Class{"a": Owned, "b": Migrated, "c": Unowned} {
		if got, ok := p.Class(name); !ok || got != want {
			t.Errorf("Class(%q) = %v, %v; want %v", name, got, ok, want)
		}
	}
	if _, ok := p.Class("d"); ok {
		t.Error("Class(d) found a controller the plan does not have")
	}
	if Migrated.String() != "migrated" || Class(7).String() != "Class(7)" {
		t.Errorf("String: %q %q", Migrated, Class(7))
	}
}
