package taints

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
)

func TestHasAndWithout(t *testing.T) {
	uninit := corev1.Taint{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	other := corev1.Taint{Key: "example.com/other", Effect: corev1.TaintEffectNoExecute}
	tests := []struct {
		name        string
		taints      []corev1.Taint
		has         bool
		wantWithout []corev1.Taint
	}{
		{"none", nil, false, nil},
		{"only it", []corev1.Taint{uninit}, true, nil},
		{"with another", []corev1.Taint{other, uninit}, true, []corev1.Taint{other}},
		{"another only", []corev1.Taint{other}, false, []corev1.Taint{other}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := &corev1.Node{Spec: corev1.NodeSpec{Taints: tt.taints}}
			if got := Has(node, uninit.Key); got != tt.has {
				t.Errorf("Has = %v, want %v", got, tt.has)
			}
			if got := Without(tt.taints, uninit.Key); !reflect.DeepEqual(got, tt.wantWithout) {
				t.Errorf("Without = %v, want %v", got, tt.wantWithout)
			}
		})
	}
}
