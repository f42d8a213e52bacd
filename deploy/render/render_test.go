package render

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenCases are renderings kept as golden files: the default and flag combinations
// that change the objects' shape.
var goldenCases = []struct {
	name string
	args []string
}{
	{"default", nil},
	{"manager-credentials", []string{"--use-service-account-credentials=false"}},
	{"service-only-configmap", []string{"--controllers=service", "--cloud-config-source=configmap", "--cloud-config-name=ccm-config",
		"--cloud-config-key=config.yaml", "--namespace=nephele-system", "--replicas=1", "--service-monitor",
		"--extra-arg=--concurrent-service-syncs=4", "--extra-arg=--v=2", "--image=registry.example.com/ccm:v1.2.3"}},
	{"no-routes-no-config", []string{"--configure-cloud-routes=false", "--cluster-cidr=", "--cloud-config-source=none",
		"--metrics-service=false", "--provider=example", "--image-pull-policy=Always"}},
}

// parse returns the options args give on top of the defaults, as `nephele manifests`
// parses them.
func parse(t *testing.T, args []string) Options {
	t.Helper()
	o := DefaultOptions()
	fs := pflag.NewFlagSet("manifests", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Render(parse(t, tc.args))
			if err != nil {
				t.Fatal(err)
			}
			got, err := YAML(objs)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.name+".yaml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./deploy/render -update writes it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("rendering differs from %s (go test ./deploy/render -update rewrites it after a deliberate change):\n%s", path, lineDiff(string(want), string(got)))
			}
		})
	}
}

// lineDiff shows the first differing lines of two texts.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl
		}
	}
	return ""
}

// TestDeployIsCurrent: deploy/ holds the default rendering, as YAML and as a kustomize
// base, and docs/deploy.md its permission tables.
func TestDeployIsCurrent(t *testing.T) {
	const fix = "deploy/ is stale: run `make manifests` and commit the result"
	for _, tc := range []struct {
		name, plain, kustomize string
		render                 func() ([]*unstructured.Unstructured, error)
	}{
		{"the CCM", "cloud-controller-manager.yaml", "kustomize", func() ([]*unstructured.Unstructured, error) { return Render(DefaultOptions()) }},
		{"the CSI driver", "csi-driver.yaml", "csi-kustomize", func() ([]*unstructured.Unstructured, error) { return RenderCSI(DefaultCSIOptions()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := tc.render()
			if err != nil {
				t.Fatal(err)
			}
			want, err := YAML(objs)
			if err != nil {
				t.Fatal(err)
			}
			plain := filepath.Join("..", tc.plain)
			files, err := KustomizeBase(objs)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join("..", tc.kustomize)
			if *update {
				writeDeploy(t, plain, want, dir, files)
			}
			got, err := os.ReadFile(plain)
			if err != nil || string(got) != string(want) {
				t.Errorf("deploy/%s differs from `nephele manifests` (%v): %s\n%s", tc.plain, err, fix, lineDiff(string(want), string(got)))
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatalf("%v: %s", err, fix)
			}
			if len(entries) != len(files) {
				t.Errorf("deploy/%s holds %d files, the base has %d: %s", tc.kustomize, len(entries), len(files), fix)
			}
			for name, data := range files {
				got, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil || string(got) != string(data) {
					t.Errorf("deploy/%s/%s differs (%v): %s", tc.kustomize, name, err, fix)
				}
			}
		})
	}
}

// writeDeploy writes the plain YAML and the kustomize base, removing files of an earlier
// base the new one does not list.
func writeDeploy(t *testing.T, plain string, yaml []byte, dir string, files map[string][]byte) {
	t.Helper()
	if err := os.WriteFile(plain, yaml, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, keep := files[e.Name()]; !keep {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDocsListEveryPermission: docs/deploy.md shows the permission tables of the
// default rendering and of --use-service-account-credentials=false, as rendered.
func TestDocsListEveryPermission(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{nil, {"--use-service-account-credentials=false"}} {
		table, err := PermissionsTable(parse(t, args))
		if err != nil {
			t.Fatal(err)
		}
		marker := "<!-- permissions" + strings.Join(args, " ") + " -->\n"
		if *update {
			doc = replaceSection(t, doc, marker, table)
			if err := os.WriteFile(filepath.Join("..", "..", "docs", "deploy.md"), doc, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if !strings.Contains(string(doc), marker+table+endMarker) {
			t.Errorf("docs/deploy.md lacks the permissions table of `nephele manifests --permissions %s`: run `make manifests`",
				strings.Join(args, " "))
		}
	}
}

const endMarker = "<!-- end -->\n"

// replaceSection replaces what stands between marker and endMarker in doc with text.
func replaceSection(t *testing.T, doc []byte, marker, text string) []byte {
	t.Helper()
	s := string(doc)
	i := strings.Index(s, marker)
	if i < 0 {
		t.Fatalf("docs/deploy.md has no %q", marker)
	}
	j := strings.Index(s[i:], endMarker)
	if j < 0 {
		t.Fatalf("docs/deploy.md has no %q after %q", endMarker, marker)
	}
	return []byte(s[:i] + marker + text + s[i+j:])
}

func kinds(objs []*unstructured.Unstructured) map[string][]string {
	out := map[string][]string{}
	for _, o := range objs {
		out[o.GetKind()] = append(out[o.GetKind()], o.GetName())
	}
	return out
}
