package controllers

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
	"github.com/nephele-dev/nephele/operator/profiles"
)

// OperandKinds are the kinds a profile may render, the kinds prune looks at, and the
// kinds the operand controller watches. A profile rendering another kind is refused.
var operandKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "ServiceAccount"},
	{Version: "v1", Kind: "Service"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
	{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"},
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "apps", Version: "v1", Kind: "DaemonSet"},
	{Group: "storage.k8s.io", Version: "v1", Kind: "CSIDriver"},
	{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"},
}

// syncKinds are the kinds the sync controllers write into the CCM's namespace: the
// copied cloud configs and the CA bundle.
var syncKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Secret"},
	{Version: "v1", Kind: "ConfigMap"},
}

// OperandKinds returns the kinds a profile may render.
func OperandKinds() []schema.GroupVersionKind {
	return append([]schema.GroupVersionKind(nil), operandKinds...)
}

func isOperandKind(gvk schema.GroupVersionKind) bool {
	for _, k := range operandKinds {
		if k == gvk {
			return true
		}
	}
	return false
}

// ref names u for status.resources and messages.
func ref(u *unstructured.Unstructured) v1alpha1.ObjectReference {
	return v1alpha1.ObjectReference{Group: u.GroupVersionKind().Group, Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

func refString(r v1alpha1.ObjectReference) string {
	s := r.Kind
	if r.Group != "" {
		s += "." + r.Group
	}
	if r.Namespace != "" {
		return s + " " + r.Namespace + "/" + r.Name
	}
	return s + " " + r.Name
}

// sharedAccount says u is a controller's ServiceAccount in kube-system, such as
// node-controller, which kube-controller-manager's own controllers run as too: the
// operator applies it (so the bindings naming it work) but never deletes it, nor makes
// it a dependent the garbage collector would delete with the CloudControllerManager.
func sharedAccount(u *unstructured.Unstructured) bool {
	return u.GetKind() == "ServiceAccount" && u.GetNamespace() == render.ControllerServiceAccountNamespace &&
		u.GetName() != render.ServiceAccountName
}

// ownedBy labels u as the operator's and makes owner its controller.
func ownedBy(u *unstructured.Unstructured, owner *v1alpha1.CloudControllerManager, component string) {
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[profiles.LabelManagedBy] = profiles.ManagedByValue
	labels[LabelComponent] = component
	u.SetLabels(labels)
	if sharedAccount(u) {
		return
	}
	u.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: "CloudControllerManager",
		Name: owner.Name, UID: owner.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}})
}

// applyObject server-side applies u as the operand controller and reports whether the
// live object changed. A Deployment or DaemonSet whose selector differs from u's is
// deleted first (a selector is immutable) and then created anew.
func applyObject(ctx context.Context, c client.Client, u *unstructured.Unstructured) (changed bool, err error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(u.GroupVersionKind())
	getErr := c.Get(ctx, client.ObjectKeyFromObject(u), live)
	switch {
	case apierrors.IsNotFound(getErr):
		live = nil
	case getErr != nil:
		return false, fmt.Errorf("get %s: %w", refString(ref(u)), getErr)
	}
	if live != nil && (u.GetKind() == "Deployment" || u.GetKind() == "DaemonSet") {
		want, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "selector")
		have, _, _ := unstructured.NestedFieldNoCopy(live.Object, "spec", "selector")
		if !reflect.DeepEqual(want, have) {
			// The UID precondition deletes the object we compared, not a newer one.
			uid := live.GetUID()
			err := c.Delete(ctx, live, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
			if err != nil && !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("delete %s to recreate it with a new selector: %w", refString(ref(u)), err)
			}
			live = nil
		}
	}
	applied := u.DeepCopy()
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), client.FieldOwner(FieldManagerOperand), client.ForceOwnership); err != nil {
		if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
			// The recreated object's predecessor is still being deleted: try again.
			return false, fmt.Errorf("apply %s while its predecessor is deleted: %w", refString(ref(u)), err)
		}
		return false, fmt.Errorf("apply %s: %w", refString(ref(u)), err)
	}
	return live == nil || live.GetResourceVersion() != applied.GetResourceVersion(), nil
}

// listOwned lists every object of the operand kinds labelled as the operator's with
// component, in namespaces (cluster-scoped kinds: everywhere), that owner controls.
// A label is not proof: anyone who may create a ClusterRole can label it as the
// operator's, and the operator must not delete it for them; the controller owner
// reference to this CloudControllerManager (its UID) is what the operator itself set.
func listOwned(ctx context.Context, c client.Reader, component string, namespaces []string, owner *v1alpha1.CloudControllerManager) ([]*unstructured.Unstructured, error) {
	objs, err := listLabelled(ctx, c, component, namespaces)
	return slices.DeleteFunc(objs, func(u *unstructured.Unstructured) bool { return !metav1.IsControlledBy(u, owner) }), err
}

// kindNamespaces returns where the operator reads and lists objects of kind, given its
// namespaces (the CCM's first, then kube-system): "" alone for cluster-scoped kinds; all
// of them for the kinds a rendering may put in kube-system; the CCM's alone for the
// others, which the operator may not list in kube-system (its Secrets among them).
func kindNamespaces(kind string, namespaces []string) []string {
	switch {
	case clusterScoped(kind):
		return []string{""}
	case render.InControllerNamespace(kind):
		return namespaces
	}
	return namespaces[:1]
}

// clusterScoped says whether an operand kind is cluster-scoped.
func clusterScoped(kind string) bool {
	switch kind {
	case "ClusterRole", "ClusterRoleBinding", "CSIDriver", "StorageClass":
		return true
	}
	return false
}

// listLabelled lists every object of the operand kinds (the sync kinds for
// ComponentSync) labelled as the operator's with component, whoever made it, where
// kindNamespaces says.
func listLabelled(ctx context.Context, c client.Reader, component string, namespaces []string) ([]*unstructured.Unstructured, error) {
	sel := client.MatchingLabels{profiles.LabelManagedBy: profiles.ManagedByValue, LabelComponent: component}
	kinds := operandKinds
	if component == ComponentSync {
		kinds = syncKinds
	}
	var out []*unstructured.Unstructured
	for _, gvk := range kinds {
		for _, ns := range kindNamespaces(gvk.Kind, namespaces) {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			opts := []client.ListOption{sel}
			if ns != "" {
				opts = append(opts, client.InNamespace(ns))
			}
			if err := c.List(ctx, list, opts...); err != nil {
				return nil, fmt.Errorf("list %s owned by the operator: %w", gvk.Kind, err)
			}
			for i := range list.Items {
				item := list.Items[i]
				item.SetGroupVersionKind(gvk)
				out = append(out, &item)
			}
		}
	}
	return out, nil
}

// deleteAll deletes objs (already gone is fine) and returns how many still existed.
func deleteAll(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) (int, error) {
	var errs []error
	n := 0
	for _, u := range objs {
		if sharedAccount(u) {
			continue
		}
		if u.GetDeletionTimestamp() != nil {
			n++
			continue
		}
		err := c.Delete(ctx, u, client.PropagationPolicy(metav1.DeletePropagationBackground))
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			errs = append(errs, fmt.Errorf("delete %s: %w", refString(ref(u)), err))
		default:
			n++
		}
	}
	return n, errors.Join(errs...)
}

// notFoundAs returns target for a NotFound error and err otherwise.
func notFoundAs(err error, target error) error {
	if apierrors.IsNotFound(err) {
		return target
	}
	return err
}
