package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// configRef is a ConfigMap or Secret a pod template mounts.
type configRef struct{ kind, name string }

// podConfigRefs lists the ConfigMaps and Secrets the pod templates of objs mount.
func podConfigRefs(objs []*unstructured.Unstructured) []configRef {
	var refs []configRef
	for _, u := range objs {
		if k := u.GetKind(); k != "Deployment" && k != "DaemonSet" {
			continue
		}
		vols, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "volumes")
		for _, v := range vols {
			vm, _ := v.(map[string]any)
			if n, ok, _ := unstructured.NestedString(vm, "configMap", "name"); ok {
				refs = append(refs, configRef{"ConfigMap", n})
			}
			if n, ok, _ := unstructured.NestedString(vm, "secret", "secretName"); ok {
				refs = append(refs, configRef{"Secret", n})
			}
		}
	}
	slices.SortFunc(refs, func(a, b configRef) int {
		if a.kind != b.kind {
			return compare(a.kind, b.kind)
		}
		return compare(a.name, b.name)
	})
	return slices.Compact(refs)
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// MissingConfigError says a ConfigMap or Secret the pods mount does not exist yet.
type MissingConfigError struct{ Kind, Namespace, Name string }

func (e *MissingConfigError) Error() string {
	return fmt.Sprintf("%s %s/%s, which the CCM's or the CSI driver's pods mount, does not exist yet", e.Kind, e.Namespace, e.Name)
}

// configHash hashes the data of every ConfigMap and Secret in refs: a change to any of
// them changes the hash, and so the pod template, and so rolls the pods.
func configHash(ctx context.Context, c client.Reader, namespace string, refs []configRef) (string, error) {
	h := sha256.New()
	for _, r := range refs {
		key := client.ObjectKey{Namespace: namespace, Name: r.name}
		var data map[string][]byte
		switch r.kind {
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := c.Get(ctx, key, &cm); err != nil {
				return "", notFoundAs(err, &MissingConfigError{r.kind, namespace, r.name})
			}
			data = map[string][]byte{}
			for k, v := range cm.Data {
				data[k] = []byte(v)
			}
			for k, v := range cm.BinaryData {
				data[k] = v
			}
		case "Secret":
			var s corev1.Secret
			if err := c.Get(ctx, key, &s); err != nil {
				return "", notFoundAs(err, &MissingConfigError{r.kind, namespace, r.name})
			}
			data = s.Data
		}
		fmt.Fprintf(h, "%s/%s\n", r.kind, r.name)
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(h, "%s=%d:", k, len(data[k]))
			h.Write(data[k])
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
