package migration

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Group is the API group of LeaderMigrationConfiguration.
const Group = "controllermanager.config.k8s.io"

// Kind is the only kind a leader migration config file may hold.
const Kind = "LeaderMigrationConfiguration"

// ResourceLockLeases is the only resource lock nephele supports: Endpoints and
// ConfigMap locks were removed from client-go and no current component can hold them.
const ResourceLockLeases = "leases"

// AnyComponent as a controller leader's component means the controller may run in
// whichever participating component holds the migration lease.
const AnyComponent = "*"

// DefaultLeaderName is the migration lease upstream uses when no config file is given.
const DefaultLeaderName = "cloud-provider-extraction-migration"

// Versions accepted in apiVersion, all with the same meaning. v1 dropped resourceLock
// (always leases); v1alpha1 and v1beta1 require it.
var versions = []string{"v1", "v1beta1", "v1alpha1"}

// Config is a LeaderMigrationConfiguration: which controllers are migrating, and the
// lease that guards them during the migration.
type Config struct {
	// APIVersion is the group/version the config was written in.
	APIVersion string `json:"apiVersion"`
	// Kind is always LeaderMigrationConfiguration.
	Kind string `json:"kind"`
	// LeaderName is the name of the migration Lease.
	LeaderName string `json:"leaderName"`
	// ResourceLock is the kind of lock: always "leases" once parsed. It is not
	// marshalled, so that a Config marshals to a valid v1 document.
	ResourceLock string `json:"-"`
	// ControllerLeaders lists the migrating controllers and where each should run.
	ControllerLeaders []ControllerLeader `json:"controllerLeaders"`
}

// ControllerLeader names one migrating controller and the component that should run it.
type ControllerLeader struct {
	// Name is the controller's name, as any participating component spells it
	// (upstream configs use kube-controller-manager's legacy names such as
	// route-controller).
	Name string `json:"name"`
	// Component is the component that runs the controller, for example
	// kube-controller-manager or cloud-controller-manager, or AnyComponent.
	Component string `json:"component"`
}

// Default returns upstream's default migration config, used when leader migration is
// enabled without a config file: the three controllers that move out of
// kube-controller-manager, under the names kube-controller-manager gave them before
// they were renamed, runnable by any participating component. Upstream has one default
// for every component, so Default takes none.
func Default() *Config {
	return &Config{
		APIVersion:   Group + "/v1",
		Kind:         Kind,
		LeaderName:   DefaultLeaderName,
		ResourceLock: ResourceLockLeases,
		ControllerLeaders: []ControllerLeader{
			{Name: "route-controller", Component: AnyComponent},
			{Name: "service-controller", Component: AnyComponent},
			{Name: "cloud-node-lifecycle-controller", Component: AnyComponent},
		},
	}
}

// Load reads and parses the config file at path. Errors start with the path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err // already "open <path>: <reason>"
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// rawConfig is the union of every version's fields. ResourceLock is a pointer so that
// a v1 file that sets it can be told from one that does not.
type rawConfig struct {
	APIVersion        string             `json:"apiVersion"`
	Kind              string             `json:"kind"`
	LeaderName        string             `json:"leaderName"`
	ResourceLock      *string            `json:"resourceLock"`
	ControllerLeaders []ControllerLeader `json:"controllerLeaders"`
}

// Parse decodes a config from YAML or JSON, strictly: unknown and duplicate fields are
// errors, as they are for upstream's decoder. Every problem found is reported in one
// line, each naming its field.
func Parse(data []byte) (*Config, error) {
	var raw rawConfig
	if err := yaml.UnmarshalStrict(data, &raw); err != nil {
		return nil, &InvalidError{Problems: []string{decodeProblem(err)}}
	}
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	version, versionOK := parseAPIVersion(raw.APIVersion)
	switch {
	case raw.APIVersion == "":
		add("apiVersion: required: use %s/v1", Group)
	case !versionOK:
		add("apiVersion: %q is not supported: use %s/%s", raw.APIVersion, Group, strings.Join(versions, ", "+Group+"/"))
	}
	switch raw.Kind {
	case Kind:
	case "":
		add("kind: required: must be %s", Kind)
	default:
		add("kind: %q is not supported: must be %s", raw.Kind, Kind)
	}
	if raw.LeaderName == "" {
		add("leaderName: required: the name of the migration Lease")
	} else if msgs := validation.IsDNS1123Subdomain(raw.LeaderName); len(msgs) > 0 {
		add("leaderName: %q is not a valid Lease name: %s", raw.LeaderName, strings.Join(msgs, "; "))
	}
	switch {
	case versionOK && version == "v1" && raw.ResourceLock != nil:
		add("resourceLock: not a field of %s/v1, which always uses leases: remove it", Group)
	case versionOK && version != "v1" && raw.ResourceLock == nil:
		add("resourceLock: required in %s: must be %q", version, ResourceLockLeases)
	case raw.ResourceLock != nil && *raw.ResourceLock != ResourceLockLeases:
		add("resourceLock: %q is not supported: only %q works with current Kubernetes", *raw.ResourceLock, ResourceLockLeases)
	}
	seen := make(map[string]int, len(raw.ControllerLeaders))
	for i, l := range raw.ControllerLeaders {
		if l.Name == "" {
			add("controllerLeaders[%d].name: required", i)
		} else if j, dup := seen[l.Name]; dup {
			add("controllerLeaders[%d].name: %q is already listed at controllerLeaders[%d]", i, l.Name, j)
		} else {
			seen[l.Name] = i
		}
		if l.Component == "" {
			add("controllerLeaders[%d].component: required: a component name such as cloud-controller-manager, or %q", i, AnyComponent)
		}
	}
	if len(problems) > 0 {
		return nil, &InvalidError{Problems: problems}
	}
	return &Config{
		APIVersion:        raw.APIVersion,
		Kind:              raw.Kind,
		LeaderName:        raw.LeaderName,
		ResourceLock:      ResourceLockLeases,
		ControllerLeaders: raw.ControllerLeaders,
	}, nil
}

// InvalidError reports what is wrong with a config, one problem per entry.
type InvalidError struct {
	Problems []string
}

func (e *InvalidError) Error() string { return strings.Join(e.Problems, "; ") }

// parseAPIVersion returns the version of a controllermanager.config.k8s.io apiVersion.
func parseAPIVersion(apiVersion string) (string, bool) {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok || group != Group {
		return "", false
	}
	for _, v := range versions {
		if v == version {
			return v, true
		}
	}
	return "", false
}

// decodeProblem turns a sigs.k8s.io/yaml error into one line without the decoder's
// layered prefixes, which only repeat that decoding failed.
func decodeProblem(err error) string {
	msg := err.Error()
	for _, p := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "json: ", "error converting YAML to JSON: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	msg = strings.Join(strings.Fields(msg), " ")
	return "not a valid " + Kind + ": " + msg
}
