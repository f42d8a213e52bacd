package install

import (
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
	"github.com/nephele-dev/nephele/operator/profiles"
)

// Rule is one of the operator's permissions and why it needs it.
type Rule struct {
	rbacv1.PolicyRule
	// Why names the code that needs it.
	Why string
}

var writeVerbs = []string{"get", "list", "watch", "create", "patch", "delete"}

// clusterRules are the operator's own cluster-wide permissions; clusterNames are the
// ClusterRoles and ClusterRoleBindings any built-in profile renders, driverNames and
// classNames its CSIDrivers and StorageClasses: the only ones it may read by name,
// change or delete.
func clusterRules(clusterNames, driverNames, classNames []string) []Rule {
	return []Rule{
		{rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"cloudcontrollermanagers"},
			Verbs: []string{"get", "list", "watch", "patch"}},
			"every controller reads the CloudControllerManager; the operand controller patches its finalizer (operator/controllers/operand.go)"},
		{rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"cloudcontrollermanagers/status"},
			Verbs: []string{"patch"}},
			"each controller server-side applies its conditions (operator/controllers/status.go)"},
		{rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"cloudcontrollermanagers/finalizers"},
			Verbs: []string{"update"}},
			"owner references with blockOwnerDeletion on the CCM's objects (OwnerReferencesPermissionEnforcement)"},
		{rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}},
			"replicas 1 on a one-node cluster: the operand controller lists two Nodes' metadata from the API server (operator/controllers/operand.go)"},
		{rbacv1.PolicyRule{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles", "clusterrolebindings"},
			Verbs: []string{"list", "watch", "create"}},
			"the CCM's ClusterRoles and bindings: watched (cache limited to the operator's label) and created; RBAC lets no rule name what does not exist yet"},
		{rbacv1.PolicyRule{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles", "clusterrolebindings"},
			Verbs: []string{"get", "patch", "delete"}, ResourceNames: clusterNames},
			"the CCM's ClusterRoles and bindings, by name (every name a built-in profile renders): applied and pruned, no other"},
		{rbacv1.PolicyRule{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"csidrivers", "storageclasses"},
			Verbs: []string{"list", "watch", "create"}},
			"spec.volumes: the CSI driver's CSIDriver object and default StorageClass, watched (cache limited to the operator's label) and created"},
		{rbacv1.PolicyRule{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"csidrivers"},
			Verbs: []string{"get", "patch", "delete"}, ResourceNames: driverNames},
			"spec.volumes: the CSIDriver, by name (every name a built-in profile renders): applied and pruned, no other"},
		{rbacv1.PolicyRule{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"},
			Verbs: []string{"get", "patch", "delete"}, ResourceNames: classNames},
			"spec.volumes: the default StorageClass, by name (every name a built-in profile renders): applied and pruned, no other"},
		{rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
			"/metrics: the caller's token is checked by the API server"},
		{rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
			"/metrics: the caller is authorized by the API server"},
	}
}

// controllerNamespaceRules are the operator's permissions in kube-system when the CCM
// runs elsewhere: the kinds a rendering puts there (render.InControllerNamespace), and
// no Secret, ConfigMap or workload of kube-system.
func controllerNamespaceRules() []Rule {
	return []Rule{
		{rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: writeVerbs},
			"the controllers' ServiceAccounts under --use-service-account-credentials"},
		{rbacv1.PolicyRule{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles", "rolebindings"}, Verbs: writeVerbs},
			"the Role and RoleBinding that let the CCM use its controllers' accounts"},
	}
}

// namespacedRules are the operator's permissions in the CCM's namespace.
func namespacedRules() []Rule {
	return []Rule{
		{rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts", "services", "secrets", "configmaps"}, Verbs: writeVerbs},
			"the CCM's ServiceAccounts and Service; the synced cloud config Secret and CA bundle ConfigMap (cache limited to the operator's label)"},
		{rbacv1.PolicyRule{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles", "rolebindings"}, Verbs: writeVerbs},
			"the CCM's Roles and RoleBindings"},
		{rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments", "daemonsets"}, Verbs: writeVerbs},
			"the CCM's Deployment and a profile's DaemonSet"},
		{rbacv1.PolicyRule{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: writeVerbs},
			"the CCM's PodDisruptionBudget"},
		{rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch"}},
			"Available needs a CCM replica holding the CCM's Lease"},
	}
}

// configRules are the operator's permissions in the config namespace, the only one
// spec.cloudConfig, spec.trustedCA and spec.volumes.cloudConfig may name: an editor of the CloudControllerManager
// can make the operator read a Secret there and no other.
func configRules() []Rule {
	return []Rule{
		{rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get"}},
			"spec.cloudConfig, spec.trustedCA and spec.volumes.cloudConfig, read with GET, never listed or watched (operator/controllers/cloudconfig.go, trustedca.go)"},
	}
}

// leaderRules are the operator's permissions in its own namespace.
func leaderRules() []Rule {
	return []Rule{
		{rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
			"the operator's own leader election"},
		{rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
			"leader election records its transitions as Events"},
	}
}

// operandClusterNames returns the name of every object of kinds any built-in profile
// renders, sorted.
func operandClusterNames(namespace string, kinds ...string) ([]string, error) {
	var names []string
	err := eachRendering(namespace, func(u *unstructured.Unstructured) {
		if slices.Contains(kinds, u.GetKind()) && !slices.Contains(names, u.GetName()) {
			names = append(names, u.GetName())
		}
	})
	slices.Sort(names)
	return names, err
}

// operandRules are the rules of every Role and ClusterRole any built-in profile renders:
// RBAC lets the operator grant only what it holds, so it holds these (rather than the
// escalate verb, which would let it grant anything).
func operandRules(namespace string) (cluster []rbacv1.PolicyRule, byNamespace map[string][]rbacv1.PolicyRule, err error) {
	byNamespace = map[string][]rbacv1.PolicyRule{}
	err = eachRendering(namespace, func(u *unstructured.Unstructured) {
		switch u.GetKind() {
		case "ClusterRole":
			cluster = append(cluster, rulesOf(u)...)
		case "Role":
			byNamespace[u.GetNamespace()] = append(byNamespace[u.GetNamespace()], rulesOf(u)...)
		case "ClusterRoleBinding":
			// Binding a ClusterRole the rendering does not define (system:auth-delegator)
			// needs its rules too: the operator holds those as its own (metrics).
		}
	})
	if err != nil {
		return nil, nil, err
	}
	return dedupe(cluster), byNamespace, nil
}

// eachRendering calls fn with every object of every built-in profile, rendered with
// every optional controller on (routes configured) and the CSI driver where the profile
// has one, in namespace.
func eachRendering(namespace string, fn func(*unstructured.Unstructured)) error {
	for _, name := range profiles.Names() {
		p, err := profiles.Load(name)
		if err != nil {
			return err
		}
		spec := v1alpha1.CloudControllerManagerSpec{Platform: name, ConfigureCloudRoutes: ptrTrue(), ClusterCIDR: "10.0.0.0/16"}
		if p.CSI != nil {
			spec.Volumes = &v1alpha1.Volumes{StorageClass: ptrTrue()}
		}
		if p.Image == "" {
			spec.Image = "registry.example/ccm:v1"
		}
		if p.Provider == "" {
			spec.Provider = "any"
		}
		r, err := profiles.Render(p, profiles.Input{Spec: spec, Namespace: namespace, DefaultVersion: "v1"})
		if err != nil {
			return fmt.Errorf("render profile %s for its permissions: %w", name, err)
		}
		for _, u := range r.Objects {
			fn(u)
		}
	}
	return nil
}

func ptrTrue() *bool { t := true; return &t }

func rulesOf(u *unstructured.Unstructured) []rbacv1.PolicyRule {
	var role rbacv1.ClusterRole
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role)
	return role.Rules
}

func dedupe(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		if !slices.ContainsFunc(out, func(o rbacv1.PolicyRule) bool {
			return slices.Equal(o.APIGroups, r.APIGroups) && slices.Equal(o.Resources, r.Resources) &&
				slices.Equal(o.ResourceNames, r.ResourceNames) && slices.Equal(o.Verbs, r.Verbs) &&
				slices.Equal(o.NonResourceURLs, r.NonResourceURLs)
		}) {
			out = append(out, r)
		}
	}
	return out
}

func policyRules(rules []Rule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(rules))
	for i, r := range rules {
		out[i] = r.PolicyRule
	}
	return out
}

// controllerNamespace is where renderings put the controllers' accounts and Role.
const controllerNamespace = render.ControllerServiceAccountNamespace
