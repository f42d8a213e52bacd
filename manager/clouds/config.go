package clouds

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/smallfile"
)

// APIVersion and Kind are what a --clouds-config file declares itself as.
const (
	APIVersion = "nephele.dev/v1alpha1"
	Kind       = "CloudsConfiguration"
)

// MaxFileSize bounds the --clouds-config file and each cloud config it names, and the
// manager's --cloud-config: a device or a huge file is refused, not read forever.
const MaxFileSize = 1 << 20

// File is the --clouds-config file:
//
//	apiVersion: nephele.dev/v1alpha1
//	kind: CloudsConfiguration
//	clouds:
//	- name: east                        # a DNS label: metrics' provider label, readiness checks, logs
//	  provider: local                   # a provider this binary registers
//	  cloudConfig: /etc/nephele/east.yaml  # required: the provider's config, with its credentials
//	  loadBalancerClass: nephele.dev/east  # required: the Services this cloud serves
//	  default: true                     # exactly one: also serves Services without a class
//	  platforms: [east]                 # optional: provider-ID schemes; default the provider's own
//	- name: west
//	  ...
type File struct {
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"`
	Clouds     []Cloud `json:"clouds"`
}

// Cloud is one cloud the manager serves.
type Cloud struct {
	// Name names the cloud in metrics (the provider label), readiness checks and logs.
	Name string `json:"name"`
	// Provider is the registered name of the cloud's provider.
	Provider string `json:"provider"`
	// CloudConfig is the path of the provider's configuration. Required: it carries
	// the cloud's credentials, and two clouds never share one.
	CloudConfig string `json:"cloudConfig"`
	// LoadBalancerClass is the spec.loadBalancerClass of the Services whose load
	// balancers this cloud makes. Required and distinct.
	LoadBalancerClass string `json:"loadBalancerClass"`
	// Default makes this cloud serve Services without a class too, and adopt nodes
	// that declare no platform under --undeclared-nodes=adopt. Exactly one cloud is
	// the default.
	Default bool `json:"default,omitempty"`
	// Platforms are the provider-ID schemes of the nodes this cloud owns; empty takes
	// the provider's own (cloud.Platforms). Distinct across clouds.
	Platforms []string `json:"platforms,omitempty"`
}

// Marshal returns f as YAML, for a tool that writes the file (nephele up).
func (f File) Marshal() ([]byte, error) {
	data, err := yaml.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("clouds config: %w", err)
	}
	return data, nil
}

// Source is a cloud of a checked file with its cloud config read.
type Source struct {
	Cloud
	// Config is the content of CloudConfig, read once at start.
	Config []byte
}

// InvalidError lists everything wrong with a --clouds-config file, each problem naming
// its field.
type InvalidError struct {
	Problems []string
}

// Error implements error.
func (e *InvalidError) Error() string { return strings.Join(e.Problems, "; ") }

// Load reads the file at path, checks it, and reads every cloud config it names.
func Load(path string) ([]Source, error) {
	data, err := smallfile.Read(path, MaxFileSize)
	if err != nil {
		return nil, err
	}
	f, err := Parse(data)
	if err != nil {
		return nil, err
	}
	out := make([]Source, 0, len(f.Clouds))
	var problems []string
	for i, c := range f.Clouds {
		config, err := smallfile.Read(c.CloudConfig, MaxFileSize)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s.cloudConfig: %v", field(i, c), err))
			continue
		}
		out = append(out, Source{Cloud: c, Config: config})
	}
	if len(problems) > 0 {
		return nil, &InvalidError{Problems: problems}
	}
	return out, nil
}

// Parse decodes and checks a file, strictly: unknown and duplicate fields are errors.
func Parse(data []byte) (*File, error) {
	var f File
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, &InvalidError{Problems: []string{"not a valid clouds config: " + strings.Join(strings.Fields(err.Error()), " ")}}
	}
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	switch f.APIVersion {
	case APIVersion:
	case "":
		add("apiVersion: required: use %s", APIVersion)
	default:
		add("apiVersion: %q is not supported: use %s", f.APIVersion, APIVersion)
	}
	switch f.Kind {
	case Kind:
	case "":
		add("kind: required: must be %s", Kind)
	default:
		add("kind: %q is not supported: must be %s", f.Kind, Kind)
	}
	if len(f.Clouds) == 0 {
		add("clouds: required: at least one cloud")
	}

	names := map[string]int{}
	configs := map[string]int{}
	classes := map[string]int{}
	platforms := map[string]int{}
	var defaults []string
	for i, c := range f.Clouds {
		at := field(i, c)
		if c.Name == "" {
			add("%s.name: required: a DNS label such as east", at)
		} else if msgs := validation.IsDNS1123Label(c.Name); len(msgs) > 0 {
			add("%s.name: %q: %s", at, c.Name, strings.Join(msgs, "; "))
		} else if j, ok := names[c.Name]; ok {
			add("%s.name: %q is also clouds[%d]'s: names must differ", at, c.Name, j)
		} else {
			names[c.Name] = i
		}
		if c.Provider == "" {
			add("%s.provider: required: the name of the cloud's provider", at)
		}
		switch j, dup := configs[filepath.Clean(c.CloudConfig)]; {
		case c.CloudConfig == "":
			add("%s.cloudConfig: required: the provider's configuration, with this cloud's own credentials", at)
		case dup:
			add("%s.cloudConfig: %s is also clouds[%d]'s: each cloud has its own configuration and credentials", at, c.CloudConfig, j)
		default:
			configs[filepath.Clean(c.CloudConfig)] = i
		}
		switch j, dup := classes[c.LoadBalancerClass]; {
		case c.LoadBalancerClass == "":
			add("%s.loadBalancerClass: required: the spec.loadBalancerClass of this cloud's Services, such as nephele.dev/%s (the default cloud serves Services without a class too)", at, orDefault(c.Name, "east"))
		case len(validation.IsQualifiedName(c.LoadBalancerClass)) > 0:
			add("%s.loadBalancerClass: %q: must be a qualified name such as example.com/my-lb: %s", at, c.LoadBalancerClass, strings.Join(validation.IsQualifiedName(c.LoadBalancerClass), "; "))
		case dup:
			add("%s.loadBalancerClass: %q is also clouds[%d]'s: each class goes to one cloud", at, c.LoadBalancerClass, j)
		default:
			classes[c.LoadBalancerClass] = i
		}
		if slices.Contains(c.Platforms, cloud.AllPlatforms) {
			add("%s.platforms: %q: a cloud of several cannot own every node; name its provider-ID schemes", at, cloud.AllPlatforms)
		} else if err := (cloud.NodeOwnership{Platforms: c.Platforms}).Validate(); err != nil {
			add("%s.platforms: %v", at, err)
		}
		for _, p := range c.Platforms {
			if j, dup := platforms[p]; dup && j != i {
				add("%s.platforms: %q is also clouds[%d]'s: a provider-ID scheme names one cloud", at, p, j)
			}
			platforms[p] = i
		}
		if c.Default {
			defaults = append(defaults, at)
		}
	}
	switch {
	case len(f.Clouds) == 0:
	case len(defaults) == 0:
		add("clouds: no cloud is the default: set default: true on the one that serves Services without a class")
	case len(defaults) > 1:
		add("clouds: %s are all default: exactly one may be", strings.Join(defaults, ", "))
	}
	if len(problems) > 0 {
		return nil, &InvalidError{Problems: problems}
	}
	return &f, nil
}

// field names cloud i in a problem: clouds[i], and its name when it has one.
func field(i int, c Cloud) string {
	if c.Name == "" {
		return fmt.Sprintf("clouds[%d]", i)
	}
	return fmt.Sprintf("clouds[%d] (%s)", i, c.Name)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
