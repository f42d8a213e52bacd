package profiles

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

//go:embed data
var data embed.FS

// Config formats a profile's cloud config can have (CloudConfigRules.Format).
const (
	// FormatYAML: a YAML or JSON mapping; Defaults and Set apply to its top-level keys.
	FormatYAML = "yaml"
	// FormatOpaque: copied as it is.
	FormatOpaque = "opaque"
)

// Profile is one platform: what the operator renders for it.
type Profile struct {
	// Name is the platform name spec.platform uses.
	Name string `json:"name"`
	// Description says what the platform is, for errors and docs.
	Description string `json:"description"`
	// Provider is the CCM's --cloud-provider; empty means spec.provider is required.
	Provider string `json:"provider"`
	// Image is the image repository; the tag is spec.version or the operator's version.
	// Empty means spec.image is required.
	Image string `json:"image"`
	// NepheleFlags says the image is nephele's manager, whose flag set checks extra args.
	NepheleFlags bool `json:"nepheleFlags"`
	// FeatureGates says the image takes --feature-gates.
	FeatureGates bool `json:"featureGates"`
	// ClusterCIDR is the default pod range.
	ClusterCIDR string `json:"clusterCIDR"`
	// ConfigureCloudRoutes is the default of --configure-cloud-routes.
	ConfigureCloudRoutes bool `json:"configureCloudRoutes"`
	// CloudConfig says how the user's cloud config is transformed.
	CloudConfig CloudConfigRules `json:"cloudConfig"`
	// Objects are template files under data/ rendered beside the CCM's objects.
	Objects []string `json:"objects,omitempty"`
	// CSI is the platform's CSI driver, which spec.volumes runs; nil when the platform
	// has none.
	CSI *CSIRules `json:"csi,omitempty"`

	// templates are the Objects' contents, read by Load.
	templates map[string]string
}

// CloudConfigRules is a profile's transform of the user's cloud config.
type CloudConfigRules struct {
	// Format is FormatYAML or FormatOpaque.
	Format string `json:"format"`
	// Defaults are top-level keys set when the user's config lacks them.
	Defaults map[string]any `json:"defaults,omitempty"`
	// Set are top-level keys always set, whatever the user's config says.
	Set map[string]any `json:"set,omitempty"`
}

// CSIRules are a platform's CSI driver: nephele's driver (package csi) built with the
// platform's provider.
type CSIRules struct {
	// DriverImage is the driver's image repository; the tag is spec.version or the
	// operator's version, as for the CCM's.
	DriverImage string `json:"driverImage"`
	// MaxVolumesPerNode is the cloud's attach limit, told to the scheduler.
	MaxVolumesPerNode int64 `json:"maxVolumesPerNode"`
}

// UnknownPlatformError is the answer for a platform no profile has.
type UnknownPlatformError struct {
	Platform string
	Known    []string
}

func (e *UnknownPlatformError) Error() string {
	return fmt.Sprintf("no profile for platform %q; the operator knows %s", e.Platform, strings.Join(e.Known, ", "))
}

// Names returns the built-in platforms, sorted.
func Names() []string {
	entries, _ := fs.ReadDir(data, "data") // embedded: cannot fail
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// Load returns the built-in profile for platform, or an *UnknownPlatformError.
func Load(platform string) (Profile, error) {
	raw, err := data.ReadFile(path.Join("data", platform+".yaml"))
	if err != nil || strings.ContainsAny(platform, "/.") {
		return Profile{}, &UnknownPlatformError{Platform: platform, Known: Names()}
	}
	var p Profile
	if err := yaml.UnmarshalStrict(raw, &p); err != nil {
		return Profile{}, fmt.Errorf("profile %s: %w", platform, err)
	}
	if p.Name != platform {
		return Profile{}, fmt.Errorf("profile file %s.yaml names itself %q", platform, p.Name)
	}
	switch p.CloudConfig.Format {
	case FormatYAML, FormatOpaque:
	default:
		return Profile{}, fmt.Errorf("profile %s: cloudConfig.format %q: want yaml or opaque", platform, p.CloudConfig.Format)
	}
	if p.CSI != nil && p.CSI.DriverImage == "" {
		return Profile{}, fmt.Errorf("profile %s: csi.driverImage is empty", platform)
	}
	p.templates = map[string]string{}
	for _, name := range p.Objects {
		t, err := data.ReadFile(path.Join("data", name))
		if err != nil {
			return Profile{}, fmt.Errorf("profile %s: object template %s: %w", platform, name, err)
		}
		p.templates[name] = string(t)
	}
	return p, nil
}

// TransformCloudConfig applies the profile's rules to the user's cloud config.
func (p Profile) TransformCloudConfig(in []byte) ([]byte, error) {
	if p.CloudConfig.Format == FormatOpaque || (len(p.CloudConfig.Defaults) == 0 && len(p.CloudConfig.Set) == 0) {
		return in, nil
	}
	m := map[string]any{}
	if len(bytes.TrimSpace(in)) > 0 {
		if err := yaml.Unmarshal(in, &m); err != nil {
			return nil, fmt.Errorf("platform %s reads its cloud config as YAML: %w", p.Name, err)
		}
		if m == nil {
			return nil, errors.New("the cloud config is not a YAML mapping")
		}
	}
	for k, v := range p.CloudConfig.Defaults {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	for k, v := range p.CloudConfig.Set {
		m[k] = v
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode the cloud config: %w", err)
	}
	return out, nil
}
