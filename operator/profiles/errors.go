package profiles

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
)

// FieldError is one field of a CloudControllerManager's spec that cannot be rendered:
// the field's path and what is wrong with it. When deploy/render refused the value the
// field gave it, Err is render's *render.OptionError, so errors.As finds it (and,
// through it, the parser's error).
type FieldError struct {
	// Field is the field's path: spec.clusterCIDR, spec.extraArgs[1].
	Field *field.Path
	// Detail says what is wrong and how to fix it, naming fields by their paths.
	Detail string
	// Err is the cause, if any.
	Err error
}

// Error is "<field>: <detail>", as the API server words a field's error.
func (e *FieldError) Error() string { return e.Field.String() + ": " + e.Detail }

// Unwrap returns the cause.
func (e *FieldError) Unwrap() error { return e.Err }

// specErrors maps deploy/render's refusal of the options Render built from spec to the
// spec's fields: each *render.OptionError whose option a field sets becomes a
// *FieldError on that field (the item's index kept for spec.extraArgs), worded with the
// spec's field names; one the profile or the operator set stays render's, wrapped with
// the platform's name. The chain is kept either way. An error that is not render's
// OptionErrors (a controller spec it cannot use) is returned wrapped.
func specErrors(p Profile, spec v1alpha1.CloudControllerManagerSpec, err error) error {
	var list render.OptionErrors
	if !errors.As(err, &list) {
		return fmt.Errorf("platform %s: %w", p.Name, err)
	}
	name := func(option string) string {
		if f := specField(option); f != nil {
			return f.String()
		}
		if option == "namespace" {
			return "nephele-operator's --operand-namespace"
		}
		return fmt.Sprintf("platform %s's --%s", p.Name, option)
	}
	errs := make([]error, 0, len(list))
	for _, oe := range list {
		f := specField(oe.Option)
		switch {
		case oe.Option == "image" && spec.Image == "" && spec.Version != "":
			// The image is the profile's with spec.version as its tag.
			f = field.NewPath("spec", "version")
		case oe.Option == "image" && spec.Image == "",
			oe.Option == "replicas" && spec.Replicas == nil:
			// The profile's or the operator's value, not the spec's.
			f = nil
		case f != nil && oe.Index >= 0:
			f = f.Index(oe.Index)
		}
		if f == nil {
			errs = append(errs, fmt.Errorf("platform %s: %w", p.Name, oe))
			continue
		}
		errs = append(errs, &FieldError{Field: f, Detail: "invalid value " + oe.Explain(name), Err: oe})
	}
	return errors.Join(errs...)
}

// specField is the spec's field that sets render's option, or nil when the profile or
// the operator sets it.
func specField(option string) *field.Path {
	fields := map[string]string{
		"provider":               "provider",
		"image":                  "image",
		"replicas":               "replicas",
		"cluster-name":           "clusterName",
		"cluster-cidr":           "clusterCIDR",
		"configure-cloud-routes": "configureCloudRoutes",
		"controllers":            "controllers",
		"extra-arg":              "extraArgs",
		"cloud-config-source":    "cloudConfig",
		"cloud-config-name":      "cloudConfig",
		"cloud-config-key":       "cloudConfig",
	}
	if f, ok := fields[option]; ok {
		return field.NewPath("spec", f)
	}
	return nil
}

// csiSpecErrors maps deploy/render's refusal of the CSI driver's options to
// spec.volumes' fields, as specErrors does for the CCM's.
func csiSpecErrors(p Profile, spec v1alpha1.CloudControllerManagerSpec, err error) error {
	var list render.OptionErrors
	if !errors.As(err, &list) {
		return fmt.Errorf("platform %s: the CSI driver: %w", p.Name, err)
	}
	volumes := field.NewPath("spec", "volumes")
	fields := map[string]string{
		"driver-image":      "image",
		"provisioner-image": "provisionerImage",
		"attacher-image":    "attacherImage",
		"resizer-image":     "resizerImage",
		"device-dir":        "deviceDirs",
	}
	fieldOf := func(option string) *field.Path {
		f, ok := fields[option]
		if !ok {
			return nil
		}
		if option == "driver-image" && spec.Volumes.Image == "" {
			if spec.Version == "" {
				return nil // the operator's version
			}
			return field.NewPath("spec", "version")
		}
		return volumes.Child(f)
	}
	name := func(option string) string {
		if f := fieldOf(option); f != nil {
			return f.String()
		}
		if option == "namespace" {
			return "nephele-operator's --operand-namespace"
		}
		return fmt.Sprintf("platform %s's CSI --%s", p.Name, option)
	}
	errs := make([]error, 0, len(list))
	for _, oe := range list {
		f := fieldOf(oe.Option)
		if f == nil {
			errs = append(errs, fmt.Errorf("platform %s: the CSI driver: %w", p.Name, oe))
			continue
		}
		if oe.Index >= 0 {
			f = f.Index(oe.Index)
		}
		errs = append(errs, &FieldError{Field: f, Detail: "invalid value " + oe.Explain(name), Err: oe})
	}
	return errors.Join(errs...)
}
