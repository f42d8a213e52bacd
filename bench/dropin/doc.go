// Package dropin holds the tests that hold nephele's cloud-controller-manager to
// upstream's command line: every flag of k8s.io/cloud-provider's
// cloud-controller-manager, derived from upstream's own code, must be one nephele's
// command knows (accepted with upstream's meaning, or refused at start with a reason).
// It lives in the bench module because that module may import upstream's CCM code, which
// nephele's own module does not.
package dropin
