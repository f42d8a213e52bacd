package migration

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnknownController is wrapped by Classify's error when the config assigns this
// component a controller that matches none of its controllers' names or aliases.
var ErrUnknownController = errors.New("unknown controller")

// Class says where a controller runs while leader migration is enabled.
type Class int

const (
	// Owned controllers are not listed in the config: they run under the component's
	// main lease, as without migration.
	Owned Class = iota
	// Migrated controllers are listed for this component or for AnyComponent: they run
	// only while this process holds the migration lease.
	Migrated
	// Unowned controllers are listed for another component, which runs them: they do
	// not run here at all.
	Unowned
)

// String returns the class name as it appears in logs.
func (c Class) String() string {
	switch c {
	case Owned:
		return "owned"
	case Migrated:
		return "migrated"
	case Unowned:
		return "unowned"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// Resolver maps a controller name or alias to the canonical name of one of the
// component's controllers; ok is false for a name no controller answers to.
type Resolver func(name string) (canonical string, ok bool)

// Plan partitions a component's enabled controllers by Class. Each list keeps the order
// of the enabled controllers given to Classify.
type Plan struct {
	// Owned run under the main lease.
	Owned []string
	// Migrated run under the migration lease.
	Migrated []string
	// Unowned do not run here.
	Unowned []string
}

// Class returns the class of the named (canonical) controller, and false if the plan
// does not mention it.
func (p Plan) Class(name string) (Class, bool) {
	for class, names := range [][]string{Owned: p.Owned, Migrated: p.Migrated, Unowned: p.Unowned} {
		for _, n := range names {
			if n == name {
				return Class(class), true
			}
		}
	}
	return 0, false
}

// Classify decides where each enabled controller of component runs. enabled holds
// canonical controller names; the config's names are matched to them through resolve,
// so a config written with kube-controller-manager's names (route-controller,
// service-controller) or upstream's short aliases matches nephele's controllers.
//
// Names the resolver does not know are ignored when listed for another component:
// shared configs legitimately list controllers only kube-controller-manager has. Listed
// for component or AnyComponent they are an error wrapping ErrUnknownController,
// because the operator expects this component to run something it cannot. Two entries
// naming the same controller with different placements for component are an error too.
func (c *Config) Classify(component string, enabled []string, resolve Resolver) (Plan, error) {
	type listing struct {
		index int
		name  string
		ours  bool
	}
	listed := make(map[string]listing, len(c.ControllerLeaders))
	var problems []string
	unknown := false
	for i, l := range c.ControllerLeaders {
		ours := l.Component == component || l.Component == AnyComponent
		canonical, ok := resolve(l.Name)
		if !ok {
			if ours {
				unknown = true
				problems = append(problems, fmt.Sprintf("controllerLeaders[%d].name: %q is listed for component %q but is not a controller of %s",
					i, l.Name, l.Component, component))
			}
			continue
		}
		if prev, dup := listed[canonical]; dup {
			if prev.ours != ours {
				problems = append(problems, fmt.Sprintf("controllerLeaders[%d].name: %q and controllerLeaders[%d].name %q both name controller %s but place it differently",
					i, l.Name, prev.index, prev.name, canonical))
			}
			continue
		}
		listed[canonical] = listing{index: i, name: l.Name, ours: ours}
	}
	if len(problems) > 0 {
		return Plan{}, &classifyError{msg: strings.Join(problems, "; "), unknown: unknown}
	}

	var p Plan
	for _, name := range enabled {
		l, ok := listed[name]
		switch {
		case !ok:
			p.Owned = append(p.Owned, name)
		case l.ours:
			p.Migrated = append(p.Migrated, name)
		default:
			p.Unowned = append(p.Unowned, name)
		}
	}
	return p, nil
}

// classifyError keeps Classify's message to the problems themselves while still
// matching ErrUnknownController.
type classifyError struct {
	msg     string
	unknown bool
}

func (e *classifyError) Error() string { return e.msg }

func (e *classifyError) Is(target error) bool { return e.unknown && target == ErrUnknownController }
