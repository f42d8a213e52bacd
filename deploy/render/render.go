package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Render validates o and returns the objects it describes, in the order `kubectl apply`
// should create them: the ServiceAccounts, the RBAC that names them, then the metrics
// Service, the PodDisruptionBudget, the Deployment and the ServiceMonitor. The same
// options give the same objects.
func Render(o Options) ([]*unstructured.Unstructured, error) {
	r, err := o.resolve()
	if err != nil {
		return nil, err
	}
	typed := r.rbacObjects()
	if r.MetricsService {
		typed = append(typed, r.metricsService())
	}
	typed = append(typed, r.podDisruptionBudget(), r.deployment())
	if r.ServiceMonitor {
		typed = append(typed, r.serviceMonitor())
	}
	return toUnstructured(typed)
}

// toUnstructured converts each typed object (ToUnstructured), in order.
func toUnstructured(typed []any) ([]*unstructured.Unstructured, error) {
	objs := make([]*unstructured.Unstructured, 0, len(typed))
	for _, t := range typed {
		u, err := ToUnstructured(t)
		if err != nil {
			return nil, err
		}
		objs = append(objs, u)
	}
	return objs, nil
}

// ToUnstructured converts a typed object through its JSON, dropping the fields a typed
// object cannot leave out (creationTimestamp: null, status), so that the YAML holds only
// what was set. operator/install renders the operator's own objects with it.
func ToUnstructured(obj any) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", obj, err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decode %T: %w", obj, err)
	}
	prune(m)
	delete(m, "status") // the API server's to write

	return &unstructured.Unstructured{Object: m}, nil
}

// prune removes null values and, in metadata, empty maps, recursively.
func prune(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if x == nil {
				delete(v, k)
				continue
			}
			prune(x)
			if k == "metadata" {
				if mm, ok := x.(map[string]any); ok && len(mm) == 0 {
					delete(v, k)
				}
			}
		}
	case []any:
		for _, x := range v {
			prune(x)
		}
	}
}

// header opens every rendering: what made it and how to make it again.
const header = "# Rendered by `nephele manifests`; regenerate, do not edit (docs/deploy.md).\n"

// IsRendered reports whether data is a file this package wrote (it opens with the
// rendering's header).
func IsRendered(data []byte) bool { return bytes.HasPrefix(data, []byte(header)) }

// YAML writes objs as one multi-document YAML stream, each document with sorted keys.
func YAML(objs []*unstructured.Unstructured) ([]byte, error) { return Stream(header, objs) }

// Stream writes objs as one multi-document YAML stream after header (a comment saying
// what made it), each document with sorted keys.
func Stream(header string, objs []*unstructured.Unstructured) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(header)
	for _, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		buf.WriteString("---\n")
		buf.Write(data)
	}
	return buf.Bytes(), nil
}

// KustomizeBase returns the files of a kustomize base holding objs: one file per kind
// group (rbac.yaml, deployment.yaml, service.yaml, monitoring.yaml) and a
// kustomization.yaml listing them, by file name.
func KustomizeBase(objs []*unstructured.Unstructured) (map[string][]byte, error) {
	groups := map[string][]*unstructured.Unstructured{}
	var order []string
	for _, o := range objs {
		file := kustomizeFile(o.GetKind())
		if _, seen := groups[file]; !seen {
			order = append(order, file)
		}
		groups[file] = append(groups[file], o)
	}
	files := map[string][]byte{}
	var k strings.Builder
	k.WriteString(header)
	k.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
	for _, f := range order {
		data, err := YAML(groups[f])
		if err != nil {
			return nil, err
		}
		files[f] = data
		k.WriteString("- " + f + "\n")
	}
	files["kustomization.yaml"] = []byte(k.String())
	return files, nil
}

func kustomizeFile(kind string) string {
	switch kind {
	case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		return "rbac.yaml"
	case "Service":
		return "service.yaml"
	case "ServiceMonitor":
		return "monitoring.yaml"
	default:
		return "deployment.yaml"
	}
}
