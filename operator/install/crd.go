package install

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
// server serves it (condition Established), or ctx ends.
func EnsureCRD(ctx context.Context, c client.Client, fieldOwner string) error {
	crd, err := CRD()
	if err != nil {
		return err
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(crd), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply CustomResourceDefinition %s: %w", crd.GetName(), err)
	}
	key := client.ObjectKeyFromObject(crd)
	for {
		var got apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, key, &got); err != nil {
			return fmt.Errorf("get CustomResourceDefinition %s: %w", key.Name, err)
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CustomResourceDefinition %s not established: %w", key.Name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
