package render

import (
	"fmt"
	"strings"
)

// PermissionsTable returns, as a Markdown table, every permission o's rendering grants:
// the identity, where it holds, the rule, and the code path that needs it.
// docs/deploy.md holds the table of the default rendering, and a test keeps it current.
func PermissionsTable(o Options) (string, error) {
	r, err := o.resolve()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("| identity | role (scope) | resource | verbs | names | needed by |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	row := func(id Identity, role, scope string, rule Rule) {
		res := rule.Resource
		if rule.Group != "" {
			res += "." + rule.Group
		}
		names := "all"
		if len(rule.ResourceNames) > 0 {
			names = strings.Join(rule.ResourceNames, ", ")
		}
		fmt.Fprintf(&b, "| `%s/%s` | `%s` (%s) | `%s` | %s | %s | %s |\n", id.Namespace, id.ServiceAccount, role, scope, res,
			strings.Join(rule.Verbs, ", "), names, rule.Why)
	}
	for _, id := range r.identities() {
		for _, rule := range id.Cluster {
			row(id, id.ClusterRole, "cluster", rule)
		}
		if id.AuthDelegator {
			for _, res := range []struct{ group, resource, why string }{
				{groupAuthentication, "tokenreviews", "/metrics and /debug/pprof: the bearer token of a request is checked by the apiserver (manager/serving/auth.go)"},
				{groupAuthorization, "subjectaccessreviews", "/metrics and /debug/pprof: the request's user is authorized by the apiserver (manager/serving/auth.go)"},
			} {
				row(id, authDelegatorClusterRole, "cluster", Rule{Group: res.group, Resource: res.resource, Verbs: []string{"create"}, Why: res.why})
			}
		}
		for _, nr := range id.Roles {
			for _, rule := range nr.Rules {
				row(id, nr.Role, "namespace "+nr.Namespace, rule)
			}
		}
	}
	return b.String(), nil
}
