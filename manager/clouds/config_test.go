package clouds

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const header = "apiVersion: nephele.dev/v1alpha1\nkind: CloudsConfiguration\n"

// twoClouds is a valid file's clouds list; cases edit it.
const twoClouds = `clouds:
- name: east
  provider: local
  cloudConfig: /etc/east.yaml
  loadBalancerClass: nephele.dev/east
  default: true
- name: west
  provider: local
  cloudConfig: /etc/west.yaml
  loadBalancerClass: nephele.dev/west
  platforms: [west]
`

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		// wantErr lists substrings of the error; empty means the file is valid.
		wantErr []string
	}{
		{name: "two clouds", yaml: header + twoClouds},
		{name: "no apiVersion", yaml: "kind: CloudsConfiguration\n" + twoClouds, wantErr: []string{"apiVersion: required: use nephele.dev/v1alpha1"}},
		{name: "other apiVersion", yaml: "apiVersion: v1\nkind: CloudsConfiguration\n" + twoClouds, wantErr: []string{`apiVersion: "v1" is not supported`}},
		{name: "other kind", yaml: "apiVersion: nephele.dev/v1alpha1\nkind: Clouds\n" + twoClouds, wantErr: []string{`kind: "Clouds" is not supported: must be CloudsConfiguration`}},
		{name: "no clouds", yaml: header, wantErr: []string{"clouds: required: at least one cloud"}},
		{name: "unknown field", yaml: header + strings.Replace(twoClouds, "default: true", "default: true\n  region: x", 1), wantErr: []string{`unknown field "region"`}},
		{name: "duplicate field", yaml: header + strings.Replace(twoClouds, "provider: local\n  cloudConfig: /etc/east.yaml", "provider: local\n  provider: other\n  cloudConfig: /etc/east.yaml", 1), wantErr: []string{"provider"}},
		{name: "not YAML", yaml: "clouds: [\n", wantErr: []string{"not a valid clouds config"}},
		{name: "name missing", yaml: header + strings.Replace(twoClouds, "- name: west\n", "- name: \"\"\n", 1), wantErr: []string{"clouds[1].name: required"}},
		{name: "name not a label", yaml: header + strings.Replace(twoClouds, "name: west", "name: West_1", 1), wantErr: []string{`clouds[1] (West_1).name: "West_1"`}},
		{name: "name twice", yaml: header + strings.Replace(twoClouds, "name: west", "name: east", 1), wantErr: []string{`clouds[1] (east).name: "east" is also clouds[0]'s`}},
		{name: "no provider", yaml: header + strings.Replace(twoClouds, "  provider: local\n  cloudConfig: /etc/west.yaml", "  cloudConfig: /etc/west.yaml", 1), wantErr: []string{"clouds[1] (west).provider: required"}},
		{name: "no credentials", yaml: header + strings.Replace(twoClouds, "  cloudConfig: /etc/west.yaml\n", "", 1), wantErr: []string{"clouds[1] (west).cloudConfig: required: the provider's configuration, with this cloud's own credentials"}},
		{name: "one config for two clouds", yaml: header + strings.Replace(twoClouds, "/etc/west.yaml", "/etc/east.yaml", 1), wantErr: []string{"clouds[1] (west).cloudConfig: /etc/east.yaml is also clouds[0]'s"}},
		{name: "one config for two clouds, spelt otherwise", yaml: header + strings.Replace(twoClouds, "/etc/west.yaml", "/etc/./east.yaml", 1), wantErr: []string{"clouds[1] (west).cloudConfig: /etc/./east.yaml is also clouds[0]'s"}},
		{name: "no class", yaml: header + strings.Replace(twoClouds, "  loadBalancerClass: nephele.dev/west\n", "", 1), wantErr: []string{"clouds[1] (west).loadBalancerClass: required"}},
		{name: "class twice", yaml: header + strings.Replace(twoClouds, "nephele.dev/west", "nephele.dev/east", 1), wantErr: []string{`clouds[1] (west).loadBalancerClass: "nephele.dev/east" is also clouds[0]'s`}},
		{name: "class not a qualified name", yaml: header + strings.Replace(twoClouds, "nephele.dev/west", "a b", 1), wantErr: []string{`clouds[1] (west).loadBalancerClass: "a b": must be a qualified name`}},
		{name: "every node", yaml: header + strings.Replace(twoClouds, "[west]", `["*"]`, 1), wantErr: []string{`clouds[1] (west).platforms: "*": a cloud of several cannot own every node`}},
		{name: "bad platform", yaml: header + strings.Replace(twoClouds, "[west]", `["a://"]`, 1), wantErr: []string{"clouds[1] (west).platforms: platform"}},
		{name: "one scheme, two clouds", yaml: header + strings.Replace(twoClouds, "  default: true\n", "  default: true\n  platforms: [west]\n", 1), wantErr: []string{`clouds[1] (west).platforms: "west" is also clouds[0]'s`}},
		{name: "no default", yaml: header + strings.Replace(twoClouds, "  default: true\n", "", 1), wantErr: []string{"clouds: no cloud is the default"}},
		{name: "two defaults", yaml: header + strings.Replace(twoClouds, "platforms: [west]", "platforms: [west]\n  default: true", 1), wantErr: []string{"clouds: clouds[0] (east), clouds[1] (west) are all default: exactly one may be"}},
		{name: "every problem at once", yaml: "clouds:\n- name: a\n- name: a\n", wantErr: []string{"apiVersion: required", "kind: required", "clouds[0] (a).provider", "clouds[1] (a).name", "cloudConfig: required", "loadBalancerClass: required", "no cloud is the default"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.yaml))
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if len(f.Clouds) != 2 || !f.Clouds[0].Default || f.Clouds[1].Platforms[0] != "west" {
					t.Errorf("Parse = %+v", f)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse succeeded, want an error containing %q", tt.wantErr)
			}
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Errorf("error %v is a %T, want *InvalidError", err, err)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	east := write("east.yaml", "endpoint: http://127.0.0.1:1\n")
	west := write("west.yaml", "endpoint: http://127.0.0.1:2\n")
	file := func(eastPath string) string {
		return write("clouds.yaml", header+strings.NewReplacer("/etc/east.yaml", eastPath, "/etc/west.yaml", west).Replace(twoClouds))
	}

	got, err := Load(file(east))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(got) != 2 || got[0].Name != "east" || string(got[0].Config) != "endpoint: http://127.0.0.1:1\n" || string(got[1].Config) != "endpoint: http://127.0.0.1:2\n" {
		t.Errorf("Load = %+v", got)
	}

	missing := filepath.Join(dir, "missing.yaml")
	if _, err := Load(file(missing)); err == nil || !strings.Contains(err.Error(), "clouds[0] (east).cloudConfig: ") || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("Load with a missing cloud config: %v", err)
	}
	if _, err := Load(file("/dev/zero")); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Load with a device as cloud config: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "none")); err == nil {
		t.Error("Load of a missing file succeeded")
	}
}

func TestMarshalRoundTrips(t *testing.T) {
	f := File{APIVersion: APIVersion, Kind: Kind, Clouds: []Cloud{
		{Name: "a", Provider: "local", CloudConfig: "/a", LoadBalancerClass: "x.dev/a", Default: true},
		{Name: "b", Provider: "local", CloudConfig: "/b", LoadBalancerClass: "x.dev/b", Platforms: []string{"b"}},
	}}
	data, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse(Marshal()): %v\n%s", err, data)
	}
	if back.Clouds[1].Platforms[0] != "b" || !back.Clouds[0].Default || back.Clouds[1].CloudConfig != "/b" {
		t.Errorf("round trip = %+v", back)
	}
}
