package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/deploy/render"
)

// auditEvent is the part of an audit.k8s.io/v1 Event the comparison reads.
type auditEvent struct {
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent                string    `json:"userAgent"`
	Verb                     string    `json:"verb"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	ObjectRef                *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// grant is one permission: an identity may make verb on group/resource.
type grant struct {
	identity, group, resource, verb string
}

func (g grant) String() string {
	res := g.resource
	if g.group != "" {
		res += "." + g.group
	}
	return fmt.Sprintf("%s %s %s", g.identity, g.verb, res)
}

// ccmUserAgent is how every request of nephele's CCM names itself; the node-controller
// ServiceAccount is kube-controller-manager's too (its node-lifecycle-controller), and
// this tells the two apart.
const ccmUserAgent = "cloud-controller-manager/"

// checkLeastPrivilege compares every permission the rendering grants with the requests
// the CCM's identities made during the run (the audit log) until removal began: every
// request was allowed, and every permission was used or is listed in docs/deploy.md's
// table of permissions the end-to-end test does not exercise, with the code path that
// needs it. During `kubectl delete -f` the RBAC goes before the Deployment (the order of
// the file), so the replicas still running are refused for a moment: those requests are
// counted, not judged.
func checkLeastPrivilege(t *testing.T, auditLog string, o render.Options, removal time.Time) {
	ids, err := render.Identities(o)
	if err != nil {
		t.Fatal(err)
	}
	granted := map[grant]string{} // -> why
	users := map[string]string{}  // audit username -> identity as docs name it
	for _, id := range ids {
		name := id.Namespace + "/" + id.ServiceAccount
		users["system:serviceaccount:"+id.Namespace+":"+id.ServiceAccount] = name
		rules := slices.Clone(id.Cluster)
		for _, r := range id.Roles {
			rules = append(rules, r.Rules...)
		}
		if id.AuthDelegator {
			rules = append(rules,
				render.Rule{Group: "authentication.k8s.io", Resource: "tokenreviews", Verbs: []string{"create"}, Why: "system:auth-delegator"},
				render.Rule{Group: "authorization.k8s.io", Resource: "subjectaccessreviews", Verbs: []string{"create"}, Why: "system:auth-delegator"})
		}
		for _, r := range rules {
			for _, v := range r.Verbs {
				granted[grant{name, r.Group, r.Resource, v}] = r.Why
			}
		}
	}

	accept := func(ev auditEvent) bool {
		return strings.HasPrefix(ev.UserAgent, ccmUserAgent) || strings.HasSuffix(ev.User.Username, ":"+render.ServiceAccountName)
	}
	judgePermissions(t, auditLog, "the CCM", granted, users, accept, unusedInE2E(t, "deploy.md", "unused-in-e2e"), removal)
}

// judgePermissions compares what the identities in users (audit user name -> identity as
// the docs name it) were granted with the requests of theirs that accept takes, made
// before removal (zero: all): every request allowed, every grant used or in documented
// (docs' table of permissions the end-to-end test does not see used, with the code path
// that needs them), every documented one granted.
func judgePermissions(t *testing.T, auditLog, who string, granted map[grant]string, users map[string]string,
	accept func(auditEvent) bool, documented map[grant]string, removal time.Time) {
	t.Helper()
	f, err := os.Open(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	used := map[grant]int{}
	var denied []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n, teardown := 0, 0
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit log %s: %v", auditLog, err)
		}
		name, ok := users[ev.User.Username]
		if !ok || ev.ObjectRef == nil || !accept(ev) {
			continue
		}
		if !removal.IsZero() && ev.RequestReceivedTimestamp.After(removal) {
			teardown++
			continue
		}
		n++
		res := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
		g := grant{name, ev.ObjectRef.APIGroup, res, ev.Verb}
		used[g]++
		if ev.ResponseStatus != nil && ev.ResponseStatus.Code == 403 {
			denied = append(denied, g.String())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("the audit log %s has no request of %s's identities", auditLog, who)
	}
	slices.Sort(denied)
	for _, d := range slices.Compact(denied) {
		t.Errorf("forbidden: %s (the rendering lacks a permission %s uses)", d, who)
	}
	var lines []string
	for g, why := range granted {
		switch {
		case used[g] > 0:
			lines = append(lines, fmt.Sprintf("used %4d  %s", used[g], g))
			if _, ok := documented[g]; ok {
				t.Logf("the docs list %s as not seen in the end-to-end test, but this run used it %d times", g, used[g])
			}
		default:
			lines = append(lines, fmt.Sprintf("unused     %s", g))
			if _, ok := documented[g]; !ok {
				t.Errorf("granted but never used, and not in the docs' table of permissions the end-to-end test does not see: | `%s` | `%s` | %s | %s |",
					g.identity, resourceName(g), g.verb, why)
			}
		}
	}
	for g := range used {
		if _, ok := granted[g]; !ok {
			t.Errorf("used but not granted by the rendering: %s", g)
		}
	}
	for g := range documented {
		if _, ok := granted[g]; !ok {
			t.Errorf("the docs list %s as not seen in the end-to-end test, but the rendering does not grant it", g)
		}
	}
	sort.Strings(lines)
	t.Logf("%d requests of %s's identities before removal (%d during it); permissions:\n%s", n, who, teardown, strings.Join(lines, "\n"))
}

func resourceName(g grant) string {
	if g.group == "" {
		return g.resource
	}
	return g.resource + "." + g.group
}

// unusedInE2E reads the table of docs/<doc> of the granted permissions the end-to-end
// test does not see used, between <!-- marker --> and <!-- end -->: rows of
// | `identity` | `resource[.group]` | verb | code path |.
func unusedInE2E(t *testing.T, doc, marker string) map[grant]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", doc))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(raw), "<!-- "+marker+" -->")
	table, _, ok2 := strings.Cut(table, "<!-- end -->")
	if !ok || !ok2 {
		t.Errorf("docs/%s has no <!-- %s --> ... <!-- end --> table", doc, marker)
		return nil
	}
	out := map[grant]string{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 4 || strings.HasPrefix(strings.TrimSpace(cells[0]), "---") || strings.TrimSpace(cells[0]) == "identity" {
			continue
		}
		unquote := func(s string) string { return strings.Trim(strings.TrimSpace(s), "`") }
		res, group, _ := strings.Cut(unquote(cells[1]), ".")
		out[grant{identity: unquote(cells[0]), group: group, resource: res, verb: strings.TrimSpace(cells[2])}] = strings.TrimSpace(cells[3])
	}
	if len(out) == 0 {
		t.Errorf("docs/%s's %s table has no rows", doc, marker)
	}
	return out
}
