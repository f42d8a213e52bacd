package render

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nephele-dev/nephele/manager"
)

// Names of the objects every rendering has, upstream's where the KEPs name them.
const (
	// ServiceAccountName is the manager's own identity.
	ServiceAccountName = "cloud-controller-manager"
	// DeploymentName names the Deployment, its PodDisruptionBudget and metrics Service.
	DeploymentName = "cloud-controller-manager"
	// ManagerClusterRole is the manager's cluster-wide role (seed 000's name).
	ManagerClusterRole = "system:cloud-controller-manager"
	// LeaderLockingRole is the Role on the manager's Lease (seed 000's name).
	LeaderLockingRole = "system::leader-locking-cloud-controller-manager"
	// ControllerCredentialsRole lets the manager get its controllers' service accounts
	// and request their tokens, under --use-service-account-credentials. It grants no
	// create on serviceaccounts: the rendering holds the accounts.
	ControllerCredentialsRole = "system:cloud-controller-manager:controller-credentials"
	// AuthDelegatorBinding binds the manager to the built-in system:auth-delegator.
	AuthDelegatorBinding = "system:cloud-controller-manager:auth-delegator"
	// MetricsReaderClusterRole allows GET /metrics; bind it to a scraper.
	MetricsReaderClusterRole = "system:cloud-controller-manager:metrics-reader"
	// LeaseName is the manager's Lease (--leader-elect-resource-name's default).
	LeaseName = "cloud-controller-manager"
	// ControllerServiceAccountNamespace is where the manager finds its controllers'
	// service accounts (manager/clients.go), whatever the Deployment's namespace.
	ControllerServiceAccountNamespace = "kube-system"
	// authDelegatorClusterRole is Kubernetes' bootstrap role for delegated
	// authentication and authorization: create tokenreviews and subjectaccessreviews.
	authDelegatorClusterRole = "system:auth-delegator"
)

// InControllerNamespace reports whether a rendering may put an object of kind in
// ControllerServiceAccountNamespace: the controllers' ServiceAccounts and the Role and
// RoleBinding that let the manager use them, nothing else. Whoever manages renderings (the
// operator) needs write access there for these kinds only, and never to its Secrets.
func InControllerNamespace(kind string) bool {
	switch kind {
	case "ServiceAccount", "Role", "RoleBinding":
		return true
	}
	return false
}

// ControllerClusterRole is the ClusterRole of a controller's service account under
// --use-service-account-credentials: system:controller:cloud-node-controller for
// node-controller. The "cloud-" keeps it apart from the bootstrap roles Kubernetes
// itself reconciles for kube-controller-manager's controllers
// (system:controller:node-controller and the like), which a rendering must not touch.
func ControllerClusterRole(serviceAccount string) string {
	return "system:controller:cloud-" + serviceAccount
}

// API groups.
const (
	groupCore           = ""
	groupCoordination   = "coordination.k8s.io"
	groupAuthentication = "authentication.k8s.io"
	groupAuthorization  = "authorization.k8s.io"
)

// Rule is one permission and the code that needs it: a controller's, as its
// manager.ControllerSpec declares it, or the manager's own.
type Rule = manager.RBACRule

// Identity is one identity the manager's requests are made as, and its rules.
type Identity struct {
	// ServiceAccount is the service account's name.
	ServiceAccount string
	// Namespace is the service account's namespace.
	Namespace string
	// ClusterRole names the ClusterRole holding Cluster; empty when there is none.
	ClusterRole string
	// Cluster are its cluster-wide rules, one per code path (merged into policy rules
	// when rendered).
	Cluster []Rule
	// Roles are its rules that hold in one namespace each.
	Roles []RoleRules
	// AuthDelegator says it is bound to system:auth-delegator.
	AuthDelegator bool
}

// RoleRules are the rules of one Role.
type RoleRules struct {
	// Role names the Role and its RoleBinding.
	Role string
	// Namespace is where they are.
	Namespace string
	// Rules are its rules, one per code path.
	Rules []Rule
}

// verbOrder is the order verbs are listed in.
var verbOrder = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// resourceOrder is the order rules are listed in, so that a role's rules do not depend
// on which controller mentioned a resource first (the Helm chart lists them this way).
// Resources it does not name (a provider's own controllers') come after, in the order
// of first mention.
var resourceOrder = []string{"nodes", "nodes/status", "services", "services/status", "events", "leases",
	"serviceaccounts", "serviceaccounts/token"}

// Identities are the identities r's manager makes requests as, with the rules each
// needs: the manager's ServiceAccount always, and under
// --use-service-account-credentials one per controller service account. The controllers'
// rules are those their specs declare (ControllerSpec.RBAC and Informers); the manager's
// own (informers, Events, the Lease, tokens) are written here, beside the objects that
// name the Lease and the accounts.
func (r resolved) identities() []Identity {
	mgr := Identity{ServiceAccount: ServiceAccountName, Namespace: r.Namespace, ClusterRole: ManagerClusterRole,
		AuthDelegator: true}
	enabled := r.enabledSpecs()

	// The shared informers: the manager's client, whatever the credentials mode. One
	// rule per resource, in the order the controllers first mention it.
	var informed []schema.GroupResource
	users := map[schema.GroupResource][]string{}
	for _, s := range enabled {
		for _, gr := range s.Informers {
			if _, seen := users[gr]; !seen {
				informed = append(informed, gr)
			}
			if !slices.Contains(users[gr], s.Name) {
				users[gr] = append(users[gr], s.Name)
			}
		}
	}
	for _, gr := range informed {
		mgr.Cluster = append(mgr.Cluster, Rule{Group: gr.Group, Resource: gr.Resource, Verbs: []string{"list", "watch"},
			Why: "the manager's shared informers, for " + strings.Join(users[gr], ", ") + " (manager/run.go)"})
	}
	mgr.Cluster = append(mgr.Cluster, Rule{Group: groupCore, Resource: "events", Verbs: []string{"create", "patch"},
		Why: "the manager's event broadcaster records every controller's Events, patching repeated ones (manager/run.go)"})
	mgr.Roles = append(mgr.Roles, RoleRules{Role: LeaderLockingRole, Namespace: r.Namespace, Rules: []Rule{
		{Group: groupCoordination, Resource: "leases", Verbs: []string{"get", "update"}, ResourceNames: []string{LeaseName},
			Why: "leader election reads and renews the Lease, and releases it on exit (manager/lease.go)"},
		{Group: groupCoordination, Resource: "leases", Verbs: []string{"create"},
			Why: "leader election creates the Lease the first time; create cannot be limited to a name (manager/lease.go)"},
	}})

	if !r.UseServiceAccountCredentials {
		for _, s := range enabled {
			mgr.Cluster = append(mgr.Cluster, s.RBAC...)
		}
		return []Identity{mgr}
	}

	// One identity per controller service account, in the order the controllers start.
	var accounts []string
	byAccount := map[string][]Rule{}
	for _, s := range enabled {
		sa := s.ClientName
		if sa == "" {
			sa = s.Name
		}
		if _, seen := byAccount[sa]; !seen {
			accounts = append(accounts, sa)
		}
		byAccount[sa] = append(byAccount[sa], s.RBAC...)
	}
	if len(accounts) == 0 {
		// No controller runs: no account to read, and a rule without names would
		// grant every service account's tokens.
		return []Identity{mgr}
	}
	mgr.Roles = append(mgr.Roles, RoleRules{
		Role: ControllerCredentialsRole, Namespace: ControllerServiceAccountNamespace,
		Rules: []Rule{
			{Group: groupCore, Resource: "serviceaccounts", Verbs: []string{"get"}, ResourceNames: accounts,
				Why: "--use-service-account-credentials: the manager checks each controller's service account exists (manager/clients.go)"},
			{Group: groupCore, Resource: "serviceaccounts/token", Verbs: []string{"create"}, ResourceNames: accounts,
				Why: "--use-service-account-credentials: the manager requests each controller's token with the TokenRequest API (manager/clients.go)"},
		},
	})
	ids := []Identity{mgr}
	for _, sa := range accounts {
		ids = append(ids, Identity{ServiceAccount: sa, Namespace: ControllerServiceAccountNamespace,
			ClusterRole: ControllerClusterRole(sa), Cluster: byAccount[sa]})
	}
	return ids
}

// enabledSpecs are the specs of the controllers that run, in the order they start.
func (r resolved) enabledSpecs() []manager.ControllerSpec {
	var out []manager.ControllerSpec
	for _, s := range r.specs {
		if slices.Contains(r.enabled, s.Name) {
			out = append(out, s)
		}
	}
	return out
}

// resourceRank is res's place in resourceOrder; after them all when it is not there.
func resourceRank(res string) int {
	if i := slices.Index(resourceOrder, res); i >= 0 {
		return i
	}
	return len(resourceOrder)
}

// mergeRules joins rules on the same group, resource and resource names into one, with
// the verbs in verbOrder and the rules in resourceOrder (those of one resource in the
// order of first mention).
func mergeRules(rules []Rule) []Rule {
	var out []Rule
	for _, r := range rules {
		i := slices.IndexFunc(out, func(o Rule) bool {
			return o.Group == r.Group && o.Resource == r.Resource && slices.Equal(o.ResourceNames, r.ResourceNames)
		})
		if i < 0 {
			out = append(out, Rule{Group: r.Group, Resource: r.Resource, Verbs: slices.Clone(r.Verbs),
				ResourceNames: slices.Clone(r.ResourceNames)})
			continue
		}
		for _, v := range r.Verbs {
			if !slices.Contains(out[i].Verbs, v) {
				out[i].Verbs = append(out[i].Verbs, v)
			}
		}
	}
	for i := range out {
		slices.SortFunc(out[i].Verbs, func(a, b string) int { return slices.Index(verbOrder, a) - slices.Index(verbOrder, b) })
	}
	slices.SortStableFunc(out, func(a, b Rule) int { return resourceRank(a.Resource) - resourceRank(b.Resource) })
	return out
}
