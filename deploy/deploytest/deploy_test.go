package deploytest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/nephele-dev/nephele/deploy/render"
)

// The charts: the CCM's and the CSI driver's.
const (
	chartDir    = "../chart/nephele-ccm"
	csiChartDir = "../chart/nephele-csi"
)

// scenarios are the same renderings in both vocabularies: `nephele manifests` flags and
// Helm values (set on top of values.yaml), with the release namespace.
var scenarios = []struct {
	name      string
	args      []string
	values    map[string]any
	namespace string
}{
	{name: "defaults", namespace: "kube-system"},
	{
		name:      "manager credentials",
		args:      []string{"--use-service-account-credentials=false"},
		values:    map[string]any{"useServiceAccountCredentials": false},
		namespace: "kube-system",
	},
	{
		name: "service only, configmap, own namespace, monitor",
		args: []string{"--controllers=service", "--cloud-config-source=configmap", "--cloud-config-name=ccm-config",
			"--cloud-config-key=config.yaml", "--namespace=nephele-system", "--replicas=1", "--service-monitor",
			"--extra-arg=--concurrent-service-syncs=4", "--extra-arg=--v=2", "--image=registry.example.com/ccm:v1.2.3"},
		values: map[string]any{
			"controllers": []any{"service"},
			"cloudConfig": map[string]any{"source": "configmap", "name": "ccm-config", "key": "config.yaml"},
			"replicas":    1,
			"metrics":     map[string]any{"serviceMonitor": true},
			"extraArgs":   []any{"--concurrent-service-syncs=4", "--v=2"},
			"image":       "registry.example.com/ccm:v1.2.3",
		},
		namespace: "nephele-system",
	},
	{
		name: "no routes, no cloud config, no metrics",
		args: []string{"--configure-cloud-routes=false", "--cluster-cidr=", "--cloud-config-source=none",
			"--metrics-service=false", "--provider=example", "--image-pull-policy=Always"},
		values: map[string]any{
			"configureCloudRoutes": false, "clusterCIDR": "", "cloudConfig": map[string]any{"source": "none"},
			"metrics": map[string]any{"service": false}, "provider": "example", "imagePullPolicy": "Always",
		},
		namespace: "kube-system",
	},
	{
		name:      "aliases, lifecycle off, dual stack",
		args:      []string{"--controllers=*,-cloud-node-lifecycle", "--cluster-cidr=10.244.0.0/16,fd00:10:244::/48", "--cluster-name=prod"},
		values:    map[string]any{"controllers": []any{"*", "-cloud-node-lifecycle"}, "clusterCIDR": "10.244.0.0/16,fd00:10:244::/48", "clusterName": "prod"},
		namespace: "kube-system",
	},
	{
		name:      "node controllers only, manager credentials",
		args:      []string{"--controllers=cloud-node,cloud-node-lifecycle", "--use-service-account-credentials=false"},
		values:    map[string]any{"controllers": []any{"cloud-node", "cloud-node-lifecycle"}, "useServiceAccountCredentials": false},
		namespace: "kube-system",
	},
	{
		name: "route and lifecycle, resources",
		args: []string{"--controllers=route,cloud-node-lifecycle", "--cpu-request=250m", "--memory-request=256Mi", "--memory-limit=1Gi"},
		values: map[string]any{
			"controllers": []any{"route", "cloud-node-lifecycle"},
			"resources":   map[string]any{"cpuRequest": "250m", "memoryRequest": "256Mi", "memoryLimit": "1Gi"},
		},
		namespace: "kube-system",
	},
	{
		// The only controller named is off without cloud routes: no controller runs,
		// so no controller service account and no rule naming none.
		name:      "no controller",
		args:      []string{"--controllers=route", "--configure-cloud-routes=false"},
		values:    map[string]any{"controllers": []any{"route"}, "configureCloudRoutes": false},
		namespace: "kube-system",
	},
}

// TestChartEqualsManifests renders the chart with Helm's engine and compares its
// objects, one by one, with `nephele manifests`' for the same settings.
func TestChartEqualsManifests(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			o := render.DefaultOptions()
			fs := pflag.NewFlagSet("manifests", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(append([]string{"--namespace=" + sc.namespace}, sc.args...)); err != nil {
				t.Fatal(err)
			}
			objs, err := render.Render(o)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]map[string]any{}
			for _, u := range objs {
				want[key(u.Object)] = normalize(t, u.Object)
			}
			got, err := renderChart(sc.values, sc.namespace)
			if err != nil {
				t.Fatal(err)
			}
			compare(t, "chart", got, "nephele manifests", want)
		})
	}
}

// TestChartRefuses: the chart fails on what the renderer refuses, where a template can
// tell.
func TestChartRefuses(t *testing.T) {
	tests := []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"controllers": []any{"*", "-ipam"}}, `controllers: unknown controller "ipam"`},
		{map[string]any{"cloudConfig": map[string]any{"source": "vault"}}, `cloudConfig.source: "vault"`},
		{map[string]any{"metrics": map[string]any{"service": false, "serviceMonitor": true}}, "metrics.serviceMonitor needs metrics.service"},
	}
	for _, tt := range tests {
		_, err := renderChart(tt.values, "kube-system")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("values %v: error %v, want %q", tt.values, err, tt.want)
		}
	}
}

// TestKustomizeEqualsPlainYAML builds deploy/kustomize with kustomize's API and compares
// its objects with deploy/cloud-controller-manager.yaml's.
func TestKustomizeEqualsPlainYAML(t *testing.T) {
	for _, tc := range []struct{ base, plain string }{
		{"../kustomize", "../cloud-controller-manager.yaml"},
		{"../csi-kustomize", "../csi-driver.yaml"},
	} {
		t.Run(tc.base, func(t *testing.T) {
			k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
			resources, err := k.Run(filesys.MakeFsOnDisk(), tc.base)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]map[string]any{}
			for _, r := range resources.Resources() {
				m, err := r.Map()
				if err != nil {
					t.Fatal(err)
				}
				got[key(m)] = normalize(t, m)
			}
			data, err := os.ReadFile(tc.plain)
			if err != nil {
				t.Fatal(err)
			}
			want, err := decodeAll(data)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) < 10 {
				t.Fatalf("the plain YAML holds %d objects", len(want))
			}
			compare(t, "kustomize build "+tc.base, got, tc.plain, want)
		})
	}
}

// csiScenarios are the CSI driver's renderings in both vocabularies: `nephele manifests
// csi` flags and the nephele-csi chart's values, with the release namespace.
var csiScenarios = []struct {
	name      string
	args      []string
	values    map[string]any
	namespace string
}{
	{name: "defaults", namespace: "kube-system"},
	{
		name: "everything set",
		args: []string{"--driver-name=disks.example.com", "--driver-image=registry.example.com/csi@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "--provisioner-image=registry.example.com/p:v1",
			"--attacher-image=registry.example.com/a:v1", "--resizer-image=registry.example.com/r:v1", "--image-pull-policy=Always", "--controller-replicas=2",
			"--max-volumes-per-node=0", "--device-dir=/srv/disks", "--device-dir=/var/lib/cloud", "--storage-class=false"},
		values: map[string]any{
			"driverName": "disks.example.com",
			"images": map[string]any{"driver": "registry.example.com/csi@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "provisioner": "registry.example.com/p:v1",
				"attacher": "registry.example.com/a:v1", "resizer": "registry.example.com/r:v1"},
			"imagePullPolicy": "Always", "controllerReplicas": 2, "maxVolumesPerNode": 0,
			"deviceDirs": []any{"/srv/disks", "/var/lib/cloud"}, "storageClass": false,
		},
		namespace: "storage-system",
	},
}

// TestCSIChartEqualsManifests renders the nephele-csi chart with Helm's engine and
// compares its objects with `nephele manifests csi`'s for the same settings.
func TestCSIChartEqualsManifests(t *testing.T) {
	for _, sc := range csiScenarios {
		t.Run(sc.name, func(t *testing.T) {
			o := render.DefaultCSIOptions()
			fs := pflag.NewFlagSet("csi", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(append([]string{"--namespace=" + sc.namespace}, sc.args...)); err != nil {
				t.Fatal(err)
			}
			objs, err := render.RenderCSI(o)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]map[string]any{}
			for _, u := range objs {
				want[key(u.Object)] = normalize(t, u.Object)
			}
			got, err := renderChartAt(csiChartDir, nil, sc.values, sc.namespace)
			if err != nil {
				t.Fatal(err)
			}
			compare(t, "chart", got, "nephele manifests csi", want)
		})
	}
}

// renderChart renders the chart for an install into namespace with values on top of
// values.yaml, and decodes every object. Helm's lookup finds nothing, as in
// `helm template`.
func renderChart(values map[string]any, namespace string) (map[string]map[string]any, error) {
	return renderChartIn(nil, values, namespace)
}

// renderChartIn renders the CCM's chart (renderChartAt).
func renderChartIn(clients engine.ClientProvider, values map[string]any, namespace string) (map[string]map[string]any, error) {
	return renderChartAt(chartDir, clients, values, namespace)
}

// renderChartAt renders the chart in dir with lookup answered by clients (nil: lookup
// finds nothing), as `helm install` against a cluster renders.
func renderChartAt(dir string, clients engine.ClientProvider, values map[string]any, namespace string) (map[string]map[string]any, error) {
	chart, err := loader.Load(dir)
	if err != nil {
		return nil, err
	}
	if values == nil {
		values = map[string]any{}
	}
	vals, err := chartutil.ToRenderValues(chart, values,
		chartutil.ReleaseOptions{Name: filepath.Base(dir), Namespace: namespace, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	var files map[string]string
	if clients == nil {
		files, err = engine.Render(chart, vals)
	} else {
		files, err = engine.RenderWithClientProvider(chart, vals, clients)
	}
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]any{}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		objs, err := decodeAll([]byte(files[name]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for k, o := range objs {
			if _, dup := out[k]; dup {
				return nil, fmt.Errorf("%s: %s rendered twice", name, k)
			}
			out[k] = o
		}
	}
	return out, nil
}

// decodeAll decodes a multi-document YAML stream into objects by key, skipping empty
// documents.
func decodeAll(data []byte) (map[string]map[string]any, error) {
	out := map[string]map[string]any{}
	r := yamlutil.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%w in:\n%s", err, doc)
		}
		var m map[string]any
		if err := json.Unmarshal(js, &m); err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		k := key(m)
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s twice", k)
		}
		out[k] = m
	}
}

// key names an object: kind namespace/name.
func key(m map[string]any) string {
	meta, _ := m["metadata"].(map[string]any)
	return fmt.Sprintf("%v %v/%v", m["kind"], meta["namespace"], meta["name"])
}

// normalize turns an object into the JSON-decoded form (numbers as float64).
func normalize(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// compare reports every object one side has and the other lacks, and every object that
// differs, with both as YAML.
func compare(t *testing.T, gotName string, got map[string]map[string]any, wantName string, want map[string]map[string]any) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s lacks %s, which %s renders", gotName, k, wantName)
			continue
		}
		gy, _ := yaml.Marshal(g)
		wy, _ := yaml.Marshal(w)
		if !bytes.Equal(gy, wy) {
			t.Errorf("%s differs:\n--- %s\n%s--- %s\n%s", k, gotName, gy, wantName, wy)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s renders %s, which %s does not", gotName, k, wantName)
		}
	}
	if len(want) == 0 {
		t.Errorf("%s rendered nothing", wantName)
	}
}
