package provider_test

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func nodeMeta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

func node(name, providerID string) *corev1.Node {
	return &corev1.Node{ObjectMeta: nodeMeta(name), Spec: corev1.NodeSpec{ProviderID: providerID}}
}
