package handover

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nephele-dev/nephele/manager"
)

// canonicalNamesSince is the release from which kube-controller-manager and
// k8s.io/cloud-provider call the cloud controllers by their current names
// (kubernetes#115813), and match leader migration entries by those only.
var canonicalNamesSince = version.MustParseGeneric("v1.28.0")

// legacyNames are the names the cloud controllers had before canonicalNamesSince.
var legacyNames = map[string]string{
	manager.CloudNodeController:          "cloud-node",
	manager.CloudNodeLifecycleController: "cloud-node-lifecycle",
	manager.ServiceLBController:          "service",
	manager.NodeRouteController:          "route",
}

// MovingController is one controller that changes hands, with its names on both sides.
type MovingController struct {
	// Nephele is nephele's canonical name.
	Nephele string
	// Aliases are the other names nephele accepts for it.
	Aliases []string
	// Old is the name the old component runs it under, as the old component matches it
	// in a LeaderMigrationConfiguration; empty when the old component has no such
	// controller (kube-controller-manager never ran cloud-node-controller: in-tree, the
	// kubelet initialized its own Node).
	Old string
}

// movingControllers returns the controllers that move from the old component (of kind,
// at oldVersion, "" when unknown) to nephele, whose controllers are specs, in specs'
// order. disabled are nephele canonical names the old component does not run (its
// --controllers turned them off); they are left out.
func movingControllers(kind ComponentKind, oldVersion string, specs []manager.ControllerSpec, disabled []string) ([]MovingController, error) {
	legacy := false
	if v, err := version.ParseGeneric(oldVersion); err == nil {
		legacy = v.LessThan(canonicalNamesSince)
	}
	var out []MovingController
	for _, s := range specs {
		if _, known := legacyNames[s.Name]; !known || slices.Contains(disabled, s.Name) {
			continue
		}
		m := MovingController{Nephele: s.Name, Aliases: s.Aliases, Old: s.Name}
		if legacy {
			m.Old = legacyNames[s.Name]
		}
		if kind == KubeControllerManager && s.Name == manager.CloudNodeController {
			m.Old = ""
		}
		// nephele must answer to the old name too: one config can then serve both sides.
		if m.Old != "" {
			if canonical, ok := manager.CanonicalName(specs, m.Old); !ok || canonical != s.Name {
				return nil, fmt.Errorf("nephele's controllers do not answer to %s's name %q for %s", kind, m.Old, s.Name)
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// disabledByControllersFlag returns the nephele canonical names among specs that a
// --controllers value (of the old component) turns off.
func disabledByControllersFlag(value string, specs []manager.ControllerSpec) []string {
	if value == "" {
		return nil
	}
	entries := splitList(value)
	star := slices.Contains(entries, "*")
	var off []string
	for _, s := range specs {
		names := append([]string{s.Name, legacyNames[s.Name]}, s.Aliases...)
		on := star
		for _, n := range names {
			if n == "" {
				continue
			}
			if slices.Contains(entries, n) {
				on = true
			}
			if slices.Contains(entries, "-"+n) {
				on = false
			}
		}
		if !on {
			off = append(off, s.Name)
		}
	}
	return off
}

func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
