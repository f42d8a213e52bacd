// Package e2e is nephele's build of upstream Kubernetes' end-to-end suite
// (k8s.io/kubernetes/test/e2e at the version hack/tools pins): the same test packages
// upstream's e2e.test links, run by the same RunE2ETests, plus an e2e framework provider
// for nephele's local cloud (provider "nephele", Provider) whose DeleteNode terminates
// the node's instance through the local cloud's API, so the [Feature:CloudProvider] node
// tests can run.
//
// It is a module of its own (hack/tools/e2e) because it imports k8s.io/kubernetes, which
// nephele's root module never does. Its requirements select the same versions as
// hack/tools (k8s.io/kubernetes v1.36.3 with the same staging replaces), so that a build
// with -trimpath shares every compiled package with kube-apiserver, kubelet and kubectl.
// `make e2e-bins` builds it with `go test -c` into bin/e2e.test, and the ginkgo v2 CLI
// (tools.go) from the same module graph into bin/ginkgo.
//
// Upstream's "Nodes should be deleted on API server if it doesn't exist in the cloud
// provider" test skips itself unless the provider is named aws or gce (test/e2e/cloud/
// nodes.go), although upstream's aws and gce e2e providers are null providers in v1.36
// that cannot delete a node. With --nephele-cloud-config, this binary puts nephele's
// provider in their place when --provider names one of them: the test then runs, and its
// DeleteNode really terminates the instance. Nothing else in the suite changes with the
// name but a gcloud lookup in the suite's setup, which fails (no gcloud here) and is only
// logged.
package e2e
