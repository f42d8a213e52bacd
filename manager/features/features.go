package features

import (
	"fmt"
	"slices"
	"strings"

	// Upstream's generic server gates register themselves on apiserver's default gate
	// when this package is linked; New copies them from there and changes nothing.
	"k8s.io/apimachinery/pkg/util/version"
	_ "k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	cmfeatures "k8s.io/controller-manager/pkg/features"
)

// Version is the Kubernetes version whose gates nephele's CCM emulates: the version of
// the k8s.io modules it is built with.
var Version = version.MajorMinor(1, 36)

// nepheleGates are nephele's own gates, beside upstream's. There are none today:
// nephele's own behaviour is chosen by flags (docs/manager.md), and a gate is added here
// only when it switches code that exists.
func nepheleGates() map[featuregate.Feature]featuregate.VersionedSpecs {
	return map[featuregate.Feature]featuregate.VersionedSpecs{}
}

// New returns a fresh gate holding upstream's cloud-controller-manager gates and
// nephele's, at their defaults for Version.
func New() (featuregate.MutableVersionedFeatureGate, error) {
	g := featuregate.NewVersionedFeatureGate(Version)
	// The apiserver's gates, as upstream's CCM sees them: apiserver's default gate,
	// which its features package fills at init and nothing in nephele sets.
	if err := g.AddVersioned(utilfeature.DefaultMutableFeatureGate.GetAllVersioned()); err != nil {
		return nil, fmt.Errorf("feature gates: adding the apiserver's: %w", err)
	}
	if err := cmfeatures.SetupCurrentKubernetesSpecificFeatureGates(g); err != nil {
		return nil, fmt.Errorf("feature gates: adding the controller manager's: %w", err)
	}
	if err := logsapi.AddFeatureGates(g); err != nil {
		return nil, fmt.Errorf("feature gates: adding the logging gates: %w", err)
	}
	if err := g.AddVersioned(nepheleGates()); err != nil {
		return nil, fmt.Errorf("feature gates: adding nephele's: %w", err)
	}
	return g, nil
}

// Known returns the names of every gate g knows, sorted, without the AllAlpha and
// AllBeta switches.
func Known(g featuregate.FeatureGate) []string {
	var names []string
	for name := range g.(featuregate.MutableVersionedFeatureGate).GetAll() {
		if name != "AllAlpha" && name != "AllBeta" {
			names = append(names, string(name))
		}
	}
	slices.Sort(names)
	return names
}

// Meaning says in one line what the gate called name does in nephele.
func Meaning(name featuregate.Feature) string {
	if m, ok := meanings[name]; ok {
		return m
	}
	return "upstream's generic API server gate: it acts on code a cloud-controller-manager does not run (storage, admission, API serving), in upstream's CCM as in nephele's; accepted, no effect"
}

// meanings are the gates whose meaning for a CCM is more than "no effect".
var meanings = map[featuregate.Feature]string{
	cmfeatures.CloudControllerManagerWatchBasedRoutesReconciliation: "routes are reconciled on Node events: nephele's route controller always works so (its period is a safety net), with the gate on or off",
	cmfeatures.CloudControllerManagerWebhook:                        "upstream's cloud provider webhooks (KEP-2699): nephele has none, so there is nothing to serve with the gate on or off (see --webhooks)",
	cmfeatures.ControllerManagerReleaseLeaderElectionLockOnExit:     "release the leader lease on exit: nephele always does, after its controllers stop, with the gate on or off",
	logsapi.LoggingAlphaOptions:                                     "allows the alpha logging flags, as upstream: --log-text-split-stream, --log-json-split-stream, --log-*-info-buffer-size",
	logsapi.LoggingBetaOptions:                                      "allows the beta logging options, as upstream; nephele has none beyond those it always has",
	logsapi.ContextualLogging:                                       "nephele's controllers always log through the logger of their context, with the gate on or off",
	"AllowParsingUserUIDFromCertAuth":                               "upstream reads a user's UID from a client certificate: nephele's client-certificate authentication takes the name and groups only; accepted, no effect",
	"RemoteRequestHeaderUID":                                        "--requestheader-uid-headers are read, as upstream's request-header authentication",
	"ComponentFlagz":                                                "upstream's /flagz page: nephele serves none; accepted, no effect",
	"ComponentStatusz":                                              "upstream's /statusz page: nephele serves none; accepted, no effect",
	"UnauthenticatedHTTP2DOSMitigation":                             "upstream's limit on HTTP/2 streams of unauthenticated clients: nephele's server does not apply it; accepted, no effect",
}

// Describe returns every gate g knows with its stage, default and meaning, one line
// each, sorted: the table docs/manager.md holds.
func Describe(g featuregate.MutableVersionedFeatureGate) []string {
	all := g.GetAll()
	var lines []string
	for _, name := range Known(g) {
		spec := all[featuregate.Feature(name)]
		stage := string(spec.PreRelease)
		if stage == "" {
			stage = "GA"
		}
		lines = append(lines, fmt.Sprintf("%s=%t (%s): %s", name, spec.Default, strings.ToUpper(stage), Meaning(featuregate.Feature(name))))
	}
	return lines
}
