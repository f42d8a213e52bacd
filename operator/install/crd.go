package install

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// crdYAML is controller-gen's output for operator/api/v1alpha1 (make generate).
//
//go:embed crd/operator.nephele.dev_cloudcontrollermanagers.yaml
var crdYAML []byte

// CRD returns the CloudControllerManager CustomResourceDefinition.
func CRD() (*unstructured.Unstructured, error) {
	var m map[string]any
	if err := yaml.Unmarshal(crdYAML, &m); err != nil {
		return nil, fmt.Errorf("decode the CloudControllerManager CRD: %w", err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// EnsureCRD applies the CRD with server-side apply as fieldOwner and waits until the API
// server serves it (condition Established) and c's REST mapper finds its kind, or ctx
// ends. The API server adds an established CRD to discovery a moment later, and a typed
// call made before then fails with "no matches for kind".
func EnsureCRD(ctx context.Context, c client.Client, fieldOwner string) error {
	crd, err := CRD()
	if err != nil {
		return err
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(crd), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply CustomResourceDefinition %s: %w", crd.GetName(), err)
	}
	key := client.ObjectKeyFromObject(crd)
	// The kind and its served versions, as the applied CRD declares them.
	var want apiextensionsv1.CustomResourceDefinition
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(crd.Object, &want); err != nil {
		return fmt.Errorf("decode CustomResourceDefinition %s: %w", key.Name, err)
	}
	gk := schema.GroupKind{Group: want.Spec.Group, Kind: want.Spec.Names.Kind}
	var versions []string
	for _, v := range want.Spec.Versions {
		if v.Served {
			versions = append(versions, v.Name)
		}
	}
	established := false
	for {
		if !established {
			var got apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, key, &got); err != nil {
				return fmt.Errorf("get CustomResourceDefinition %s: %w", key.Name, err)
			}
			established = slices.ContainsFunc(got.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
				return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
			})
		}
		if established {
			_, err := c.RESTMapper().RESTMapping(gk, versions...)
			if err == nil {
				return nil
			}
			if !apimeta.IsNoMatchError(err) {
				return fmt.Errorf("CustomResourceDefinition %s: mapping kind %s: %w", key.Name, gk, err)
			}
		}
		select {
		case <-ctx.Done():
			state := "not established"
			if established {
				state = "established but not in the API server's discovery"
			}
			return fmt.Errorf("CustomResourceDefinition %s %s: %w", key.Name, state, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
