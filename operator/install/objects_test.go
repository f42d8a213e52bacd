package install

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

var update = flag.Bool("update", false, "rewrite operator/install/operator.yaml")

// TestOperatorYAMLIsCurrent: the checked-in manifests are the default rendering.
func TestOperatorYAMLIsCurrent(t *testing.T) {
	objs, err := Render(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	got, err := YAML(objs)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("operator.yaml", got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("operator.yaml")
	if err != nil || string(want) != string(got) {
		t.Fatalf("operator/install/operator.yaml is stale (%v): run make manifests", err)
	}
}

// TestLeastPrivilege: no wildcard, and none of the verbs that grant more than they
// name (escalate, bind, impersonate); the operator holds what it grants instead.
func TestLeastPrivilege(t *testing.T) {
	objs, err := Render(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if u.GetKind() != "ClusterRole" && u.GetKind() != "Role" {
			continue
		}
		var role rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
			t.Fatal(err)
		}
		for _, r := range role.Rules {
			all := slices.Concat(r.APIGroups, r.Resources, r.Verbs, r.ResourceNames)
			if slices.Contains(all, "*") {
				t.Errorf("%s %s: wildcard in %+v", u.GetKind(), u.GetName(), r)
			}
			for _, v := range []string{"escalate", "bind", "impersonate"} {
				if slices.Contains(r.Verbs, v) {
					t.Errorf("%s %s: verb %s in %+v", u.GetKind(), u.GetName(), v, r)
				}
			}
			if slices.Contains(r.Resources, "secrets") && u.GetKind() == "ClusterRole" &&
				(slices.Contains(r.Verbs, "list") || slices.Contains(r.Verbs, "watch")) {
				t.Errorf("%s %s lists or watches Secrets cluster-wide: %+v", u.GetKind(), u.GetName(), r)
			}
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	o := DefaultOptions()
	o.Namespace, o.Image, o.Replicas = "Bad_NS", "not a ref", 0
	err := o.Validate()
	if err == nil {
		t.Fatal("valid")
	}
	for _, flag := range []string{"--namespace", "--image", "--replicas"} {
		if !strings.Contains(err.Error(), flag) {
			t.Errorf("%v does not name %s", err, flag)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 3 {
		t.Errorf("%d lines, want 3: %v", n, err)
	}
}

// TestConfigNamespaceHoldsOnlySources: the config namespace may not be one that holds
// other Secrets, which an editor of the CloudControllerManager could name.
func TestConfigNamespaceHoldsOnlySources(t *testing.T) {
	for _, ns := range []string{"kube-system", "ccm-system"} {
		o := DefaultOptions()
		o.OperandNamespace, o.ConfigNamespace = "ccm-system", ns
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--config-namespace") {
			t.Errorf("--config-namespace %s: %v, want it refused", ns, err)
		}
	}
	if err := DefaultOptions().Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}
