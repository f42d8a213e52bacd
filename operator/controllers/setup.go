package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
	"github.com/nephele-dev/nephele/operator/profiles"
)

// CacheOptions limits the manager's cache to what the operator needs: namespaced
// objects in the CCM's namespace, and in kube-system only the kinds a rendering puts
// there (render.InControllerNamespace: the controllers' accounts and one Role), and
// of the kinds it writes only those labelled as its own, so it neither lists every
// Secret of kube-system nor every ClusterRole of the cluster.
func CacheOptions(namespace string) cache.Options {
	mine := labels.SelectorFromSet(labels.Set{profiles.LabelManagedBy: profiles.ManagedByValue})
	all := (Config{Namespace: namespace}).namespaces()
	set := func(nss []string) map[string]cache.Config {
		m := map[string]cache.Config{}
		for _, ns := range nss {
			m[ns] = cache.Config{}
		}
		return m
	}
	byObject := map[client.Object]cache.ByObject{}
	for _, o := range append(ownedTypes(), &corev1.Secret{}, &corev1.ConfigMap{}) {
		by := cache.ByObject{Label: mine}
		// Each kind where listLabelled lists it (kindNamespaces); a kind the scheme
		// cannot name fails closed, to the CCM's namespace alone.
		nss := all[:1]
		if gvk, err := apiutil.GVKForObject(o, scheme.Scheme); err == nil {
			nss = kindNamespaces(gvk.Kind, all)
		}
		if nss[0] != "" {
			by.Namespaces = set(nss)
		}
		byObject[o] = by
	}
	return cache.Options{DefaultNamespaces: set(all), ByObject: byObject}
}

// ownedTypes are the typed objects of operandKinds, for watches.
func ownedTypes() []client.Object {
	return []client.Object{
		&corev1.ServiceAccount{}, &corev1.Service{}, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{},
		&rbacv1.Role{}, &rbacv1.RoleBinding{}, &policyv1.PodDisruptionBudget{}, &appsv1.Deployment{}, &appsv1.DaemonSet{},
		&storagev1.CSIDriver{}, &storagev1.StorageClass{},
	}
}

// toSingleton maps any event to the one CloudControllerManager.
func toSingleton(context.Context, client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: singleton}}
}

// Setup registers the operand, cloud config sync and trusted CA sync controllers.
func Setup(mgr ctrl.Manager, cfg Config) error {
	cfg.Client = mgr.GetClient()
	cfg.Reader = mgr.GetAPIReader()
	enqueue := handler.EnqueueRequestsFromMapFunc(toSingleton)

	b := ctrl.NewControllerManagedBy(mgr).Named("operand").For(&v1alpha1.CloudControllerManager{})
	for _, o := range ownedTypes() {
		b = b.Owns(o)
	}
	// The synced config and CA bundle change the config hash.
	b = b.Watches(&corev1.Secret{}, enqueue).Watches(&corev1.ConfigMap{}, enqueue)
	if err := b.Complete(NewOperand(cfg)); err != nil {
		return fmt.Errorf("set up the operand controller: %w", err)
	}
	err := ctrl.NewControllerManagedBy(mgr).Named("cloud-config-sync").
		For(&v1alpha1.CloudControllerManager{}).
		Watches(&corev1.Secret{}, enqueue).
		Complete(NewCloudConfigSync(cfg, mgr.GetAPIReader()))
	if err != nil {
		return fmt.Errorf("set up the cloud config sync: %w", err)
	}
	err = ctrl.NewControllerManagedBy(mgr).Named("trusted-ca-sync").
		For(&v1alpha1.CloudControllerManager{}).
		Watches(&corev1.Secret{}, enqueue).Watches(&corev1.ConfigMap{}, enqueue).
		Complete(NewTrustedCASync(cfg, mgr.GetAPIReader()))
	if err != nil {
		return fmt.Errorf("set up the trusted CA sync: %w", err)
	}
	return nil
}
