package serving

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Check is one named health check.
type Check struct {
	// Name identifies the check in verbose output, in ?exclude=<Name> and in
	// /<endpoint>/<Name>. It must be non-empty, must not contain "/" and must be unique
	// within a Server; "ping" is taken by the built-in check.
	Name string
	// Fn returns nil when healthy and an error saying why not. It runs on every request
	// to an endpoint that includes it, so it must be cheap and honour the request's
	// context. Its error text is shown to anyone who can reach the port, so it must not
	// carry secrets.
	Fn func(*http.Request) error
}

// pingCheck always succeeds: it proves the server answers. Every endpoint has it, as
// upstream's do.
var pingCheck = Check{Name: "ping", Fn: func(*http.Request) error { return nil }}

// Names of the health endpoints; they are also the words in "<endpoint> check passed".
const (
	endpointHealthz = "healthz"
	endpointLivez   = "livez"
	endpointReadyz  = "readyz"
)

// healthEntry is a registered check and the endpoints it belongs to. /healthz has all.
type healthEntry struct {
	check       Check
	live, ready bool
}

// healthChecks is the set of registered checks; it grows while the server runs.
type healthChecks struct {
	mu      sync.RWMutex
	entries []healthEntry
}

func (h *healthChecks) add(live, ready bool, checks []Check) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{pingCheck.Name: true}
	for _, e := range h.entries {
		seen[e.check.Name] = true
	}
	var errs []error
	for _, c := range checks {
		switch {
		case c.Name == "":
			errs = append(errs, errors.New("health check with an empty name"))
		case strings.Contains(c.Name, "/"):
			errs = append(errs, fmt.Errorf("health check %q: name must not contain \"/\"", c.Name))
		case c.Fn == nil:
			errs = append(errs, fmt.Errorf("health check %q: no check function", c.Name))
		case seen[c.Name]:
			errs = append(errs, fmt.Errorf("health check %q: name already registered", c.Name))
		}
		seen[c.Name] = true
	}
	if len(errs) > 0 {
		return fmt.Errorf("adding health checks: %w", errors.Join(errs...))
	}
	for _, c := range checks {
		h.entries = append(h.entries, healthEntry{check: c, live: live, ready: ready})
	}
	return nil
}

// snapshot returns the checks of one endpoint in registration order, ping first.
func (h *healthChecks) snapshot(endpoint string) []Check {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]Check, 0, len(h.entries)+1)
	out = append(out, pingCheck)
	for _, e := range h.entries {
		if endpoint == endpointHealthz || (endpoint == endpointLivez && e.live) || (endpoint == endpointReadyz && e.ready) {
			out = append(out, e.check)
		}
	}
	return out
}

// AddLivezChecks registers liveness checks: they are served on /livez and /healthz.
// It may be called at any time, also while Serve runs. It adds all of checks or, when
// one is invalid or its name is taken, none and returns an error naming each problem.
func (s *Server) AddLivezChecks(checks ...Check) error {
	return s.health.add(true, false, checks)
}

// AddReadyzChecks registers readiness checks: they are served on /readyz and /healthz.
// It may be called at any time, also while Serve runs, and adds all of checks or none
// as AddLivezChecks does.
func (s *Server) AddReadyzChecks(checks ...Check) error {
	return s.health.add(false, true, checks)
}

// AddHealthChecks registers checks served on all of /livez, /readyz and /healthz, for
// the few that matter to both liveness and readiness. It adds all of checks or none as
// AddLivezChecks does.
func (s *Server) AddHealthChecks(checks ...Check) error {
	return s.health.add(true, true, checks)
}

// healthHandler serves /<endpoint> with every check of the endpoint.
func (s *Server) healthHandler(endpoint string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		query := r.URL.Query()
		excluded := map[string]bool{}
		for _, name := range query["exclude"] {
			excluded[name] = true
		}
		var out bytes.Buffer
		var failed, reasons []string
		for _, c := range s.health.snapshot(endpoint) {
			if excluded[c.Name] {
				delete(excluded, c.Name)
				fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.Name)
				continue
			}
			if err := c.Fn(r); err != nil {
				// As upstream's healthz: the reason goes to the log, not to callers,
				// whom these paths never authenticate (a failing check's error can
				// name hosts, files or the cloud's answers).
				fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.Name)
				failed = append(failed, c.Name)
				reasons = append(reasons, c.Name+": "+err.Error())
				continue
			}
			fmt.Fprintf(&out, "[+]%s ok\n", c.Name)
		}
		if len(excluded) > 0 {
			names := make([]string, 0, len(excluded))
			for name := range excluded {
				names = append(names, fmt.Sprintf("%q", name))
			}
			slices.Sort(names)
			fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(names, ","))
		}
		setTextHeaders(w)
		if len(failed) > 0 {
			// At V(2), as upstream's: probes fail every few seconds while a check does.
			s.logger.V(2).Info("Health check failed", "endpoint", endpoint, "failed", failed, "reasons", reasons)
			// Always verbose on failure, as upstream: the caller needs to know which failed.
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "%s%s check failed\n", out.String(), endpoint)
			return
		}
		if _, verbose := query["verbose"]; !verbose {
			fmt.Fprint(w, "ok")
			return
		}
		fmt.Fprintf(w, "%s%s check passed\n", out.String(), endpoint)
	}
}

// singleCheckHandler serves /<endpoint>/<check> with that one check.
func (s *Server) singleCheckHandler(endpoint string) http.HandlerFunc {
	prefix := "/" + endpoint + "/"
	return func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, prefix)
		checks := s.health.snapshot(endpoint)
		i := slices.IndexFunc(checks, func(c Check) bool { return c.Name == name })
		if i < 0 {
			http.NotFound(w, r)
			return
		}
		c := checks[i]
		setTextHeaders(w)
		if err := c.Fn(r); err != nil {
			s.logger.V(2).Info("Health check failed", "endpoint", endpoint, "check", name, "err", err)
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "[-]%s failed: reason withheld\n", name)
			return
		}
		fmt.Fprint(w, "ok")
	}
}

func setTextHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}
