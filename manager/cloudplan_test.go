package manager

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/manager/clouds"
)

// schemeProvider is a provider without capabilities whose cloud config is its one
// platform (the provider-ID scheme of its instances), "fail" refusing it.
type schemeProvider struct{ scheme string }

func (p schemeProvider) ProviderName() string                       { return "schemes" }
func (p schemeProvider) ProviderPlatforms() []string                { return []string{p.scheme} }
func (schemeProvider) Instances() (cloud.Instances, bool)           { return nil, false }
func (schemeProvider) InstanceLister() (cloud.InstanceLister, bool) { return nil, false }
func (schemeProvider) LoadBalancers() (cloud.LoadBalancers, bool)   { return nil, false }
func (schemeProvider) Routes() (cloud.Routes, bool)                 { return nil, false }

func schemeRegistry(t *testing.T) *cloud.Registry {
	t.Helper()
	r := cloud.NewRegistry()
	if err := r.Register("schemes", func(config io.Reader) (cloud.Provider, error) {
		b, err := io.ReadAll(config)
		if err != nil {
			return nil, err
		}
		if s := strings.TrimSpace(string(b)); s != "fail" {
			return schemeProvider{scheme: s}, nil
		}
		return nil, errors.New("token: required")
	}); err != nil {
		t.Fatal(err)
	}
	return r
}

// multiConfig is a completed configuration serving the given clouds.
func multiConfig(srcs ...clouds.Source) CompletedConfig {
	o := NewOptions()
	o.CloudsConfigFile = "clouds.yaml"
	return CompletedConfig{&completedConfig{options: *o, clouds: srcs, controllers: DefaultControllerConfig()}}
}

func source(name, scheme string, def bool, platforms ...string) clouds.Source {
	return clouds.Source{Cloud: clouds.Cloud{Name: name, Provider: "schemes", CloudConfig: "/" + name, LoadBalancerClass: "x.dev/" + name,
		Default: def, Platforms: platforms}, Config: []byte(scheme)}
}

func TestBuildClouds(t *testing.T) {
	reg := schemeRegistry(t)

	t.Run("each cloud owns its platforms; the default serves unclassed Services and adopts", func(t *testing.T) {
		plans, err := buildClouds(multiConfig(source("east", "east", true), source("west", "w1", false, "w1", "w2")), reg)
		if err != nil {
			t.Fatal(err)
		}
		east, west := plans[0].controllers, plans[1].controllers
		if !slices.Equal(east.Ownership.Platforms, []string{"east"}) || east.Ownership.Undeclared != cloud.UndeclaredAdopt ||
			east.LoadBalancerClass != "x.dev/east" || !east.ServeUnclassed {
			t.Errorf("east = %+v", east)
		}
		if !slices.Equal(west.Ownership.Platforms, []string{"w1", "w2"}) || west.Ownership.Undeclared != cloud.UndeclaredIgnore ||
			west.LoadBalancerClass != "x.dev/west" || west.ServeUnclassed {
			t.Errorf("west = %+v", west)
		}
		if east.Ownership.Quiet || !west.Ownership.Quiet {
			t.Errorf("quiet: east %t, west %t; want only the default to tell about nodes nobody owns", east.Ownership.Quiet, west.Ownership.Quiet)
		}
		// Each knows the other as its sibling, so neither tells about the other's nodes.
		undeclared := &corev1.Node{}
		if !west.Ownership.OwnedBySibling(undeclared) || east.Ownership.OwnedBySibling(undeclared) {
			t.Error("an undeclared node is not east's (the default) as west's sibling")
		}
		if !east.Ownership.OwnedBySibling(&corev1.Node{Spec: corev1.NodeSpec{ProviderID: "w2://i-1"}}) {
			t.Error("a w2 node is not west's as east's sibling")
		}
		if plans[0].name != "east" || plans[0].instance("service-lb-controller") != "service-lb-controller.east" {
			t.Errorf("plan name %q, instance %q", plans[0].name, plans[0].instance("service-lb-controller"))
		}
	})

	errTests := []struct {
		name string
		srcs []clouds.Source
		want string
	}{
		{"two clouds, one scheme", []clouds.Source{source("east", "local", true), source("west", "local", false)},
			`invalid value for --clouds-config: clouds[0] (east) and clouds[1] (west) both own provider-ID scheme "local": give each cloud's provider a scheme of its own`},
		{"a provider nobody registered", []clouds.Source{{Cloud: clouds.Cloud{Name: "east", Provider: "nope", Default: true}}},
			"invalid value for --clouds-config: clouds[0] (east).provider: "},
		{"a cloud config the provider refuses", []clouds.Source{source("east", "east", true), source("west", "fail", false)},
			"invalid value for --clouds-config: clouds[1] (west).cloudConfig /west: creating cloud provider \"schemes\": token: required"},
		{"a platform that is no scheme", []clouds.Source{source("east", "East_1", true)},
			`invalid value for --clouds-config: clouds[0] (east): provider schemes's platforms ["East_1"]: platform "East_1"`},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := buildClouds(multiConfig(tt.srcs...), reg)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("buildClouds = %v\nwant one line starting %q", err, tt.want)
			}
		})
	}

	t.Run("one cloud keeps the flags", func(t *testing.T) {
		cfg := multiConfig(clouds.Source{Cloud: clouds.Cloud{Provider: "schemes", LoadBalancerClass: "x.dev/only"}, Config: []byte("east")})
		cfg.options.CloudsConfigFile = ""
		cfg.controllers.LoadBalancerClass = "x.dev/only"
		plans, err := buildClouds(cfg, reg)
		if err != nil {
			t.Fatal(err)
		}
		c := plans[0].controllers
		if !c.Ownership.OwnsEveryNode() || c.ServeUnclassed || c.LoadBalancerClass != "x.dev/only" || plans[0].instance("x") != "x" {
			t.Errorf("the single cloud's settings = %+v", c)
		}
	})
}
