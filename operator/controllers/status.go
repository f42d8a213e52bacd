package controllers

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
)

// newCondition returns a condition of type typ, keeping the last transition time of
// the existing one when its status is unchanged.
func newCondition(existing []metav1.Condition, gen int64, typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	c := metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen,
		LastTransitionTime: metav1.Now()}
	for _, e := range existing {
		if e.Type == typ && e.Status == status {
			c.LastTransitionTime = e.LastTransitionTime
		}
	}
	return c
}

// findCondition returns the condition of type typ, or nil.
func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// applyStatus server-side applies status as fieldManager's whole share of the
// CloudControllerManager's status: what the manager applied before and leaves out now
// is removed, and what other managers own is kept.
func applyStatus(ctx context.Context, c client.Client, fieldManager string, status any) error {
	data, err := json.Marshal(status)
	if err != nil {
		return fmt.Errorf("encode the status: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("decode the status: %w", err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": m}}
	u.SetAPIVersion(v1alpha1.GroupVersion.String())
	u.SetKind("CloudControllerManager")
	u.SetName(v1alpha1.SingletonName)
	if err := c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply the status of CloudControllerManager %s as %s: %w", v1alpha1.SingletonName, fieldManager, err)
	}
	return nil
}

// syncStatus is a sync controller's share of the status: its one condition.
type syncStatus struct {
	Conditions []metav1.Condition `json:"conditions"`
}
