package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/dataplane"
	"github.com/nephele-dev/nephele/localcloud/faults"
	"github.com/nephele-dev/nephele/localcloud/store"
)

// maxBody bounds request bodies; a load balancer with thousands of backends fits.
const maxBody = 8 << 20

// call is one API request on its way through a handler.
type call struct {
	w http.ResponseWriter
	r *http.Request
	// fault is what the fault rules decided for the call; handlers read InvisibleFor.
	fault faults.Decision
}

// handler serves one operation. It returns the status and body to answer with, or an
// error that httpStatus maps to an answer. A nil body with status 204 sends nothing.
type handler func(c *call) (int, any, error)

// apiError is an error with a chosen answer.
type apiError struct {
	status int
	reason api.Reason
	msg    string
	field  string
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, reason api.Reason, format string, args ...any) *apiError {
	return &apiError{status: status, reason: reason, msg: fmt.Sprintf(format, args...)}
}

func invalid(field, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, reason: api.ReasonInvalid, field: field, msg: field + ": " + fmt.Sprintf(format, args...)}
}

// handler returns the API's HTTP handler; gatherer serves /metrics.
func (s *Server) handler(gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	ep := func(pattern, op string, h handler) { mux.Handle(pattern, s.endpoint(op, h)) }
	// Every operation is the administrator's; operations IsCCMOperation names are the CCM token's too.

	ep("POST /v1/instances", api.OpInstancesCreate, s.createInstance)
	ep("GET /v1/instances", api.OpInstancesList, s.listInstances)
	ep("GET /v1/instances/{id}", api.OpInstancesGet, s.getInstance)
	ep("GET /v1/instances/by-name/{name}", api.OpInstancesGet, s.getInstanceByName)
	ep("POST /v1/instances/{id}/stop", api.OpInstancesStop, s.instanceAction(api.InstanceStopped))
	ep("POST /v1/instances/{id}/start", api.OpInstancesStart, s.instanceAction(api.InstanceRunning))
	ep("POST /v1/instances/{id}/terminate", api.OpInstancesTerminate, s.instanceAction(api.InstanceTerminated))
	ep("DELETE /v1/instances/{id}", api.OpInstancesDelete, s.deleteInstance)
	ep("GET /v1/consoles/{id}", api.OpInstancesConsole, s.instanceConsole)

	ep("GET /v1/loadbalancers", api.OpLBList, s.listLoadBalancers)
	ep("GET /v1/loadbalancers/{name}", api.OpLBGet, s.getLoadBalancer)
	ep("PUT /v1/loadbalancers/{name}", api.OpLBEnsure, s.ensureLoadBalancer)
	ep("PUT /v1/loadbalancers/{name}/backends", api.OpLBUpdate, s.updateBackends)
	ep("DELETE /v1/loadbalancers/{name}", api.OpLBDelete, s.deleteLoadBalancer)

	ep("GET /v1/clusters/{cluster}/routes", api.OpRoutesList, s.listRoutes)
	ep("POST /v1/clusters/{cluster}/routes", api.OpRoutesCreate, s.createRoute)
	ep("DELETE /v1/clusters/{cluster}/routes/{name}", api.OpRoutesDelete, s.deleteRoute)
	ep("POST /v1/clusters/{cluster}/routechanges", api.OpRoutesApply, s.applyRoutes)

	ep("POST /v1/volumes", api.OpVolumesCreate, s.createVolume)
	ep("GET /v1/volumes", api.OpVolumesList, s.listVolumes)
	ep("GET /v1/volumes/{id}", api.OpVolumesGet, s.getVolume)
	ep("DELETE /v1/volumes/{id}", api.OpVolumesDelete, s.deleteVolume)
	ep("POST /v1/volumes/{id}/attach", api.OpVolumesAttach, s.attachVolume)
	ep("POST /v1/volumes/{id}/detach", api.OpVolumesDetach, s.detachVolume)
	ep("POST /v1/volumes/{id}/expand", api.OpVolumesExpand, s.expandVolume)

	admin := func(pattern string, h handler) { mux.Handle(pattern, s.admin(h)) }
	admin("GET /admin/faults", s.getFaults)
	admin("PUT /admin/faults", s.replaceFaults)
	admin("DELETE /admin/faults", s.clearFaults)
	admin("PUT /admin/faults/{operation}", s.putFault)
	admin("DELETE /admin/faults/{operation}", s.deleteFault)

	metricsHandler := promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})
	mux.Handle("GET /metrics", s.admin(func(c *call) (int, any, error) {
		metricsHandler.ServeHTTP(c.w, c.r)
		return 0, nil, nil
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.Handle("/", s.endpoint("unknown", func(c *call) (int, any, error) {
		return 0, nil, errorf(http.StatusNotFound, api.ReasonUnknownEndpoint, "no endpoint %s %s", c.r.Method, c.r.URL.Path)
	}))
	return mux
}

// statusRecorder remembers the answer's status for the metrics.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// IsCCMOperation reports whether op is something a cloud-controller-manager does, and so
// something the CCM token may do: read instances; ensure, update, read and delete load
// balancers; list, create and delete routes, one by one or in a batch. A function rather than an exported list, so
// that no caller can widen the role at run time.
func IsCCMOperation(op string) bool {
	switch op {
	case api.OpInstancesList, api.OpInstancesGet,
		api.OpLBList, api.OpLBGet, api.OpLBEnsure, api.OpLBUpdate, api.OpLBDelete,
		api.OpRoutesList, api.OpRoutesCreate, api.OpRoutesDelete, api.OpRoutesApply:
		return true
	}
	return false
}

// IsCSIOperation reports whether op is something a CSI driver's controller does, and so
// something the CSI token may do: every volume operation, and reading instances (a node's
// instance by its name).
func IsCSIOperation(op string) bool {
	switch op {
	case api.OpVolumesCreate, api.OpVolumesGet, api.OpVolumesList, api.OpVolumesDelete,
		api.OpVolumesAttach, api.OpVolumesDetach, api.OpVolumesExpand,
		api.OpInstancesList, api.OpInstancesGet:
		return true
	}
	return false
}

// role is who a request's token says the caller is.
type role int

const (
	roleNone role = iota
	roleCCM
	roleCSI
	roleAdmin
)

// allows reports whether the role may call op.
func (ro role) allows(op string) bool {
	switch ro {
	case roleAdmin:
		return true
	case roleCCM:
		return IsCCMOperation(op)
	case roleCSI:
		return IsCSIOperation(op)
	}
	return false
}

// scope says what a role other than the administrator may do, for a 403.
func (ro role) scope() string {
	switch ro {
	case roleCCM:
		return "the CCM's token may only read instances and manage load balancers and routes"
	case roleCSI:
		return "the CSI driver's token may only manage volumes and read instances"
	}
	return "a valid bearer token is required"
}

// endpoint wraps an operation's handler: authentication, authorization, faults,
// metrics, answers.
func (s *Server) endpoint(op string, h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		defer func() { s.metrics.observe(op, rec.status, time.Since(start)) }()
		switch ro := s.roleOf(r); {
		case ro == roleNone:
			s.unauthorized(rec)
			return
		case !ro.allows(op):
			s.forbidden(rec, ro, op)
			return
		}
		d := s.faults.Decide(op)
		if d.Latency > 0 {
			s.metrics.fault(op, "latency")
			t := time.NewTimer(d.Latency)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				s.writeError(rec, r, errorf(http.StatusServiceUnavailable, api.ReasonUnavailable, "request canceled"))
				return
			case <-s.stopping:
				t.Stop()
				s.writeError(rec, r, errorf(http.StatusServiceUnavailable, api.ReasonUnavailable, "the local cloud is shutting down"))
				return
			}
		}
		switch {
		case d.Outage:
			s.metrics.fault(op, "outage")
			s.writeError(rec, r, errorf(http.StatusServiceUnavailable, api.ReasonUnavailable, "%s is unavailable (injected outage)", op))
			return
		case d.NotImplemented:
			s.metrics.fault(op, "not_implemented")
			s.writeError(rec, r, errorf(http.StatusNotImplemented, api.ReasonNotImplemented, "%s is not implemented (injected)", op))
			return
		case d.Throttled:
			s.metrics.fault(op, "throttle")
			rec.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(d.RetryAfter)))
			s.writeError(rec, r, errorf(http.StatusTooManyRequests, api.ReasonThrottled, "%s is rate limited; retry after %s", op, d.RetryAfter.Round(time.Millisecond)))
			return
		case d.Fail:
			s.metrics.fault(op, "error")
			s.writeError(rec, r, errorf(http.StatusInternalServerError, api.ReasonInternal, "%s failed (injected error)", op))
			return
		}
		s.serve(rec, r, d, h)
	})
}

// admin wraps an administrative handler: the administrator's only, never faulted, not
// counted.
func (s *Server) admin(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch ro := s.roleOf(r); ro {
		case roleNone:
			s.unauthorized(w)
			return
		case roleAdmin:
		default:
			s.forbidden(w, ro, r.Method+" "+r.URL.Path)
			return
		}
		s.serve(w, r, faults.Decision{}, h)
	})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, d faults.Decision, h handler) {
	status, body, err := h(&call{w: w, r: r, fault: d})
	switch {
	case err != nil:
		s.writeError(w, r, err)
	case status == 0:
		// The handler answered itself.
	default:
		writeJSON(w, status, body)
	}
}

// retryAfterSeconds rounds a wait up to whole seconds, at least 1, as Retry-After needs.
func retryAfterSeconds(d time.Duration) int {
	secs := math.Ceil(d.Seconds())
	if secs < 1 {
		return 1
	}
	if secs > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(secs)
}

func (s *Server) roleOf(r *http.Request) role {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return roleNone
	}
	tok = strings.TrimSpace(tok)
	if subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Token)) == 1 {
		return roleAdmin
	}
	if s.cfg.CSIToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.CSIToken)) == 1 {
		return roleCSI
	}
	for _, ccm := range *s.ccmTokens.Load() {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(ccm)) == 1 {
			return roleCCM
		}
	}
	return roleNone
}

// forbidden answers a role's token asking for what only the administrator may do,
// saying what the role may do.
func (s *Server) forbidden(w http.ResponseWriter, ro role, what string) {
	writeJSON(w, http.StatusForbidden, api.Error{
		Message: fmt.Sprintf("%s: %s", what, ro.scope()),
		Reason:  api.ReasonForbidden})
}

func (s *Server) unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="localcloud"`)
	writeJSON(w, http.StatusUnauthorized, api.Error{Message: "a valid bearer token is required", Reason: api.ReasonUnauthorized})
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	if status == http.StatusNoContent || body == nil {
		w.WriteHeader(status)
		return
	}
	raw, err := json.Marshal(body)
	if err != nil {
		status = http.StatusInternalServerError
		raw, _ = json.Marshal(api.Error{Message: "encoding the answer: " + err.Error(), Reason: api.ReasonInternal})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(raw, '\n'))
}

// writeError answers with the status and body err calls for.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		ae  *apiError
		fe  *api.FieldError
		dce *dataplane.ConflictError
	)
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &fe):
		ae = &apiError{status: http.StatusBadRequest, reason: api.ReasonInvalid, field: fe.Field, msg: err.Error()}
	case errors.Is(err, store.ErrNotFound):
		ae = &apiError{status: http.StatusNotFound, reason: api.ReasonNotFound, msg: err.Error()}
	case errors.Is(err, store.ErrAlreadyExists):
		ae = &apiError{status: http.StatusConflict, reason: api.ReasonAlreadyExists, msg: err.Error()}
	case errors.Is(err, store.ErrLimit):
		ae = &apiError{status: http.StatusConflict, reason: api.ReasonLimitExceeded, msg: err.Error()}
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrExhausted), errors.As(err, &dce):
		ae = &apiError{status: http.StatusConflict, reason: api.ReasonConflict, msg: err.Error()}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		ae = &apiError{status: http.StatusServiceUnavailable, reason: api.ReasonUnavailable, msg: err.Error()}
	default:
		s.log.Error(err, "request failed", "method", r.Method, "path", r.URL.Path)
		ae = &apiError{status: http.StatusInternalServerError, reason: api.ReasonInternal, msg: err.Error()}
	}
	writeJSON(w, ae.status, api.Error{Message: ae.msg, Reason: ae.reason, Field: ae.field})
}

// decode reads a JSON body into v strictly: unknown fields, trailing data and bodies
// over maxBody are refused. prefix names the body in field paths ("spec", or "" for a
// body whose fields are named as they are).
func decode(c *call, prefix string, v any) error {
	body := http.MaxBytesReader(c.w, c.r.Body, maxBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	join := func(f string) string {
		switch {
		case prefix == "":
			return f
		case f == "":
			return prefix
		}
		return prefix + "." + f
	}
	if err := dec.Decode(v); err != nil {
		var (
			te *json.UnmarshalTypeError
			se *json.SyntaxError
			me *http.MaxBytesError
		)
		switch {
		case errors.As(err, &te):
			return invalid(join(te.Field), "want a JSON %s, got %s", te.Type, te.Value)
		case errors.As(err, &se):
			return invalid(join(""), "malformed JSON at byte %d: %v", se.Offset, err)
		case errors.As(err, &me):
			return invalid(join(""), "body larger than %d bytes", me.Limit)
		case errors.Is(err, io.EOF):
			return invalid(join(""), "a JSON body is required")
		}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return invalid(join(strings.Trim(f, `"`)), "unknown field")
		}
		return invalid(join(""), "%v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid(join(""), "unexpected data after the JSON object")
	}
	return nil
}

// query reads the allowed query parameters, refusing any other.
func query(c *call, allowed ...string) (map[string]string, error) {
	values, err := url.ParseQuery(c.r.URL.RawQuery)
	if err != nil {
		return nil, invalid("query", "malformed query string: %v", err)
	}
	out := map[string]string{}
	for k, vs := range values {
		ok := false
		for _, a := range allowed {
			ok = ok || a == k
		}
		if !ok {
			return nil, invalid(k, "unknown query parameter; allowed: %s", strings.Join(allowed, ", "))
		}
		if len(vs) != 1 {
			return nil, invalid(k, "give it once")
		}
		out[k] = vs[0]
	}
	return out, nil
}
