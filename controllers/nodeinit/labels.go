package nodeinit

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nephele-dev/nephele/cloud"
)

// refusedLabel is a label the provider asked for that the controller does not set.
type refusedLabel struct {
	key, value string
	why        string
}

// nodeLabels returns the labels to add to node for inst (only those whose value differs
// from the node's), and the provider labels refused with the reason. Zone, region and
// instance type go to the stable labels and, for tools that still read them, the beta
// ones. Provider labels may not use the kubernetes.io and k8s.io domains, which belong to
// Kubernetes, and do not overwrite a value the node already has, as upstream.
func nodeLabels(node *corev1.Node, inst *cloud.Instance) (map[string]string, []refusedLabel) {
	want := map[string]string{}
	var refused []refusedLabel
	standard := func(value string, keys ...string) {
		if value == "" {
			return
		}
		if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
			for _, k := range keys {
				refused = append(refused, refusedLabel{key: k, value: value, why: "invalid value: " + strings.Join(errs, "; ")})
			}
			return
		}
		for _, k := range keys {
			want[k] = value
		}
	}
	standard(inst.Zone, corev1.LabelTopologyZone, corev1.LabelFailureDomainBetaZone)
	standard(inst.Region, corev1.LabelTopologyRegion, corev1.LabelFailureDomainBetaRegion)
	standard(inst.InstanceType, corev1.LabelInstanceTypeStable, corev1.LabelInstanceType)

	for _, k := range slices.Sorted(maps.Keys(inst.Labels)) {
		v := inst.Labels[k]
		if why := refuseProviderLabel(k, v); why != "" {
			refused = append(refused, refusedLabel{key: k, value: v, why: why})
			continue
		}
		if cur, ok := node.Labels[k]; ok && cur != v {
			continue // the node's own value wins, as upstream
		}
		want[k] = v
	}

	for k, v := range want {
		if cur, ok := node.Labels[k]; ok && cur == v {
			delete(want, k)
		}
	}
	return want, refused
}

// refuseProviderLabel returns why a provider label cannot be set, or "".
func refuseProviderLabel(key, value string) string {
	if isKubernetesDomain(key) {
		return "the kubernetes.io and k8s.io domains are reserved for Kubernetes"
	}
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return "invalid key: " + strings.Join(errs, "; ")
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return "invalid value: " + strings.Join(errs, "; ")
	}
	return ""
}

// isKubernetesDomain reports whether a label key's prefix is kubernetes.io, k8s.io or a
// subdomain of either.
func isKubernetesDomain(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	prefix = strings.ToLower(prefix)
	for _, d := range []string{"kubernetes.io", "k8s.io"} {
		if prefix == d || strings.HasSuffix(prefix, "."+d) {
			return true
		}
	}
	return false
}

func (r refusedLabel) String() string {
	return fmt.Sprintf("%s=%s: %s", r.key, r.value, r.why)
}
