package install

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
)

// Install applies the operator's objects for o with server-side apply as fieldOwner,
// as `kubectl apply --server-side -f operator.yaml` does, waiting for the CRD to be
// served before the rest. It does not wait for the operator to run.
func Install(ctx context.Context, c client.Client, o Options, fieldOwner string) error {
	if err := EnsureCRD(ctx, c, fieldOwner); err != nil {
		return err
	}
	objs, err := Render(o)
	if err != nil {
		return err
	}
	for _, u := range objs {
		if u.GetKind() == "CustomResourceDefinition" {
			continue
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// ApplyCloudControllerManager creates the CloudControllerManager named cluster with
// spec, or sets the spec of the one there.
func ApplyCloudControllerManager(ctx context.Context, c client.Client, spec v1alpha1.CloudControllerManagerSpec) error {
	ccm := &v1alpha1.CloudControllerManager{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.SingletonName}, Spec: spec}
	err := c.Create(ctx, ccm)
	if apierrors.IsAlreadyExists(err) {
		// The status is written all the time, so an update may meet a newer version.
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var live v1alpha1.CloudControllerManager
			if err := c.Get(ctx, client.ObjectKeyFromObject(ccm), &live); err != nil {
				return err
			}
			live.Spec = spec
			return c.Update(ctx, &live)
		})
	}
	if err != nil {
		return fmt.Errorf("apply CloudControllerManager %s: %w", ccm.Name, err)
	}
	return nil
}

// WaitAvailable waits until the CloudControllerManager reports Available for its
// current generation and returns the condition's message (which names the leader). On
// timeout the error carries every condition it last saw.
func WaitAvailable(ctx context.Context, c client.Reader) (string, error) {
	var last []metav1.Condition
	for {
		var ccm v1alpha1.CloudControllerManager
		err := c.Get(ctx, client.ObjectKey{Name: v1alpha1.SingletonName}, &ccm)
		if err == nil {
			last = ccm.Status.Conditions
			for _, cond := range ccm.Status.Conditions {
				if cond.Type == v1alpha1.ConditionAvailable && cond.Status == metav1.ConditionTrue && ccm.Status.ObservedGeneration == ccm.Generation {
					return cond.Message, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			var s string
			for _, cond := range last {
				s += fmt.Sprintf("; %s=%s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
			}
			return "", fmt.Errorf("CloudControllerManager %s not Available (%v)%s", v1alpha1.SingletonName, ctx.Err(), s)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
