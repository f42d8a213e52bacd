// Package deploytest checks that deploy/'s three forms are one: the Helm chart
// (deploy/chart/nephele-ccm), rendered with Helm's Go library, gives exactly the objects
// `nephele manifests` (package deploy/render) gives for the same values, and the kustomize
// base (deploy/kustomize), built with kustomize's Go API, gives the objects of the plain
// YAML (deploy/cloud-controller-manager.yaml). Where the chart departs on purpose (it
// leaves out a controller service account that exists and is not the release's, which
// Helm would refuse to install over), a fake cluster answers Helm's lookup.
//
// It is a module of its own so that Helm and kustomize, and what they pull in, stay out
// of nephele's module (design.md: the core module stays light). `make test` runs it.
package deploytest
