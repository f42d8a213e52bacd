package migration

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// doc builds a config document for apiVersion with the given extra YAML lines.
func doc(apiVersion string, lines ...string) string {
	return "apiVersion: " + apiVersion + "\nkind: LeaderMigrationConfiguration\n" + strings.Join(lines, "\n") + "\n"
}

var leaders = []string{
	"controllerLeaders:",
	"- name: route-controller",
	"  component: kube-controller-manager",
	"- name: service-controller",
	"  component: '*'",
}

var wantLeaders = []ControllerLeader{
	{Name: "route-controller", Component: "kube-controller-manager"},
	{Name: "service-controller", Component: "*"},
}

func TestParseVersions(t *testing.T) {
	tests := []struct {
		name string
		data string
	}{
		{"v1", doc(Group+"/v1", append([]string{"leaderName: lm"}, leaders...)...)},
		{"v1beta1", doc(Group+"/v1beta1", append([]string{"leaderName: lm", "resourceLock: leases"}, leaders...)...)},
		{"v1alpha1", doc(Group+"/v1alpha1", append([]string{"leaderName: lm", "resourceLock: leases"}, leaders...)...)},
		{"json", `{"apiVersion":"` + Group + `/v1","kind":"LeaderMigrationConfiguration","leaderName":"lm",` +
			`"controllerLeaders":[{"name":"route-controller","component":"kube-controller-manager"},{"name":"service-controller","component":"*"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.data))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if c.LeaderName != "lm" || c.ResourceLock != ResourceLockLeases || c.Kind != Kind {
				t.Errorf("got leaderName %q resourceLock %q kind %q", c.LeaderName, c.ResourceLock, c.Kind)
			}
			if !reflect.DeepEqual(c.ControllerLeaders, wantLeaders) {
				t.Errorf("controllerLeaders = %+v, want %+v", c.ControllerLeaders, wantLeaders)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	v1 := Group + "/v1"
	tests := []struct {
		name string
		data string
		want []string // substrings of the error
	}{
		{"unknown top-level field", doc(v1, "leaderName: lm", "leaderNmae: x"), []string{`unknown field "leaderNmae"`}},
		{"unknown leader field", doc(v1, "leaderName: lm", "controllerLeaders:", "- name: a", "  component: b", "  compnent: c"),
			[]string{`unknown field "compnent"`}},
		{"duplicate key", doc(v1, "leaderName: lm", "leaderName: other"), []string{`"leaderName" already set`}},
		{"wrong type", doc(v1, "leaderName: [a]"), []string{"leaderName", "cannot unmarshal array"}},
		{"not a mapping", "- a\n", []string{"not a valid LeaderMigrationConfiguration"}},
		{"empty", "", []string{"apiVersion: required", "kind: required", "leaderName: required"}},
		{"unknown group", doc("example.com/v1", "leaderName: lm"), []string{`apiVersion: "example.com/v1" is not supported`}},
		{"unknown version", doc(Group+"/v2", "leaderName: lm"), []string{`apiVersion: "` + Group + `/v2" is not supported`}},
		{"wrong kind", "apiVersion: " + v1 + "\nkind: KubeControllerManagerConfiguration\nleaderName: lm\n",
			[]string{`kind: "KubeControllerManagerConfiguration" is not supported: must be LeaderMigrationConfiguration`}},
		{"missing leaderName", doc(v1), []string{"leaderName: required"}},
		{"invalid leaderName", doc(v1, "leaderName: Not_A_Name"), []string{`leaderName: "Not_A_Name" is not a valid Lease name`}},
		{"resourceLock in v1", doc(v1, "leaderName: lm", "resourceLock: leases"), []string{"resourceLock: not a field of"}},
		{"resourceLock missing in v1beta1", doc(Group+"/v1beta1", "leaderName: lm"), []string{`resourceLock: required in v1beta1: must be "leases"`}},
		{"endpoints lock", doc(Group+"/v1alpha1", "leaderName: lm", "resourceLock: endpoints"),
			[]string{`resourceLock: "endpoints" is not supported: only "leases"`}},
		{"configmaps lock", doc(Group+"/v1beta1", "leaderName: lm", "resourceLock: configmaps"),
			[]string{`resourceLock: "configmaps" is not supported`}},
		{"empty controller name", doc(v1, "leaderName: lm", "controllerLeaders:", "- name: ''", "  component: '*'"),
			[]string{"controllerLeaders[0].name: required"}},
		{"missing component", doc(v1, "leaderName: lm", "controllerLeaders:", "- name: route-controller"),
			[]string{"controllerLeaders[0].component: required"}},
		{"duplicate controller", doc(v1, "leaderName: lm", "controllerLeaders:", "- name: a", "  component: x", "- name: b",
			"  component: x", "- name: a", "  component: y"), []string{`controllerLeaders[2].name: "a" is already listed at controllerLeaders[0]`}},
		{"several problems in one line", doc(v1, "controllerLeaders:", "- name: a"),
			[]string{"leaderName: required", "controllerLeaders[0].component: required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.data))
			if err == nil {
				t.Fatalf("Parse succeeded with %+v, want an error containing %q", c, tt.want)
			}
			var invalid *InvalidError
			if !errors.As(err, &invalid) {
				t.Errorf("error %v is %T, want *InvalidError", err, err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans lines: %q", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte(doc(Group+"/v1", append([]string{"leaderName: lm"}, leaders...)...)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(doc(Group+"/v1")), 0o600); err != nil {
		t.Fatal(err)
	}

	c, err := Load(good)
	if err != nil {
		t.Fatalf("Load(good): %v", err)
	}
	if !reflect.DeepEqual(c.ControllerLeaders, wantLeaders) {
		t.Errorf("controllerLeaders = %+v", c.ControllerLeaders)
	}

	_, err = Load(bad)
	if err == nil || !strings.HasPrefix(err.Error(), bad+": leaderName: required") {
		t.Errorf("Load(bad) = %v, want an error starting with the path and naming leaderName", err)
	}

	missing := filepath.Join(dir, "missing.yaml")
	_, err = Load(missing)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Load(missing) = %v, want a not-exist error naming the path", err)
	}
}

func TestDefault(t *testing.T) {
	c := Default()
	if c.LeaderName != "cloud-provider-extraction-migration" || c.ResourceLock != "leases" {
		t.Errorf("Default() = %+v", c)
	}
	want := []ControllerLeader{
		{Name: "route-controller", Component: "*"},
		{Name: "service-controller", Component: "*"},
		{Name: "cloud-node-lifecycle-controller", Component: "*"},
	}
	if !reflect.DeepEqual(c.ControllerLeaders, want) {
		t.Errorf("Default().ControllerLeaders = %+v, want %+v", c.ControllerLeaders, want)
	}
	// The default must itself be a valid config, and Default must not share state.
	data, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse(marshalled Default()): %v\n%s", err, data)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("round trip = %+v, want %+v", back, c)
	}
	c.ControllerLeaders[0].Name = "changed"
	if Default().ControllerLeaders[0].Name != "route-controller" {
		t.Error("Default returned shared state")
	}
}
