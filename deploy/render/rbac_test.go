package render

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nephele-dev/nephele/controllers"
	"github.com/nephele-dev/nephele/manager"
)

// combinations are option sets covering every subset of controllers, both credential
// modes and the metrics switch.
func combinations(t *testing.T) map[string]Options {
	t.Helper()
	names := []string{manager.CloudNodeController, manager.CloudNodeLifecycleController, manager.ServiceLBController, manager.NodeRouteController}
	out := map[string]Options{}
	for mask := 1; mask < 1<<len(names); mask++ {
		var enabled []string
		for i, n := range names {
			if mask&(1<<i) != 0 {
				enabled = append(enabled, n)
			}
		}
		for _, sa := range []bool{true, false} {
			for _, metrics := range []bool{true, false} {
				o := DefaultOptions()
				o.Controllers, o.UseServiceAccountCredentials, o.MetricsService = enabled, sa, metrics
				out[fmt.Sprintf("%s/sa=%t/metrics=%t", strings.Join(enabled, ","), sa, metrics)] = o
			}
		}
	}
	return out
}

// rbac decodes the RBAC objects of a rendering.
func rbac(t *testing.T, objs []*unstructured.Unstructured) (roles map[string][]rbacv1.PolicyRule, bindings []rbacv1.Subject) {
	t.Helper()
	roles = map[string][]rbacv1.PolicyRule{}
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole", "Role":
			var r rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				t.Fatal(err)
			}
			roles[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = r.Rules
		case "ClusterRoleBinding", "RoleBinding":
			var b rbacv1.ClusterRoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
				t.Fatal(err)
			}
			bindings = append(bindings, b.Subjects...)
		}
	}
	return roles, bindings
}

// TestNoWildcard: no rule of any rendering names "*" as a verb, group, resource,
// resource name or URL.
func TestNoWildcard(t *testing.T) {
	for name, o := range combinations(t) {
		objs, err := Render(o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		roles, _ := rbac(t, objs)
		for role, rules := range roles {
			for _, r := range rules {
				for _, list := range [][]string{r.Verbs, r.APIGroups, r.Resources, r.ResourceNames, r.NonResourceURLs} {
					for _, s := range list {
						if strings.Contains(s, "*") {
							t.Errorf("%s: %s has a wildcard rule %+v", name, role, r)
						}
					}
				}
				if len(r.Verbs) == 0 {
					t.Errorf("%s: %s has a rule without verbs %+v", name, role, r)
				}
			}
		}
	}
}

// allows reports whether rules grant verb on resource (core group).
func allows(rules []rbacv1.PolicyRule, verb, resource string) bool {
	for _, r := range rules {
		if slices.Contains(r.Verbs, verb) && slices.Contains(r.Resources, resource) {
			return true
		}
	}
	return false
}

// TestRulesFollowTheControllers: a controller's writes are granted exactly when it is
// enabled, to its own service account under --use-service-account-credentials and to
// the manager otherwise; the manager's own identity never gets a controller's writes
// when the controllers have their own.
func TestRulesFollowTheControllers(t *testing.T) {
	for name, o := range combinations(t) {
		objs, err := Render(o)
		if err != nil {
			t.Fatal(err)
		}
		roles, _ := rbac(t, objs)
		mgr := roles["ClusterRole//"+ManagerClusterRole]
		on := func(c string) bool { return slices.Contains(o.Controllers, c) }
		sa := func(c string) []rbacv1.PolicyRule {
			for _, s := range controllers.Default() {
				if s.Name == c {
					return roles["ClusterRole//"+ControllerClusterRole(s.ClientName)]
				}
			}
			t.Fatalf("no controller %s", c)
			return nil
		}
		writer := func(c string) []rbacv1.PolicyRule {
			if o.UseServiceAccountCredentials {
				return sa(c)
			}
			return mgr
		}
		checks := []struct {
			controller, verb, resource string
		}{
			{manager.CloudNodeController, "patch", "nodes/status"},
			{manager.CloudNodeLifecycleController, "delete", "nodes"},
			{manager.ServiceLBController, "patch", "services"},
			{manager.ServiceLBController, "patch", "services/status"},
			{manager.NodeRouteController, "patch", "nodes/status"},
		}
		for _, c := range checks {
			if on(c.controller) && !allows(writer(c.controller), c.verb, c.resource) {
				t.Errorf("%s: %s enabled but %s %s not granted", name, c.controller, c.verb, c.resource)
			}
		}
		if !on(manager.CloudNodeLifecycleController) {
			for role, rules := range roles {
				if allows(rules, "delete", "nodes") {
					t.Errorf("%s: %s may delete nodes without cloud-node-lifecycle-controller", name, role)
				}
			}
		}
		if !on(manager.ServiceLBController) {
			for role, rules := range roles {
				if allows(rules, "list", "services") || allows(rules, "patch", "services") {
					t.Errorf("%s: %s reads or writes services without service-lb-controller", name, role)
				}
			}
		}
		if o.UseServiceAccountCredentials {
			for _, verb := range []string{"patch", "delete", "update", "create"} {
				for _, res := range []string{"nodes", "nodes/status", "services", "services/status"} {
					if allows(mgr, verb, res) {
						t.Errorf("%s: the manager's own role may %s %s; the controllers' accounts should", name, verb, res)
					}
				}
			}
		}
		if !allows(mgr, "list", "nodes") || !allows(mgr, "watch", "nodes") || !allows(mgr, "create", "events") {
			t.Errorf("%s: the manager cannot run its shared node informer or record events: %+v", name, mgr)
		}
	}
}

// TestNoBootstrapRoleTouched: no rendered ClusterRole or binding has the name of a role
// kube-apiserver reconciles for kube-controller-manager, whose rules apply would replace.
func TestNoBootstrapRoleTouched(t *testing.T) {
	bootstrap := []string{"system:controller:node-controller", "system:controller:service-controller",
		"system:controller:route-controller", "system:auth-delegator", "system:kube-controller-manager"}
	for name, o := range combinations(t) {
		objs, err := Render(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range objs {
			if slices.Contains(bootstrap, obj.GetName()) {
				t.Errorf("%s: renders %s %s, a bootstrap object", name, obj.GetKind(), obj.GetName())
			}
		}
	}
}

// TestControllerAccounts: the service accounts bound are those manager/clients.go uses
// (the controllers' ClientName), in kube-system; the manager may request tokens for
// exactly those.
func TestControllerAccounts(t *testing.T) {
	objs, err := Render(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	roles, subjects := rbac(t, objs)
	var want []string
	for _, s := range controllers.Default() {
		if !slices.Contains(want, s.ClientName) {
			want = append(want, s.ClientName)
		}
	}
	for _, sa := range want {
		if !slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool { return s.Name == sa && s.Namespace == "kube-system" }) {
			t.Errorf("no binding for kube-system/%s", sa)
		}
	}
	creds := roles["Role/kube-system/"+ControllerCredentialsRole]
	for _, r := range creds {
		if slices.Contains(r.Resources, "serviceaccounts/token") {
			if !slices.Equal(r.ResourceNames, want) {
				t.Errorf("token requests allowed for %v, want %v", r.ResourceNames, want)
			}
		}
	}
	if len(creds) == 0 {
		t.Error("no controller-credentials Role")
	}
	got := kinds(objs)
	if len(got["Deployment"]) != 1 || len(got["PodDisruptionBudget"]) != 1 || len(got["Service"]) != 1 || len(got["ServiceAccount"]) != 1+len(want) {
		t.Errorf("objects %v", got)
	}
}

// TestControllerServiceAccountsRendered: the controllers' service accounts are rendered
// exactly under --use-service-account-credentials, one per account a binding names, in
// kube-system whatever the Deployment's namespace, labelled like every object, and each
// before the first object that names it (the order `kubectl apply` creates them in).
func TestControllerServiceAccountsRendered(t *testing.T) {
	for name, o := range combinations(t) {
		for _, ns := range []string{DefaultNamespace, "nephele-system"} {
			o.Namespace = ns
			objs, err := Render(o)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			// Every subject a binding names, with the position of its first binding.
			firstUse := map[string]int{}
			for i, obj := range objs {
				if k := obj.GetKind(); k != "ClusterRoleBinding" && k != "RoleBinding" {
					continue
				}
				_, subjects := rbac(t, objs[i:i+1])
				for _, s := range subjects {
					if _, seen := firstUse[s.Namespace+"/"+s.Name]; !seen {
						firstUse[s.Namespace+"/"+s.Name] = i
					}
				}
			}
			rendered := map[string]int{}
			for i, obj := range objs {
				if obj.GetKind() != "ServiceAccount" {
					continue
				}
				key := obj.GetNamespace() + "/" + obj.GetName()
				if _, dup := rendered[key]; dup {
					t.Errorf("%s ns=%s: ServiceAccount %s rendered twice", name, ns, key)
				}
				rendered[key] = i
				if !maps.Equal(obj.GetLabels(), commonLabels) {
					t.Errorf("%s ns=%s: ServiceAccount %s has labels %v, want %v", name, ns, key, obj.GetLabels(), commonLabels)
				}
			}
			var want []string
			want = append(want, ns+"/"+ServiceAccountName)
			if o.UseServiceAccountCredentials {
				for _, s := range controllers.Default() {
					sa := ControllerServiceAccountNamespace + "/" + s.ClientName
					if slices.Contains(o.Controllers, s.Name) && !slices.Contains(want, sa) {
						want = append(want, sa)
					}
				}
			}
			got := slices.Sorted(maps.Keys(rendered))
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s ns=%s: ServiceAccounts %v, want %v", name, ns, got, want)
			}
			for sa, i := range firstUse {
				at, ok := rendered[sa]
				if !ok {
					t.Errorf("%s ns=%s: a binding names ServiceAccount %s, which is not rendered", name, ns, sa)
				} else if at > i {
					t.Errorf("%s ns=%s: ServiceAccount %s comes after %s %s, which names it", name, ns, sa, objs[i].GetKind(), objs[i].GetName())
				}
			}
		}
	}
}

// TestNoServiceAccountCreate: no rendering grants create on serviceaccounts (a grant
// that cannot be limited to a name); the manager may only get its controllers' accounts
// and request their tokens.
func TestNoServiceAccountCreate(t *testing.T) {
	cases := combinations(t)
	// No controller at all (the route controller is off without cloud routes): no
	// account, so no rule that would name none and so grant every account.
	none := DefaultOptions()
	none.Controllers, none.ConfigureCloudRoutes = []string{manager.NodeRouteController}, false
	cases["none/sa=true"] = none
	for name, o := range cases {
		objs, err := Render(o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		roles, _ := rbac(t, objs)
		for role, rules := range roles {
			if allows(rules, "create", "serviceaccounts") {
				t.Errorf("%s: %s may create serviceaccounts", name, role)
			}
			for _, r := range rules {
				if slices.Contains(r.Resources, "serviceaccounts") && !slices.Equal(r.Verbs, []string{"get"}) {
					t.Errorf("%s: %s has %v on serviceaccounts, want get only", name, role, r.Verbs)
				}
				if (slices.Contains(r.Resources, "serviceaccounts/token") || slices.Contains(r.Resources, "serviceaccounts")) && len(r.ResourceNames) == 0 {
					t.Errorf("%s: %s may %v every service account", name, role, r.Verbs)
				}
			}
		}
		ids, err := Identities(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			for _, nr := range id.Roles {
				for _, r := range nr.Rules {
					if r.Resource == "serviceaccounts" && slices.Contains(r.Verbs, "create") {
						t.Errorf("%s: identity %s role %s: %+v", name, id.ServiceAccount, nr.Role, r)
					}
				}
			}
		}
	}
}

// exampleSpec is a provider's own controller, as its main would pass it to
// manager.NewCommand beside nephele's four.
func exampleSpec() manager.ControllerSpec {
	return manager.ControllerSpec{
		Name:       "example-controller",
		ClientName: "example-controller",
		RBAC: []manager.RBACRule{{Resource: "configmaps", Verbs: []string{"get"}, ResourceNames: []string{"example"},
			Why: "example-controller reads its settings (example/sync.go)"}},
		Informers: []schema.GroupResource{{Group: "discovery.k8s.io", Resource: "endpointslices"}, {Resource: "nodes"}},
	}
}

// TestProviderControllerSpecs: a provider's own controller, passed in ControllerSpecs,
// gets the rules and informers its spec declares, on its own account or on the
// manager's, and they show in the permission table; --controllers selects among the
// given specs.
func TestProviderControllerSpecs(t *testing.T) {
	specs := append(controllers.Default(), exampleSpec())
	tests := []struct {
		name        string
		sa          bool
		controllers []string
		holder      string // the ClusterRole granted the controller's rule; "" for none
	}{
		{"own account", true, []string{"*"}, ControllerClusterRole("example-controller")},
		{"manager's account", false, []string{"*"}, ManagerClusterRole},
		{"disabled", true, []string{"*", "-example-controller"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			o.ControllerSpecs, o.UseServiceAccountCredentials, o.Controllers = specs, tt.sa, tt.controllers
			objs, err := Render(o)
			if err != nil {
				t.Fatal(err)
			}
			roles, _ := rbac(t, objs)
			var configmaps, endpointslices []string
			for role, rules := range roles {
				for _, r := range rules {
					if slices.Equal(r.Resources, []string{"configmaps"}) && slices.Equal(r.Verbs, []string{"get"}) &&
						slices.Equal(r.ResourceNames, []string{"example"}) {
						configmaps = append(configmaps, role)
					}
					if slices.Equal(r.Resources, []string{"endpointslices"}) && slices.Equal(r.APIGroups, []string{"discovery.k8s.io"}) &&
						slices.Equal(r.Verbs, []string{"list", "watch"}) {
						endpointslices = append(endpointslices, role)
					}
				}
			}
			table, err := PermissionsTable(o)
			if err != nil {
				t.Fatal(err)
			}
			if tt.holder == "" {
				if len(configmaps)+len(endpointslices) > 0 || strings.Contains(table, "example-controller") {
					t.Errorf("disabled, yet granted: configmaps to %v, endpointslices to %v; table:\n%s", configmaps, endpointslices, table)
				}
				return
			}
			if want := []string{"ClusterRole//" + tt.holder}; !reflect.DeepEqual(configmaps, want) {
				t.Errorf("get configmaps granted to %v, want %v", configmaps, want)
			}
			if want := []string{"ClusterRole//" + ManagerClusterRole}; !reflect.DeepEqual(endpointslices, want) {
				t.Errorf("list, watch endpointslices granted to %v, want %v (the manager's informers)", endpointslices, want)
			}
			for _, row := range []string{"example-controller reads its settings (example/sync.go)",
				"| `endpointslices.discovery.k8s.io` | list, watch | all | the manager's shared informers, for example-controller (manager/run.go) |",
				"for cloud-node-controller, cloud-node-lifecycle-controller, service-lb-controller, node-route-controller, example-controller (manager/run.go)"} {
				if !strings.Contains(table, row) {
					t.Errorf("the permission table lacks %q:\n%s", row, table)
				}
			}
		})
	}
}

// TestControllerSpecsRefused: a spec whose RBAC could not be rendered least privilege is
// refused with the controller's name, whatever the flags.
func TestControllerSpecsRefused(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*manager.ControllerSpec)
		want   string
	}{
		{"wildcard verb", func(s *manager.ControllerSpec) { s.RBAC[0].Verbs = []string{"*"} }, "wildcard"},
		{"wildcard resource", func(s *manager.ControllerSpec) { s.RBAC[0].Resource = "*" }, "wildcard"},
		{"no verb", func(s *manager.ControllerSpec) { s.RBAC[0].Verbs = nil }, "no resource or no verb"},
		{"wildcard informer", func(s *manager.ControllerSpec) { s.Informers[0].Resource = "*" }, "is not one resource"},
		{"no name", func(s *manager.ControllerSpec) { s.Name = "" }, "has no name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := exampleSpec()
			tt.mutate(&spec)
			o := DefaultOptions()
			o.ControllerSpecs = append(controllers.Default(), spec)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}
