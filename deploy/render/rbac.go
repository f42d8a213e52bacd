package render

import (
	"slices"
	"strings"

	"github.com/nephele-dev/nephele/controllers"
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

// Rule is one permission and the code that needs it.
type Rule struct {
	// Group, Resource and Verbs are the RBAC rule's; Resource may name a subresource
	// (nodes/status).
	Group, Resource string
	Verbs           []string
	// ResourceNames limits the rule to these objects; empty means all.
	ResourceNames []string
	// Why is the code path that makes the request.
	Why string
}

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

// What each controller's client does (its writes and reads of single objects) and which
// informers it registers on the manager's shared factory. Read from the controllers'
// sync code; docs/deploy.md has the same table.
var controllerClientRules = map[string][]Rule{
	manager.CloudNodeController: {
		{Group: groupCore, Resource: "nodes", Verbs: []string{"get"}, Why: "cloud-node-controller re-reads a Node whose patch conflicted (controllers/nodeinit/sync.go)"},
		{Group: groupCore, Resource: "nodes", Verbs: []string{"patch"}, Why: "cloud-node-controller sets the provider ID, labels and removes the uninitialized taint (controllers/nodeinit/sync.go)"},
		{Group: groupCore, Resource: "nodes/status", Verbs: []string{"patch"}, Why: "cloud-node-controller sets the Node's addresses (controllers/nodeinit/sync.go)"},
	},
	manager.CloudNodeLifecycleController: {
		{Group: groupCore, Resource: "nodes", Verbs: []string{"patch"}, Why: "cloud-node-lifecycle-controller adds and removes the shutdown taint (controllers/nodelifecycle/sync.go)"},
		{Group: groupCore, Resource: "nodes", Verbs: []string{"delete"}, Why: "cloud-node-lifecycle-controller deletes the Node of an instance the cloud confirms gone (controllers/nodelifecycle/sync.go)"},
	},
	manager.ServiceLBController: {
		{Group: groupCore, Resource: "services", Verbs: []string{"get"}, Why: "service-lb-controller reads the live Service before deleting its load balancer (controllers/loadbalancer/sync.go)"},
		{Group: groupCore, Resource: "services", Verbs: []string{"patch"}, Why: "service-lb-controller adds and removes the load-balancer-cleanup finalizer (controllers/loadbalancer/sync.go)"},
		{Group: groupCore, Resource: "services/status", Verbs: []string{"patch"}, Why: "service-lb-controller writes status.loadBalancer (controllers/loadbalancer/sync.go)"},
	},
	manager.NodeRouteController: {
		{Group: groupCore, Resource: "nodes/status", Verbs: []string{"patch"}, Why: "node-route-controller sets the NetworkUnavailable condition (controllers/route/condition.go)"},
	},
}

// controllerInformers are the shared informers each controller registers; the
// manager's own client lists and watches them (manager/run.go).
var controllerInformers = map[string][]string{
	manager.CloudNodeController:          {"nodes"},
	manager.CloudNodeLifecycleController: {"nodes"},
	manager.ServiceLBController:          {"nodes", "services"},
	manager.NodeRouteController:          {"nodes"},
}

// verbOrder is the order verbs are listed in.
var verbOrder = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// resourceOrder is the order rules are listed in, so that a role's rules do not depend
// on which controller mentioned a resource first (the Helm chart lists them this way).
var resourceOrder = []string{"nodes", "nodes/status", "services", "services/status", "events", "leases",
	"serviceaccounts", "serviceaccounts/token"}

// Identities are the identities r's manager makes requests as, with the rules each
// needs: the manager's ServiceAccount always, and under
// --use-service-account-credentials one per controller service account.
func (r resolved) identities() []Identity {
	specs := controllers.Default()
	mgr := Identity{ServiceAccount: ServiceAccountName, Namespace: r.Namespace, ClusterRole: ManagerClusterRole,
		AuthDelegator: true}

	// The shared informers: the manager's client, whatever the credentials mode.
	resources := map[string]bool{}
	for _, c := range r.enabled {
		for _, res := range controllerInformers[c] {
			resources[res] = true
		}
	}
	for _, res := range []string{"nodes", "services"} {
		if resources[res] {
			mgr.Cluster = append(mgr.Cluster, Rule{Group: groupCore, Resource: res, Verbs: []string{"list", "watch"},
				Why: "the manager's shared informers, for " + strings.Join(r.informerUsers(res), ", ") + " (manager/run.go)"})
		}
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
		for _, c := range r.enabled {
			mgr.Cluster = append(mgr.Cluster, controllerClientRules[c]...)
		}
		return []Identity{mgr}
	}

	// One identity per controller service account, in the order the controllers start.
	var accounts []string
	byAccount := map[string][]Rule{}
	for _, s := range specs {
		if !slices.Contains(r.enabled, s.Name) {
			continue
		}
		sa := s.ClientName
		if sa == "" {
			sa = s.Name
		}
		if _, seen := byAccount[sa]; !seen {
			accounts = append(accounts, sa)
		}
		byAccount[sa] = append(byAccount[sa], controllerClientRules[s.Name]...)
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

// informerUsers are the enabled controllers that register an informer for res.
func (r resolved) informerUsers(res string) []string {
	var users []string
	for _, c := range r.enabled {
		if slices.Contains(controllerInformers[c], res) {
			users = append(users, c)
		}
	}
	return users
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
	slices.SortStableFunc(out, func(a, b Rule) int {
		return slices.Index(resourceOrder, a.Resource) - slices.Index(resourceOrder, b.Resource)
	})
	return out
}
