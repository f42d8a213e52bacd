package render

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nephele-dev/nephele/controllers"
	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/manager"
)

// Where the cloud config comes from (Options.CloudConfig.Source).
const (
	SourceSecret    = "secret"
	SourceConfigMap = "configmap"
	SourceNone      = "none"
)

// Defaults of Options. The cluster CIDR and the provider are those of a `nephele up`
// cluster, so that the default rendering runs there as it is.
const (
	DefaultProvider        = "local"
	DefaultNamespace       = "kube-system"
	DefaultReplicas        = 2
	DefaultCloudConfigName = "nephele-cloud-config"
	DefaultCloudConfigKey  = "cloud.conf"
	DefaultClusterName     = "kubernetes"
	DefaultClusterCIDR     = "10.244.0.0/16"
	DefaultCPURequest      = "100m"
	DefaultMemoryRequest   = "128Mi"
	DefaultMemoryLimit     = "512Mi"
)

// DefaultImage is the cloud-controller-manager image `make images` builds.
var DefaultImage = images.CloudControllerManager.Ref(images.DefaultVersion)

// Options are the settings of a rendering; each is a flag of `nephele manifests`.
type Options struct {
	// Provider is --provider, the manager's --cloud-provider.
	Provider string
	// Image is --image, the cloud-controller-manager image reference.
	Image string
	// ImagePullPolicy is --image-pull-policy.
	ImagePullPolicy string
	// Namespace is --namespace: where the Deployment, its ServiceAccount, Service,
	// PodDisruptionBudget and Lease live.
	Namespace string
	// Replicas is --replicas.
	Replicas int
	// CloudConfig is where the provider's configuration file comes from.
	CloudConfig CloudConfig
	// ClusterName is --cluster-name.
	ClusterName string
	// ClusterCIDR is --cluster-cidr: the pod range(s), one IPv4 and/or one IPv6 CIDR.
	ClusterCIDR string
	// ConfigureCloudRoutes is --configure-cloud-routes.
	ConfigureCloudRoutes bool
	// Controllers is --controllers, as the manager's flag.
	Controllers []string
	// ControllerSpecs are the controllers the image's manager carries, as its main
	// passes them to manager.NewCommand: --controllers selects among them, and each
	// enabled one brings the RBAC rules and informers its spec declares. Empty means
	// nephele's four (controllers.Default()); a provider with controllers of its own
	// passes the same list its binary runs. It has no flag.
	ControllerSpecs []manager.ControllerSpec
	// ExtraArgs is --extra-arg, repeated: further flags of the manager, --name=value.
	ExtraArgs []string
	// UseServiceAccountCredentials is --use-service-account-credentials.
	UseServiceAccountCredentials bool
	// MetricsService is --metrics-service: a Service in front of port 10258 and a
	// ClusterRole that allows reading /metrics.
	MetricsService bool
	// ServiceMonitor is --service-monitor: a Prometheus Operator ServiceMonitor for
	// the metrics Service.
	ServiceMonitor bool
	// Resources are the container's requests and limits.
	Resources Resources
}

// CloudConfig says which Secret or ConfigMap key holds the provider's configuration.
type CloudConfig struct {
	// Source is --cloud-config-source: SourceSecret, SourceConfigMap or SourceNone.
	Source string
	// Name is --cloud-config-name, the Secret's or ConfigMap's name in the namespace.
	Name string
	// Key is --cloud-config-key, the key holding the file.
	Key string
}

// Resources are the container's resource requests and limits, as quantities.
type Resources struct {
	// CPURequest is --cpu-request.
	CPURequest string
	// MemoryRequest is --memory-request.
	MemoryRequest string
	// MemoryLimit is --memory-limit. There is no CPU limit: a throttled manager
	// renews its lease late (docs/deploy.md).
	MemoryLimit string
}

// DefaultOptions returns the options of the default rendering (deploy/).
func DefaultOptions() Options {
	return Options{
		Provider:                     DefaultProvider,
		Image:                        DefaultImage,
		ImagePullPolicy:              string(corev1.PullIfNotPresent),
		Namespace:                    DefaultNamespace,
		Replicas:                     DefaultReplicas,
		CloudConfig:                  CloudConfig{Source: SourceSecret, Name: DefaultCloudConfigName, Key: DefaultCloudConfigKey},
		ClusterName:                  DefaultClusterName,
		ClusterCIDR:                  DefaultClusterCIDR,
		ConfigureCloudRoutes:         true,
		Controllers:                  []string{"*"},
		UseServiceAccountCredentials: true,
		MetricsService:               true,
		Resources:                    Resources{CPURequest: DefaultCPURequest, MemoryRequest: DefaultMemoryRequest, MemoryLimit: DefaultMemoryLimit},
	}
}

// AddFlags registers every option on fs, with o's values as defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Provider, "provider", o.Provider, "the cloud provider the image carries (the manager's --cloud-provider)")
	fs.StringVar(&o.Image, "image", o.Image, "the cloud-controller-manager image")
	fs.StringVar(&o.ImagePullPolicy, "image-pull-policy", o.ImagePullPolicy, "Always, IfNotPresent or Never")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "namespace of the Deployment, its ServiceAccount, Service, PodDisruptionBudget and Lease")
	fs.IntVar(&o.Replicas, "replicas", o.Replicas, "replicas of the Deployment, at most one per node; one leads, the others stand by")
	fs.StringVar(&o.CloudConfig.Source, "cloud-config-source", o.CloudConfig.Source,
		"where the provider's --cloud-config file comes from: secret, configmap or none")
	fs.StringVar(&o.CloudConfig.Name, "cloud-config-name", o.CloudConfig.Name, "name of the Secret or ConfigMap holding the cloud config, in --namespace")
	fs.StringVar(&o.CloudConfig.Key, "cloud-config-key", o.CloudConfig.Key, "key of the Secret or ConfigMap holding the cloud config")
	fs.StringVar(&o.ClusterName, "cluster-name", o.ClusterName, "the manager's --cluster-name")
	fs.StringVar(&o.ClusterCIDR, "cluster-cidr", o.ClusterCIDR,
		"the manager's --cluster-cidr: the pod range, one IPv4 and/or one IPv6 CIDR, comma-separated; required while routes are configured")
	fs.BoolVar(&o.ConfigureCloudRoutes, "configure-cloud-routes", o.ConfigureCloudRoutes,
		"the manager's --configure-cloud-routes; false leaves the route controller and its permissions out")
	fs.StringSliceVar(&o.Controllers, "controllers", o.Controllers,
		"the manager's --controllers; RBAC is rendered for the enabled controllers only")
	fs.StringArrayVar(&o.ExtraArgs, "extra-arg", o.ExtraArgs,
		"a further flag of the manager, --name=value; repeat for several. Flags this command sets are refused: use its own flag")
	fs.BoolVar(&o.UseServiceAccountCredentials, "use-service-account-credentials", o.UseServiceAccountCredentials,
		"the manager's --use-service-account-credentials: each controller uses its own service account's token (the accounts are rendered, in kube-system)")
	fs.BoolVar(&o.MetricsService, "metrics-service", o.MetricsService,
		"render a Service for port 10258 and a ClusterRole allowed to read /metrics")
	fs.BoolVar(&o.ServiceMonitor, "service-monitor", o.ServiceMonitor,
		"render a Prometheus Operator ServiceMonitor for the metrics Service (needs its CRD)")
	fs.StringVar(&o.Resources.CPURequest, "cpu-request", o.Resources.CPURequest, "the container's CPU request")
	fs.StringVar(&o.Resources.MemoryRequest, "memory-request", o.Resources.MemoryRequest, "the container's memory request")
	fs.StringVar(&o.Resources.MemoryLimit, "memory-limit", o.Resources.MemoryLimit, "the container's memory limit")
}

// ownedFlags are the manager's flags a rendering sets itself, or whose value the
// rendered objects depend on (probes, Service, Role, mounted files): --extra-arg must
// not set them. The value says what to use instead, naming the rendering's options as
// {option} (OptionError.Reason).
var ownedFlags = map[string]string{
	"cloud-provider":                  "use {provider}",
	"cloud-config":                    "use {cloud-config-source}, {cloud-config-name} and {cloud-config-key}",
	"cluster-name":                    "use {cluster-name}",
	"cluster-cidr":                    "use {cluster-cidr}",
	"configure-cloud-routes":          "use {configure-cloud-routes}",
	"controllers":                     "use {controllers}",
	"use-service-account-credentials": "use {use-service-account-credentials}",
	"leader-elect":                    "the Deployment runs several replicas, which need leader election",
	"leader-elect-resource-lock":      "the rendered Role allows Leases only",
	"leader-elect-resource-name":      "the rendered Role names the Lease cloud-controller-manager",
	"leader-elect-resource-namespace": "use {namespace}",
	"enable-leader-migration":         "the rendered Role does not name the migration Lease",
	"leader-migration-config":         "the rendered Deployment mounts no migration configuration",
	"secure-port":                     "the probes and the metrics Service use port 10258",
	"bind-address":                    "the probes reach the pod on its node's address",
	"kubeconfig":                      "the pod uses its ServiceAccount (in-cluster configuration)",
	"master":                          "the pod uses its ServiceAccount (in-cluster configuration)",
	"authentication-kubeconfig":       "the pod uses its ServiceAccount (in-cluster configuration)",
	"authorization-kubeconfig":        "the pod uses its ServiceAccount (in-cluster configuration)",
	"tls-cert-file":                   "the rendered Deployment mounts no certificate",
	"tls-private-key-file":            "the rendered Deployment mounts no certificate",
}

// providerName is a provider's registered name as the manifests accept it.
var providerName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Validate checks o and returns nil, or OptionErrors: one per bad option, each printed
// as "invalid value for --flag: <value>: <what is allowed>" on a line of its own. A
// ControllerSpecs entry the rendering cannot use gives a plain error naming it instead.
func (o Options) Validate() error {
	_, err := o.resolve()
	return err
}

// resolved is what rendering needs beyond Options: the controllers and which run.
type resolved struct {
	Options
	// specs are the controllers the manager carries: ControllerSpecs or the default.
	specs []manager.ControllerSpec
	// enabled are the canonical names of the controllers that run.
	enabled []string
}

// resolve validates o and resolves the controllers. Refused options come back as
// OptionErrors, one per problem; a controller spec the rendering cannot use comes back
// alone, as a plain error (a program's mistake, not a flag's).
func (o Options) resolve() (resolved, error) {
	r := resolved{Options: o}
	var errs OptionErrors
	bad := func(option string, value any, cause error, reason string, args ...any) {
		errs = append(errs, &OptionError{Option: option, Index: -1, Value: value, Reason: fmt.Sprintf(reason, args...), Err: cause})
	}
	if !providerName.MatchString(o.Provider) {
		bad("provider", o.Provider, nil, "want the provider's registered name: lowercase letters, digits and '-'")
	}
	if e := imageError("image", o.Image); e != nil {
		errs = append(errs, e)
	}
	if e := pullPolicyError(corev1.PullPolicy(o.ImagePullPolicy)); e != nil {
		errs = append(errs, e)
	}
	if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		bad("namespace", o.Namespace, nil, "%s", strings.Join(msgs, "; "))
	}
	if o.Replicas < 1 {
		bad("replicas", o.Replicas, nil, "must be at least 1")
	}
	switch o.CloudConfig.Source {
	case SourceSecret, SourceConfigMap:
		if msgs := validation.IsDNS1123Subdomain(o.CloudConfig.Name); len(msgs) > 0 {
			bad("cloud-config-name", o.CloudConfig.Name, nil, "%s", strings.Join(msgs, "; "))
		}
		if msgs := validation.IsConfigMapKey(o.CloudConfig.Key); len(msgs) > 0 {
			bad("cloud-config-key", o.CloudConfig.Key, nil, "%s", strings.Join(msgs, "; "))
		}
	case SourceNone:
	default:
		bad("cloud-config-source", o.CloudConfig.Source, nil, "want secret, configmap or none")
	}
	if o.ClusterName == "" {
		bad("cluster-name", o.ClusterName, nil, "required")
	}
	r.specs = o.ControllerSpecs
	if len(r.specs) == 0 {
		r.specs = controllers.Default()
	}
	if err := checkSpecs(r.specs); err != nil {
		return resolved{}, err
	}
	enabled, err := manager.SelectControllers(r.specs, o.Controllers)
	if err != nil {
		bad("controllers", strings.Join(o.Controllers, ","), err, "")
	}
	if !o.ConfigureCloudRoutes {
		enabled = slices.DeleteFunc(enabled, func(c string) bool { return c == manager.NodeRouteController })
	}
	r.enabled = enabled
	if _, err := manager.ParseClusterCIDRs(o.ClusterCIDR); err != nil {
		bad("cluster-cidr", o.ClusterCIDR, err, "")
	} else if o.ClusterCIDR == "" && slices.Contains(enabled, manager.NodeRouteController) {
		bad("cluster-cidr", o.ClusterCIDR, nil, "required while the route controller runs ({configure-cloud-routes}); "+
			"set it, or {configure-cloud-routes}=false, or {controllers}=*,-route")
	}
	for i, arg := range o.ExtraArgs {
		if reason, err := checkExtraArg(arg); reason != "" || err != nil {
			errs = append(errs, &OptionError{Option: "extra-arg", Index: i, Value: arg, Reason: reason, Err: err})
		}
	}
	if o.ServiceMonitor && !o.MetricsService {
		bad("service-monitor", o.ServiceMonitor, nil, "needs {metrics-service}, the Service it selects")
	}
	quantities := []struct{ option, value string }{
		{"cpu-request", o.Resources.CPURequest},
		{"memory-request", o.Resources.MemoryRequest},
		{"memory-limit", o.Resources.MemoryLimit},
	}
	parsed := map[string]resource.Quantity{}
	for _, q := range quantities {
		v, err := resource.ParseQuantity(q.value)
		switch {
		case err != nil:
			// The parser's own message is a regular expression; this one helps more.
			bad(q.option, q.value, nil, "not a quantity such as 100m or 128Mi")
		case v.Sign() <= 0:
			bad(q.option, q.value, nil, "must be above 0")
		default:
			parsed[q.option] = v
		}
	}
	req, okReq := parsed["memory-request"]
	lim, okLim := parsed["memory-limit"]
	if okReq && okLim && lim.Cmp(req) < 0 {
		bad("memory-limit", o.Resources.MemoryLimit, nil, "below {memory-request} %s", o.Resources.MemoryRequest)
	}
	if len(errs) > 0 {
		return resolved{}, errs
	}
	return r, nil
}

// checkSpecs refuses controller specs whose RBAC could not be rendered least
// privilege: a wildcard, a rule without verbs or resource, or a spec without a name.
func checkSpecs(specs []manager.ControllerSpec) error {
	var errs []error
	for i, s := range specs {
		if s.Name == "" {
			errs = append(errs, fmt.Errorf("controller spec %d has no name", i))
			continue
		}
		for j, rule := range s.RBAC {
			fields := slices.Concat([]string{rule.Group, rule.Resource}, rule.Verbs, rule.ResourceNames)
			switch {
			case rule.Resource == "" || len(rule.Verbs) == 0:
				errs = append(errs, fmt.Errorf("controller %s: RBAC rule %d names no resource or no verb: %+v", s.Name, j, rule))
			case slices.ContainsFunc(fields, func(f string) bool { return strings.Contains(f, "*") }):
				errs = append(errs, fmt.Errorf("controller %s: RBAC rule %d has a wildcard; name each resource and verb: %+v", s.Name, j, rule))
			}
		}
		for _, gr := range s.Informers {
			if gr.Resource == "" || strings.Contains(gr.Resource+gr.Group, "*") {
				errs = append(errs, fmt.Errorf("controller %s: informer %q is not one resource", s.Name, gr.String()))
			}
		}
	}
	return errors.Join(errs...)
}

// checkExtraArg checks one --extra-arg against the manager's own flag set: a known
// flag, a value of the right type, and not one of ownedFlags. It returns why arg is
// refused (naming options as {option}) or the flag set's error; both empty when it is
// accepted.
func checkExtraArg(arg string) (reason string, err error) {
	nameValue, ok := strings.CutPrefix(arg, "--")
	if !ok || nameValue == "" || strings.HasPrefix(nameValue, "-") {
		return "want --name=value", nil
	}
	flagName, _, _ := strings.Cut(nameValue, "=")
	if why, owned := ownedFlags[flagName]; owned {
		return fmt.Sprintf("--%s is set by the rendering: %s", flagName, why), nil
	}
	fs := pflag.NewFlagSet("cloud-controller-manager", pflag.ContinueOnError)
	fs.SetOutput(discard{})
	manager.NewOptions().AddFlags(fs)
	if fs.Lookup(flagName) == nil {
		return fmt.Sprintf("the cloud-controller-manager has no flag --%s", flagName), nil
	}
	if err := fs.Parse([]string{arg}); err != nil {
		return "", err
	}
	if fs.NArg() > 0 {
		return "want --name=value, as one argument", nil
	}
	return "", nil
}

// discard is an io.Writer that drops pflag's usage output.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// imageError refuses, as option, a reference kubelet could not pull: one check for the
// CCM's and the CSI driver's images, so that a bad one is refused here and not by an
// image pull error on every node.
func imageError(option, ref string) *OptionError {
	if _, err := name.ParseReference(ref, name.StrictValidation); err != nil {
		return &OptionError{Option: option, Index: -1, Value: ref, Reason: "not an image reference", Err: err}
	}
	return nil
}

// pullPolicyError refuses an --image-pull-policy kubelet does not know.
func pullPolicyError(p corev1.PullPolicy) *OptionError {
	switch p {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		return nil
	}
	return &OptionError{Option: "image-pull-policy", Index: -1, Value: string(p), Reason: "want Always, IfNotPresent or Never"}
}
