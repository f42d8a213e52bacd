// Package taints reads and edits a Node's taints by key for the cloud controllers. The
// keys themselves are k8s.io/cloud-provider/api's (TaintExternalCloudProvider,
// TaintNodeShutdown), defined once there for every cloud-controller-manager.
package taints

import corev1 "k8s.io/api/core/v1"

// Has reports whether node carries a taint with key, whatever its value and effect.
func Has(node *corev1.Node, key string) bool {
	for i := range node.Spec.Taints {
		if node.Spec.Taints[i].Key == key {
			return true
		}
	}
	return false
}

// Without returns taints without those with key; nil when none is left, which a JSON
// merge patch turns into removing the field.
func Without(taints []corev1.Taint, key string) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		if t.Key != key {
			out = append(out, t)
		}
	}
	return out
}
