package local

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
)

const testToken = "test-token"

// stubCloud is an httptest server answering with a handler the test sets, recording
// every request it saw.
type stubCloud struct {
	srv *httptest.Server
	mu  sync.Mutex
	h   http.HandlerFunc
	log []string
}

func newStub(t *testing.T, h http.HandlerFunc) *stubCloud {
	t.Helper()
	s := &stubCloud{h: h}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			t.Errorf("%s %s: Authorization %q, want the bearer token", r.Method, r.URL, r.Header.Get("Authorization"))
		}
		if r.Header.Get("User-Agent") != userAgent {
			t.Errorf("%s %s: User-Agent %q, want %q", r.Method, r.URL, r.Header.Get("User-Agent"), userAgent)
		}
		s.mu.Lock()
		s.log = append(s.log, r.Method+" "+r.URL.RequestURI())
		h := s.h
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *stubCloud) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

func (s *stubCloud) provider(t *testing.T, mutate ...func(*Config)) *Provider {
	t.Helper()
	cfg := Config{Endpoint: s.srv.URL, Token: testToken}
	for _, m := range mutate {
		m(&cfg)
	}
	p, err := NewFromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// answer writes status with a local cloud error body (none when reason is empty).
func answer(status int, reason api.Reason, field, msg string, hdr ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		if reason == "" {
			w.WriteHeader(status)
			_, _ = io.WriteString(w, msg)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(api.Error{Message: msg, Reason: reason, Field: field})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func nodeNamed(name, providerID string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
}

func lbSpec(name string, ports ...cloud.LoadBalancerPort) *cloud.LoadBalancerSpec {
	if len(ports) == 0 {
		ports = []cloud.LoadBalancerPort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}}
	}
	return &cloud.LoadBalancerSpec{Name: name, ClusterName: "kubernetes", Ports: ports}
}

// want describes the expected classification of an error.
type want struct {
	result     cloud.Result
	retryAfter time.Duration
	contains   []string
}

func check(t *testing.T, err error, w want) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", w.result)
	}
	if got := cloud.Classify(err); got != w.result {
		t.Errorf("error %q classified %s, want %s", err, got, w.result)
	}
	if w.result != cloud.ResultNotFound && cloud.IsNotFound(err) {
		t.Errorf("error %q matches ErrNotFound: a controller would take it as gone", err)
	}
	if ra, _ := cloud.RetryAfter(err); ra != w.retryAfter {
		t.Errorf("Retry-After %s, want %s", ra, w.retryAfter)
	}
	for _, c := range w.contains {
		if !strings.Contains(err.Error(), c) {
			t.Errorf("error %q does not contain %q", err, c)
		}
	}
}

// TestErrorMapping checks how each kind of answer surfaces from each capability.
func TestErrorMapping(t *testing.T) {
	ctx := context.Background()
	calls := map[string]func(p *Provider) error{
		"InstanceMetadata by ID": func(p *Provider) error {
			_, err := instances{p}.InstanceMetadata(ctx, nodeNamed("n1", "local://i-000000000001"))
			return err
		},
		"InstanceMetadata by name": func(p *Provider) error {
			_, err := instances{p}.InstanceMetadata(ctx, nodeNamed("n1", ""))
			return err
		},
		"ListInstances": func(p *Provider) error { _, err := instances{p}.ListInstances(ctx); return err },
		"GetLoadBalancer": func(p *Provider) error {
			_, err := loadBalancers{p}.GetLoadBalancer(ctx, lbSpec("lb1"), nil)
			return err
		},
		"EnsureLoadBalancer": func(p *Provider) error {
			_, err := loadBalancers{p}.EnsureLoadBalancer(ctx, lbSpec("lb1"), nil)
			return err
		},
		"UpdateLoadBalancerBackends": func(p *Provider) error {
			return loadBalancers{p}.UpdateLoadBalancerBackends(ctx, lbSpec("lb1"), nil)
		},
		"ListRoutes": func(p *Provider) error { _, err := routes{p}.ListRoutes(ctx, "kubernetes"); return err },
		"CreateRoute": func(p *Provider) error {
			return routes{p}.CreateRoute(ctx, "kubernetes", "hint", cloud.Route{TargetNode: "n1", DestinationCIDR: netip.MustParsePrefix("10.244.1.0/24")})
		},
	}
	listings := map[string]bool{"ListInstances": true, "ListRoutes": true}
	answers := []struct {
		name string
		h    http.HandlerFunc
		want want
	}{
		{"404 NotFound", answer(404, api.ReasonNotFound, "", "no such thing"), want{result: cloud.ResultNotFound}},
		{"404 unknown endpoint", answer(404, api.ReasonUnknownEndpoint, "", "no such endpoint"), want{result: cloud.ResultError}},
		{"404 from a proxy", answer(404, "", "", "<html>404 page not found</html>"), want{result: cloud.ResultError}},
		{"429 with Retry-After", answer(429, api.ReasonThrottled, "", "slow down", "Retry-After", "7"), want{result: cloud.ResultThrottled, retryAfter: 7 * time.Second}},
		{"429 without Retry-After", answer(429, api.ReasonThrottled, "", "slow down"), want{result: cloud.ResultThrottled}},
		{"501", answer(501, api.ReasonNotImplemented, "", "not here"), want{result: cloud.ResultNotImplemented}},
		{"400 naming the field", answer(400, api.ReasonInvalid, "spec.name", "spec.name: bad"), want{result: cloud.ResultInvalid, contains: []string{"spec.name"}}},
		{"400 with the field only in the body's field", answer(400, api.ReasonInvalid, "spec.name", "bad"), want{result: cloud.ResultInvalid, contains: []string{"(field spec.name)"}}},
		{"409", answer(409, api.ReasonConflict, "", "in use"), want{result: cloud.ResultError}},
		{"500", answer(500, api.ReasonInternal, "", "injected"), want{result: cloud.ResultError}},
		{"503", answer(503, api.ReasonUnavailable, "", "outage"), want{result: cloud.ResultError}},
		{"502 without a body", answer(502, "", "", ""), want{result: cloud.ResultError}},
		{"401", answer(401, api.ReasonUnauthorized, "", "bad token"), want{result: cloud.ResultError}},
		{"200 with garbage", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "{not json") }, want{result: cloud.ResultError}},
	}
	for _, a := range answers {
		t.Run(a.name, func(t *testing.T) {
			p := newStub(t, a.h).provider(t)
			for name, call := range calls {
				w := a.want
				if w.result == cloud.ResultNotFound && listings[name] {
					// A listing is never a positive "gone".
					w.result = cloud.ResultError
				}
				t.Run(name, func(t *testing.T) { check(t, call(p), w) })
			}
		})
	}
}

// TestDeletesTreatNotFoundAsDone checks that deleting what is gone succeeds, and that
// nothing else counts as gone.
func TestDeletesTreatNotFoundAsDone(t *testing.T) {
	ctx := context.Background()
	deletes := map[string]func(p *Provider) error{
		"EnsureLoadBalancerDeleted": func(p *Provider) error {
			return loadBalancers{p}.EnsureLoadBalancerDeleted(ctx, lbSpec("lb1"), nil)
		},
		"DeleteRoute": func(p *Provider) error {
			return routes{p}.DeleteRoute(ctx, "kubernetes", cloud.Route{Name: "r1", TargetNode: "n1", DestinationCIDR: netip.MustParsePrefix("10.244.1.0/24")})
		},
	}
	for name, del := range deletes {
		t.Run(name, func(t *testing.T) {
			if err := del(newStub(t, answer(404, api.ReasonNotFound, "", "gone")).provider(t)); err != nil {
				t.Errorf("deleting what the cloud says is gone: %v, want success", err)
			}
			if err := del(newStub(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }).provider(t)); err != nil {
				t.Errorf("deleting: %v", err)
			}
			check(t, del(newStub(t, answer(404, api.ReasonUnknownEndpoint, "", "?")).provider(t)), want{result: cloud.ResultError})
			check(t, del(newStub(t, answer(503, api.ReasonUnavailable, "", "outage")).provider(t)), want{result: cloud.ResultError})
			check(t, del(newStub(t, answer(429, api.ReasonThrottled, "", "x", "Retry-After", "2")).provider(t)), want{result: cloud.ResultThrottled, retryAfter: 2 * time.Second})
		})
	}
}

// TestNetworkFailures checks that an unreachable cloud and a request that outlives the
// request timeout are temporary errors.
func TestNetworkFailures(t *testing.T) {
	ctx := context.Background()
	t.Run("connection refused", func(t *testing.T) {
		s := newStub(t, answer(200, "", "", "{}"))
		p := s.provider(t)
		s.srv.Close()
		_, err := instances{p}.InstanceMetadata(ctx, nodeNamed("n1", ""))
		check(t, err, want{result: cloud.ResultError})
		err = loadBalancers{p}.EnsureLoadBalancerDeleted(ctx, lbSpec("lb1"), nil)
		check(t, err, want{result: cloud.ResultError})
	})
	t.Run("request timeout", func(t *testing.T) {
		release := make(chan struct{})
		s := newStub(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		defer close(release)
		p := s.provider(t, func(c *Config) { c.RequestTimeout = 50 * time.Millisecond })
		_, err := instances{p}.InstanceMetadata(ctx, nodeNamed("n1", "local://i-000000000001"))
		if err == nil || cloud.IsNotFound(err) || cloud.IsThrottled(err) || cloud.IsInvalid(err) {
			t.Fatalf("timed-out lookup = %v, want a temporary error", err)
		}
		err = routes{p}.DeleteRoute(ctx, "kubernetes", cloud.Route{Name: "r1"})
		if err == nil || cloud.IsNotFound(err) {
			t.Fatalf("timed-out delete = %v, want a temporary error", err)
		}
	})
	t.Run("caller's context canceled", func(t *testing.T) {
		s := newStub(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		p := s.provider(t)
		cctx, cancel := context.WithCancel(ctx)
		go func() { time.Sleep(20 * time.Millisecond); cancel() }()
		_, err := instances{p}.ListInstances(cctx)
		check(t, err, want{result: cloud.ResultCanceled})
	})
}

// TestListInstancesPages checks that pages are followed and that any failed page fails
// the listing instead of returning a short list.
func TestListInstancesPages(t *testing.T) {
	inst := func(id, name string) api.Instance {
		return api.Instance{ID: id, Name: name, State: api.InstanceRunning, Addresses: []api.Address{{Type: api.AddressInternalIP, Address: "10.0.0.1"}}}
	}
	pages := map[string]api.InstanceList{
		"":   {Items: []api.Instance{inst("i-1", "a"), inst("i-2", "b")}, NextPageToken: "p2"},
		"p2": {Items: []api.Instance{inst("i-3", "c"), inst("i-4", "d")}, NextPageToken: "p3"},
		"p3": {Items: []api.Instance{inst("i-5", "e")}},
	}
	serve := func(failOn string, fail http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			tok := r.URL.Query().Get("pageToken")
			if tok == failOn && fail != nil {
				fail(w, r)
				return
			}
			writeJSON(w, 200, pages[tok])
		}
	}

	s := newStub(t, serve("", nil))
	got, err := instances{s.provider(t, func(c *Config) { c.ListPageSize = 2 })}.ListInstances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range got {
		ids = append(ids, strings.TrimPrefix(i.ProviderID, "local://"))
	}
	if strings.Join(ids, ",") != "i-1,i-2,i-3,i-4,i-5" {
		t.Errorf("listed %v, want i-1..i-5", ids)
	}
	wantReqs := []string{"GET /v1/instances?limit=2", "GET /v1/instances?limit=2&pageToken=p2", "GET /v1/instances?limit=2&pageToken=p3"}
	if strings.Join(s.requests(), "\n") != strings.Join(wantReqs, "\n") {
		t.Errorf("requests %q, want %q", s.requests(), wantReqs)
	}

	for _, tt := range []struct {
		name string
		page string
		fail http.HandlerFunc
		want want
	}{
		{"second page 500", "p2", answer(500, api.ReasonInternal, "", "boom"), want{result: cloud.ResultError, contains: []string{"page 2"}}},
		{"last page throttled", "p3", answer(429, api.ReasonThrottled, "", "slow", "Retry-After", "3"), want{result: cloud.ResultThrottled, retryAfter: 3 * time.Second, contains: []string{"page 3"}}},
		{"second page NotFound (token expired)", "p2", answer(404, api.ReasonNotFound, "", "token"), want{result: cloud.ResultError}},
		{"second page garbage", "p2", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "[") }, want{result: cloud.ResultError}},
		{"repeated token", "p3", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, api.InstanceList{NextPageToken: "p2"}) }, want{result: cloud.ResultError, contains: []string{"repeated"}}},
		{"bad instance ID on a page", "p3", func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, 200, api.InstanceList{Items: []api.Instance{inst("", "x")}})
		}, want{result: cloud.ResultError}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newStub(t, serve(tt.page, tt.fail)).provider(t, func(c *Config) { c.ListPageSize = 2 })
			got, err := instances{p}.ListInstances(context.Background())
			if got != nil {
				t.Errorf("a failed listing returned %d instances, want none", len(got))
			}
			check(t, err, tt.want)
		})
	}
}

// TestRequests checks what the provider sends for each call.
func TestRequests(t *testing.T) {
	ctx := context.Background()
	var (
		bodyMu sync.Mutex
		body   []byte
	)
	lastBody := func() string {
		bodyMu.Lock()
		defer bodyMu.Unlock()
		return strings.TrimSpace(string(body))
	}
	s := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		bodyMu.Lock()
		body = raw
		bodyMu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/v1/instances"):
			writeJSON(w, 200, api.Instance{ID: "i-000000000001", Name: "n1", State: api.InstanceRunning})
		case strings.HasPrefix(r.URL.Path, "/v1/loadbalancers"):
			writeJSON(w, 200, api.LoadBalancer{Name: "lb1", Status: api.LoadBalancerStatus{VIP: "127.100.0.1"}})
		case strings.HasSuffix(r.URL.Path, "/routes") && r.Method == http.MethodGet:
			writeJSON(w, 200, api.RouteList{Items: []api.Route{{Name: "r-10-244-2-0-24", DestinationCIDR: "10.244.2.0/24", TargetNode: "n2"}}})
		case strings.Contains(r.URL.Path, "/routes"):
			writeJSON(w, 201, api.Route{})
		default:
			http.Error(w, "unexpected", 500)
		}
	})
	p := s.provider(t)
	mustJSON := func(v any) string {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	steps := []struct {
		name     string
		call     func() error
		request  string
		wantBody string
	}{
		{"metadata by provider ID", func() error {
			_, err := instances{p}.InstanceMetadata(ctx, nodeNamed("n1", "local://i-000000000001"))
			return err
		}, "GET /v1/instances/i-000000000001", ""},
		{"metadata by name", func() error {
			_, err := instances{p}.InstanceMetadata(ctx, nodeNamed("n1.example", ""))
			return err
		}, "GET /v1/instances/by-name/n1.example", ""},
		{"ensure", func() error {
			_, err := loadBalancers{p}.EnsureLoadBalancer(ctx, lbSpec("lb1"), nil)
			return err
		}, "PUT /v1/loadbalancers/lb1", mustJSON(api.LoadBalancerSpec{ClusterName: "kubernetes", Ports: []api.Port{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080}}, Backends: []api.Backend{}, HealthCheckNodePort: cloud.KubeProxyHealthzPort})},
		{"update backends", func() error { return loadBalancers{p}.UpdateLoadBalancerBackends(ctx, lbSpec("lb1"), nil) },
			"PUT /v1/loadbalancers/lb1/backends", `{"backends":[]}`},
		{"delete", func() error { return loadBalancers{p}.EnsureLoadBalancerDeleted(ctx, lbSpec("lb1"), nil) }, "DELETE /v1/loadbalancers/lb1", ""},
		{"create route with a usable hint", func() error {
			return routes{p}.CreateRoute(ctx, "c1", "c1-uid-ipv4", cloud.Route{TargetNode: "n1", DestinationCIDR: netip.MustParsePrefix("10.244.1.0/24")})
		}, "POST /v1/clusters/c1/routes", `{"name":"c1-uid-ipv4","destinationCIDR":"10.244.1.0/24","targetNode":"n1"}`},
		{"create route with an unusable hint", func() error {
			return routes{p}.CreateRoute(ctx, "c1", "-bad/hint", cloud.Route{TargetNode: "n1", DestinationCIDR: netip.MustParsePrefix("10.244.1.0/24")})
		}, "POST /v1/clusters/c1/routes", `{"destinationCIDR":"10.244.1.0/24","targetNode":"n1"}`},
		{"delete route by name", func() error { return routes{p}.DeleteRoute(ctx, "c1", cloud.Route{Name: "r1"}) }, "DELETE /v1/clusters/c1/routes/r1", ""},
		{"delete route without a name", func() error {
			return routes{p}.DeleteRoute(ctx, "c1", cloud.Route{TargetNode: "n2", DestinationCIDR: netip.MustParsePrefix("10.244.2.0/24")})
		}, "DELETE /v1/clusters/c1/routes/r-10-244-2-0-24", ""},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before := len(s.requests())
			if err := st.call(); err != nil {
				t.Fatal(err)
			}
			reqs := s.requests()[before:]
			if len(reqs) == 0 || reqs[len(reqs)-1] != st.request {
				t.Errorf("requests %q, want the last to be %q", reqs, st.request)
			}
			if got := lastBody(); got != st.wantBody {
				t.Errorf("body %s, want %s", got, st.wantBody)
			}
		})
	}
}

// TestInvalidInput checks that bad input is refused before any request, never panics
// and never reads as NotFound.
func TestInvalidInput(t *testing.T) {
	ctx := context.Background()
	s := newStub(t, answer(500, api.ReasonInternal, "", "must not be called"))
	p := s.provider(t)
	lbs := loadBalancers{p}
	errs := map[string]error{}
	_, errs["nil node"] = instances{p}.InstanceMetadata(ctx, nil)
	_, errs["node without name or ID"] = instances{p}.InstanceMetadata(ctx, nodeNamed("", ""))
	_, errs["other provider's ID"] = instances{p}.InstanceMetadata(ctx, nodeNamed("n1", "aws:///us-east-1a/i-0abc"))
	_, errs["malformed ID"] = instances{p}.InstanceMetadata(ctx, nodeNamed("n1", "i-0abc"))
	_, errs["nil spec get"] = lbs.GetLoadBalancer(ctx, nil, nil)
	_, errs["nil spec ensure"] = lbs.EnsureLoadBalancer(ctx, nil, nil)
	errs["nil spec update"] = lbs.UpdateLoadBalancerBackends(ctx, nil, nil)
	errs["nil spec delete"] = lbs.EnsureLoadBalancerDeleted(ctx, nil, nil)
	_, errs["nameless spec"] = lbs.EnsureLoadBalancer(ctx, &cloud.LoadBalancerSpec{}, nil)
	errs["route without CIDR"] = routes{p}.CreateRoute(ctx, "c", "", cloud.Route{TargetNode: "n"})
	errs["route without target"] = routes{p}.CreateRoute(ctx, "c", "", cloud.Route{DestinationCIDR: netip.MustParsePrefix("10.0.0.0/24")})
	for name, err := range errs {
		if !cloud.IsInvalid(err) || cloud.IsNotFound(err) {
			t.Errorf("%s: %v, want an invalid-request error", name, err)
		}
	}
	if reqs := s.requests(); len(reqs) != 0 {
		t.Errorf("invalid input reached the cloud: %q", reqs)
	}
}

// TestLoadBalancerErrorsNameTheServicePort checks that a refused port or backend is
// reported in the Service's terms.
func TestLoadBalancerErrorsNameTheServicePort(t *testing.T) {
	ctx := context.Background()
	spec := lbSpec("lb1",
		cloud.LoadBalancerPort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080},
		cloud.LoadBalancerPort{Name: "sctp", Protocol: corev1.ProtocolSCTP, Port: 9000, NodePort: 30900})
	spec.Backends = []cloud.Backend{{NodeName: "n1", Addresses: []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.0.1")}}}
	spec.RequestedIP = "1.2.3.4"
	for field, wantText := range map[string]string{
		"spec.ports[1].protocol":   `Service port "sctp" (9000/SCTP)`,
		"spec.backends[0].address": "node n1",
		"spec.requestedIP":         `spec.loadBalancerIP "1.2.3.4"`,
	} {
		p := newStub(t, answer(400, api.ReasonInvalid, field, field+": refused")).provider(t)
		_, err := loadBalancers{p}.EnsureLoadBalancer(ctx, spec, nil)
		check(t, err, want{result: cloud.ResultInvalid, contains: []string{field, wantText}})
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Field != field {
			t.Errorf("error %v does not carry the cloud's *client.Error with field %s", err, field)
		}
	}
}

// TestEnsureReportsDataPlaneError checks that a load balancer whose listeners are not
// open is not reported as ensured.
func TestEnsureReportsDataPlaneError(t *testing.T) {
	p := newStub(t, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 200, api.LoadBalancer{Name: "lb1", Status: api.LoadBalancerStatus{VIP: "127.100.0.1", Error: "listen tcp 127.100.0.1:80: address already in use"}})
	}).provider(t)
	st, err := loadBalancers{p}.EnsureLoadBalancer(context.Background(), lbSpec("lb1"), nil)
	if st != nil {
		t.Errorf("status %+v for a load balancer without listeners", st)
	}
	check(t, err, want{result: cloud.ResultError, contains: []string{"address already in use"}})
}

// TestListRoutesRefusesBadDestination checks that an unreadable route fails the listing
// rather than vanishing from it.
func TestListRoutesRefusesBadDestination(t *testing.T) {
	p := newStub(t, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 200, api.RouteList{Items: []api.Route{
			{Name: "ok", DestinationCIDR: "10.244.0.0/24", TargetNode: "n1"},
			{Name: "bad", DestinationCIDR: "10.244.1.0", TargetNode: "n2"},
		}})
	}).provider(t)
	got, err := routes{p}.ListRoutes(context.Background(), "kubernetes")
	if got != nil {
		t.Errorf("listing returned %v with an unreadable route, want nothing", got)
	}
	check(t, err, want{result: cloud.ResultError, contains: []string{"bad"}})
}

// TestApplyRoutesErrorMapping: how the cloud's answers to routes.apply surface, which
// decides what the route controller does with the call: split it (invalid), make each
// change by itself from then on (not implemented: an older cloud), or retry it.
func TestApplyRoutesErrorMapping(t *testing.T) {
	apply := func(p *Provider) error {
		return batchRoutes{routes{p}}.ApplyRoutes(t.Context(), "kubernetes", []cloud.RouteChange{
			{Route: cloud.Route{TargetNode: "n1", DestinationCIDR: netip.MustParsePrefix("10.244.1.0/24")}}})
	}
	for _, a := range []struct {
		name string
		h    http.HandlerFunc
		want want
	}{
		{"409 for one change", answer(409, api.ReasonConflict, "", "create[0] (route r1): target node n1 has no instance"), want{result: cloud.ResultInvalid}},
		{"400", answer(400, api.ReasonInvalid, "changes", "changes: 501 changes"), want{result: cloud.ResultInvalid}},
		{"404 unknown endpoint", answer(404, api.ReasonUnknownEndpoint, "", "no such endpoint"), want{result: cloud.ResultNotImplemented, contains: []string{"older than this provider"}}},
		{"404 not found", answer(404, api.ReasonNotFound, "", "not found"), want{result: cloud.ResultNotImplemented}},
		{"405", answer(405, "", "", "method not allowed"), want{result: cloud.ResultNotImplemented}},
		{"501", answer(501, api.ReasonNotImplemented, "", "not here"), want{result: cloud.ResultNotImplemented}},
		{"500", answer(500, api.ReasonInternal, "", "injected"), want{result: cloud.ResultError}},
		{"429", answer(429, api.ReasonThrottled, "", "slow down", "Retry-After", "3"), want{result: cloud.ResultThrottled, retryAfter: 3 * time.Second}},
	} {
		t.Run(a.name, func(t *testing.T) { check(t, apply(newStub(t, a.h).provider(t)), a.want) })
	}
}
