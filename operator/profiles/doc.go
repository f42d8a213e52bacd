// Package profiles holds the operator's platform profiles as data: one YAML file per
// platform under data/ says which provider and image the cloud-controller-manager (CCM)
// runs, its defaults, how the cloud config is transformed, and which objects the
// platform adds beside the CCM (text/template files, such as a per-node DaemonSet).
//
// The CCM's own objects (RBAC, Service, PodDisruptionBudget, Deployment) always come from
// deploy/render, the renderer behind `nephele manifests`; a profile only sets its options
// and adds objects. Adding a platform is adding a file, not a code path. OpenShift's
// operator has one Go package per platform with embedded templates; here the per-platform
// knowledge is in the data, and Render is the one code path.
package profiles
