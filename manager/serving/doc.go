// Package serving is the cloud-controller-manager's secure HTTPS endpoint (--secure-port):
// the health endpoints /healthz, /livez and /readyz (open to anyone, with the upstream
// ?verbose, ?exclude and /<endpoint>/<check> conventions), and /metrics and
// /debug/pprof/* behind delegated authentication and authorization: a bearer token is
// checked by the kube-apiserver with a TokenReview and the request is authorized with a
// SubjectAccessReview, both cached briefly so that a scraper does not cost two API
// calls per scrape.
//
// The manager builds a Server with New (which binds the port so a conflict is reported
// at start), adds health checks at any time, including after Serve has started, and
// runs Serve until its context is done.
package serving
