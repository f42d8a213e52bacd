// Package gce hosts a real provider's code, unchanged, on nephele: GCE's
// cloud-controller-manager provider (k8s.io/cloud-provider-gcp/providers, v0.28.2, the
// version the module proxy serves), built against GCE's own in-memory compute API
// (k8s-cloud-provider's MockGCE, with the hooks GCE's own tests install) instead of
// Google's, and served to nephele's manager through providers/upstream.
//
// It is a module of its own so that google.golang.org/api and the GCE provider stay out
// of nephele's module. NewMock builds the provider and its mock cloud; the test in this
// package runs nephele's manager with it against a real control plane. The before/after
// main of a GCE CCM moving to nephele is in docs/provider-guide.md.
package gce
