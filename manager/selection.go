package manager

import (
	"fmt"
	"strings"
)

// CanonicalName returns the canonical name of the controller in specs called name,
// either by its canonical name or by one of its aliases. Names are case-sensitive, as
// upstream's are.
func CanonicalName(specs []ControllerSpec, name string) (string, bool) {
	for _, s := range specs {
		if s.Name == name {
			return s.Name, true
		}
		for _, a := range s.Aliases {
			if a == name {
				return s.Name, true
			}
		}
	}
	return "", false
}

// SelectControllers applies a --controllers list to specs and returns the canonical
// names of the enabled controllers in the order of specs.
//
// The semantics are upstream's: "*" enables every controller that is not
// DisabledByDefault, "name" enables a controller (disabled-by-default ones included),
// "-name" disables one, and aliases are accepted wherever names are. Upstream silently
// lets the first of two entries for one controller win; here duplicate or contradicting
// entries are errors, as is a list that enables nothing, because each is a mistake
// that would otherwise surface only as a controller that quietly does not run. The
// error says what is wrong without naming the flag; Options.Validate adds that.
func SelectControllers(specs []ControllerSpec, controllers []string) ([]string, error) {
	star := false
	explicit := make(map[string]bool)  // canonical name -> enabled
	entries := make(map[string]string) // canonical name -> the entry that named it
	for _, entry := range controllers {
		name, disable := strings.CutPrefix(entry, "-")
		switch {
		case entry == "":
			return nil, fmt.Errorf("empty controller name: %s", selectionHelp(specs))
		case entry == "*":
			if star {
				return nil, fmt.Errorf(`"*" is listed twice`)
			}
			star = true
			continue
		case name == "*":
			return nil, fmt.Errorf(`%q is not supported: to disable controllers list each as -name`, entry)
		}
		canonical, ok := CanonicalName(specs, name)
		if !ok {
			return nil, fmt.Errorf("unknown controller %q: %s", name, selectionHelp(specs))
		}
		if prev, seen := entries[canonical]; seen {
			if explicit[canonical] == !disable {
				return nil, fmt.Errorf("%q repeats %q: both name %s", entry, prev, canonical)
			}
			return nil, fmt.Errorf("%q contradicts %q: both name %s", entry, prev, canonical)
		}
		entries[canonical] = entry
		explicit[canonical] = !disable
	}

	var enabled []string
	for _, s := range specs {
		on, named := explicit[s.Name]
		if !named {
			on = star && !s.DisabledByDefault
		}
		if on {
			enabled = append(enabled, s.Name)
		}
	}
	if len(enabled) == 0 {
		return nil, fmt.Errorf("%q enables no controller: %s", strings.Join(controllers, ","), selectionHelp(specs))
	}
	return enabled, nil
}

// selectionHelp lists the names SelectControllers accepts.
func selectionHelp(specs []ControllerSpec) string {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return "known controllers are " + strings.Join(names, ", ")
}

// checkSpecs reports specs that cannot be selected unambiguously: an empty name, or a
// name or alias used twice. It guards against a binary registering its controllers
// wrongly, not against user input.
func checkSpecs(specs []ControllerSpec) error {
	owner := make(map[string]string)
	claim := func(name, spec string) error {
		if name == "" || name == "*" || strings.HasPrefix(name, "-") {
			return fmt.Errorf("controller %q: invalid name or alias %q", spec, name)
		}
		if prev, ok := owner[name]; ok {
			return fmt.Errorf("controller %q: name or alias %q is already used by controller %q", spec, name, prev)
		}
		owner[name] = spec
		return nil
	}
	for _, s := range specs {
		if err := claim(s.Name, s.Name); err != nil {
			return err
		}
		for _, a := range s.Aliases {
			if err := claim(a, s.Name); err != nil {
				return err
			}
		}
	}
	return nil
}
