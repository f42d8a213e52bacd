package nodeinit

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nephele-dev/nephele/cloud"
)

func TestIsKubernetesDomain(t *testing.T) {
	tests := map[string]bool{
		"kubernetes.io/role":               true,
		"k8s.io/role":                      true,
		"node.kubernetes.io/instance-type": true,
		"sub.domain.k8s.io/x":              true,
		"Kubernetes.IO/x":                  true,
		"node-role.kubernetes.io/worker":   true,
		"example.com/pool":                 false,
		"notkubernetes.io/x":               false,
		"k8s.io.example.com/x":             false,
		"kubernetes.io":                    false, // no prefix: an ordinary name
		"pool":                             false,
		"example.com/kubernetes.io":        false,
	}
	for key, want := range tests {
		if got := isKubernetesDomain(key); got != want {
			t.Errorf("isKubernetesDomain(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestNodeLabels(t *testing.T) {
	full := &cloud.Instance{Zone: "zone-a", Region: "region-1", InstanceType: "m.large"}
	standard := map[string]string{
		corev1.LabelTopologyZone:            "zone-a",
		corev1.LabelFailureDomainBetaZone:   "zone-a",
		corev1.LabelTopologyRegion:          "region-1",
		corev1.LabelFailureDomainBetaRegion: "region-1",
		corev1.LabelInstanceTypeStable:      "m.large",
		corev1.LabelInstanceType:            "m.large",
	}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := maps.Clone(base)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name        string
		nodeLabels  map[string]string
		inst        *cloud.Instance
		want        map[string]string
		wantRefused []string
	}{
		{name: "stable and beta labels", inst: full, want: standard},
		{name: "empty values set nothing", inst: &cloud.Instance{Zone: "zone-a"}, want: map[string]string{
			corev1.LabelTopologyZone: "zone-a", corev1.LabelFailureDomainBetaZone: "zone-a",
		}},
		{name: "labels already right are not written", nodeLabels: standard, inst: full, want: map[string]string{}},
		{name: "a wrong zone is corrected", nodeLabels: with(standard, corev1.LabelTopologyZone, "old"), inst: full, want: map[string]string{
			corev1.LabelTopologyZone: "zone-a",
		}},
		{
			name: "provider labels: reserved domains refused, the rest applied",
			inst: &cloud.Instance{Labels: map[string]string{
				"example.com/pool":               "blue",
				"kubernetes.io/hostname":         "evil",
				"node-role.kubernetes.io/master": "",
				"team.k8s.io/owner":              "x",
				"pool":                           "a",
			}},
			want:        map[string]string{"example.com/pool": "blue", "pool": "a"},
			wantRefused: []string{"kubernetes.io/hostname", "node-role.kubernetes.io/master", "team.k8s.io/owner"},
		},
		{
			name:        "invalid provider labels refused",
			inst:        &cloud.Instance{Labels: map[string]string{"bad key!": "x", "example.com/ok": "not a valid value!"}},
			want:        map[string]string{},
			wantRefused: []string{"bad key!", "example.com/ok"},
		},
		{
			name:        "invalid zone refused for both labels",
			inst:        &cloud.Instance{Zone: "zone a/b"},
			want:        map[string]string{},
			wantRefused: []string{corev1.LabelTopologyZone, corev1.LabelFailureDomainBetaZone},
		},
		{
			name:       "a provider label does not overwrite the node's value",
			nodeLabels: map[string]string{"example.com/pool": "red"},
			inst:       &cloud.Instance{Labels: map[string]string{"example.com/pool": "blue"}},
			want:       map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: tt.nodeLabels}}
			got, refused := nodeLabels(node, tt.inst)
			if !maps.Equal(got, tt.want) {
				t.Errorf("labels = %v, want %v", got, tt.want)
			}
			var keys []string
			for _, r := range refused {
				keys = append(keys, r.key)
				if r.why == "" {
					t.Errorf("refused label %q has no reason", r.key)
				}
			}
			slices.Sort(keys)
			want := slices.Sorted(slices.Values(tt.wantRefused))
			if !slices.Equal(keys, want) {
				t.Errorf("refused = %v, want %v", keys, want)
			}
		})
	}
}
