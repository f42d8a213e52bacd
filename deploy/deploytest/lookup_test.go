package deploytest

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// cluster is a Helm ClientProvider over a fake cluster that holds only ServiceAccounts:
// what the chart's lookup sees during `helm install` and `helm upgrade`.
type cluster struct {
	client *dynamicfake.FakeDynamicClient
}

var serviceAccounts = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}

func (c cluster) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	if apiVersion != "v1" || kind != "ServiceAccount" {
		return nil, false, fmt.Errorf("the fake cluster has no %s %s", apiVersion, kind)
	}
	return c.client.Resource(serviceAccounts), true, nil
}

// serviceAccount is kube-system/name, with annotations.
func serviceAccount(name string, annotations map[string]string) runtime.Object {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ServiceAccount")
	u.SetNamespace("kube-system")
	u.SetName(name)
	u.SetAnnotations(annotations)
	return u
}

// TestChartLeavesOutOthersServiceAccounts: a controller service account that exists
// and is not the release's (kube-controller-manager made kube-system/node-controller
// under its own --use-service-account-credentials) is not rendered, so that
// `helm install` does not fail on it and `helm uninstall` leaves it; one the release
// owns is rendered, so that `helm upgrade` keeps it.
func TestChartLeavesOutOthersServiceAccounts(t *testing.T) {
	owned := map[string]string{"meta.helm.sh/release-name": "nephele-ccm", "meta.helm.sh/release-namespace": "kube-system"}
	otherRelease := map[string]string{"meta.helm.sh/release-name": "other", "meta.helm.sh/release-namespace": "kube-system"}
	tests := []struct {
		name     string
		existing []runtime.Object
		want     []string
	}{
		{"none exists", nil, []string{"node-controller", "route-controller", "service-controller"}},
		{"kube-controller-manager's node-controller", []runtime.Object{serviceAccount("node-controller", nil)},
			[]string{"route-controller", "service-controller"}},
		{"another release's", []runtime.Object{serviceAccount("service-controller", otherRelease)},
			[]string{"node-controller", "route-controller"}},
		{"this release's, on upgrade", []runtime.Object{serviceAccount("node-controller", owned),
			serviceAccount("service-controller", owned), serviceAccount("route-controller", owned)},
			[]string{"node-controller", "route-controller", "service-controller"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{serviceAccounts: "ServiceAccountList"}, tt.existing...)
			objs, err := renderChartIn(cluster{client}, nil, "kube-system")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				meta, _ := o["metadata"].(map[string]any)
				if o["kind"] == "ServiceAccount" && meta["namespace"] == "kube-system" && meta["name"] != "cloud-controller-manager" {
					got = append(got, fmt.Sprint(meta["name"]))
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("controller ServiceAccounts %v, want %v", got, tt.want)
			}
			// The RBAC does not depend on it: the bindings still name every account.
			if _, ok := objs["ClusterRoleBinding <nil>/system:controller:cloud-node-controller"]; !ok {
				t.Errorf("no binding for node-controller: %v", slices.Sorted(maps.Keys(objs)))
			}
		})
	}
}
