// Package render renders everything a cluster needs to run a nephele
// cloud-controller-manager in it, from Options: the identities and their RBAC, the
// Deployment, its PodDisruptionBudget, a metrics Service and, when asked, a
// Prometheus ServiceMonitor. `nephele manifests` is its command line; deploy/ holds its
// default rendering as plain YAML and as a kustomize base, and the Helm chart under
// deploy/chart is tested to render the same objects for the same values.
//
// Every RBAC rule is derived from what the manager and the controllers call, each with
// the code path that needs it: a controller's come from its manager.ControllerSpec (RBAC
// and Informers, declared beside the controller's code; Options.ControllerSpecs for a
// provider's own), the manager's are written here. They are scoped to the controllers
// that --controllers enables, and name no wildcard. Under --use-service-account-credentials
// the manager's own identity keeps only what it does itself (the shared informers,
// Events, the Lease, delegated authentication, and requesting the controllers' tokens),
// and each controller's service account, rendered in kube-system so that the manager
// never creates one, gets only its controller's writes.
//
// The Deployment is shaped to run before a CNI exists and to survive what bit other
// providers' manifests: host networking, tolerations for every bootstrap taint
// (including Cluster API's), no nodeSelector on the retired master label, and a rolling
// update that never starts a new host-network pod beside an old one (docs/deploy.md).
package render
