package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/localcloud/api"
)

// canned serves one fixed answer and records the requests.
type canned struct {
	status  int
	header  map[string]string
	body    string
	mu      sync.Mutex
	request []*http.Request
	bodies  []string
}

func (c *canned) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.request = append(c.request, r)
	c.bodies = append(c.bodies, string(raw))
	c.mu.Unlock()
	for k, v := range c.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(c.status)
	_, _ = io.WriteString(w, c.body)
}

func newClient(t *testing.T, h http.Handler) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, "secret")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func errBody(reason api.Reason, msg, field string) string {
	raw, _ := json.Marshal(api.Error{Message: msg, Reason: reason, Field: field})
	return string(raw)
}

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		want       cloud.Result
		retryAfter time.Duration
		field      string
	}{
		{name: "404 not found", status: 404, body: errBody(api.ReasonNotFound, "instance i-1: not found", ""), want: cloud.ResultNotFound},
		{name: "404 from an unknown endpoint", status: 404, body: errBody(api.ReasonUnknownEndpoint, "no endpoint", ""), want: cloud.ResultError},
		{name: "404 from a proxy", status: 404, body: "<html>not here</html>", want: cloud.ResultError},
		{name: "400 names the field", status: 400, body: errBody(api.ReasonInvalid, "bad", "spec.ports[0].protocol"), want: cloud.ResultInvalid, field: "spec.ports[0].protocol"},
		{name: "429 with seconds", status: 429, header: map[string]string{"Retry-After": "7"}, body: errBody(api.ReasonThrottled, "slow down", ""), want: cloud.ResultThrottled, retryAfter: 7 * time.Second},
		{name: "429 without Retry-After", status: 429, body: "", want: cloud.ResultThrottled},
		{name: "429 with junk Retry-After", status: 429, header: map[string]string{"Retry-After": "soon"}, want: cloud.ResultThrottled},
		{name: "501", status: 501, body: errBody(api.ReasonNotImplemented, "no routes", ""), want: cloud.ResultNotImplemented},
		{name: "500", status: 500, body: errBody(api.ReasonInternal, "boom", ""), want: cloud.ResultError},
		{name: "502 without body", status: 502, want: cloud.ResultError},
		{name: "503", status: 503, body: errBody(api.ReasonUnavailable, "outage", ""), want: cloud.ResultError},
		{name: "409", status: 409, body: errBody(api.ReasonConflict, "port in use", ""), want: cloud.ResultError},
		{name: "401", status: 401, body: errBody(api.ReasonUnauthorized, "token", ""), want: cloud.ResultError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, &canned{status: tt.status, header: tt.header, body: tt.body})
			_, err := c.GetInstance(context.Background(), "i-1")
			if err == nil {
				t.Fatal("no error")
			}
			if got := cloud.Classify(err); got != tt.want {
				t.Fatalf("Classify(%v) = %s, want %s", err, got, tt.want)
			}
			if tt.want != cloud.ResultNotFound && cloud.IsNotFound(err) {
				t.Fatalf("%v wraps ErrNotFound", err)
			}
			if after, _ := cloud.RetryAfter(err); after != tt.retryAfter {
				t.Errorf("RetryAfter = %s, want %s", after, tt.retryAfter)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("%v is not a *client.Error", err)
			}
			if ce.StatusCode != tt.status || ce.Field != tt.field {
				t.Errorf("Error = %+v, want status %d field %q", ce, tt.status, tt.field)
			}
			if tt.want == cloud.ResultThrottled {
				var te *cloud.ThrottledError
				if !errors.As(err, &te) {
					t.Errorf("429 is not a *cloud.ThrottledError: %T", err)
				}
			}
			if !strings.Contains(err.Error(), "/v1/instances/i-1") {
				t.Errorf("error %q does not name the request", err)
			}
		})
	}
}

func TestRetryAfterDate(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := parseRetryAfter(now.Add(90*time.Second).Format(http.TimeFormat), now); got != 90*time.Second {
		t.Fatalf("parseRetryAfter(date) = %s, want 90s", got)
	}
	if got := parseRetryAfter(now.Add(-time.Second).Format(http.TimeFormat), now); got != 0 {
		t.Fatalf("a past date = %s, want 0", got)
	}
}

func TestTransportFailuresAreNeverNotFound(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens any more
	c, err := New(url, "secret")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetInstance(context.Background(), "i-1")
	if err == nil || cloud.IsNotFound(err) || cloud.Classify(err) != cloud.ResultError {
		t.Fatalf("connection refused = %v (%s), want a plain temporary error", err, cloud.Classify(err))
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	c = newClient(t, &canned{status: 200, body: "{}"})
	if _, err := c.GetInstance(ctx, "i-1"); cloud.Classify(err) != cloud.ResultTimeout {
		t.Fatalf("expired context = %v (%s), want a timeout", err, cloud.Classify(err))
	}

	c = newClient(t, &canned{status: 200, body: "{not json"})
	if _, err := c.GetInstance(context.Background(), "i-1"); err == nil || cloud.IsNotFound(err) {
		t.Fatalf("undecodable answer = %v", err)
	}
}

// pager serves instance pages from a script: each entry is the answer to one call.
type pager struct {
	t     *testing.T
	pages []func(w http.ResponseWriter, token string)
	mu    sync.Mutex
	calls int
}

func (p *pager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	i := p.calls
	p.calls++
	p.mu.Unlock()
	if i >= len(p.pages) {
		p.t.Errorf("unexpected call %d", i)
		w.WriteHeader(500)
		return
	}
	p.pages[i](w, r.URL.Query().Get("pageToken"))
}

func page(next string, names ...string) func(http.ResponseWriter, string) {
	return func(w http.ResponseWriter, _ string) {
		list := api.InstanceList{NextPageToken: next, Items: []api.Instance{}}
		for _, n := range names {
			list.Items = append(list.Items, api.Instance{ID: "i-" + n, Name: n})
		}
		_ = json.NewEncoder(w).Encode(list)
	}
}

func failing(status int) func(http.ResponseWriter, string) {
	return func(w http.ResponseWriter, _ string) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, errBody(api.ReasonInternal, "boom", ""))
	}
}

func TestListAllInstances(t *testing.T) {
	tests := []struct {
		name      string
		pages     []func(http.ResponseWriter, string)
		want      []string
		wantErr   bool
		wantClass cloud.Result
	}{
		{name: "three pages", pages: []func(http.ResponseWriter, string){page("t1", "a", "b"), page("t2", "c"), page("", "d")}, want: []string{"a", "b", "c", "d"}},
		{name: "empty", pages: []func(http.ResponseWriter, string){page("")}, want: nil},
		{name: "second page fails", pages: []func(http.ResponseWriter, string){page("t1", "a"), failing(500)}, wantErr: true, wantClass: cloud.ResultError},
		{name: "last page throttled", pages: []func(http.ResponseWriter, string){page("t1", "a"), page("t2", "b"), failing(429)}, wantErr: true, wantClass: cloud.ResultThrottled},
		{name: "token repeats", pages: []func(http.ResponseWriter, string){page("t1", "a"), page("t1", "b")}, wantErr: true, wantClass: cloud.ResultError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &pager{t: t, pages: tt.pages}
			c := newClient(t, p)
			got, err := c.ListAllInstances(context.Background(), 2)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ListAllInstances = %d instances, want an error", len(got))
				}
				if got != nil {
					t.Fatalf("ListAllInstances returned %d instances with its error", len(got))
				}
				if cloud.IsNotFound(err) || cloud.Classify(err) != tt.wantClass {
					t.Fatalf("error %v classified %s, want %s", err, cloud.Classify(err), tt.wantClass)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, i := range got {
				names = append(names, i.Name)
			}
			if fmt.Sprint(names) != fmt.Sprint(tt.want) {
				t.Fatalf("names = %v, want %v", names, tt.want)
			}
			if p.calls != len(tt.pages) {
				t.Fatalf("%d calls, want %d", p.calls, len(tt.pages))
			}
		})
	}
}

func TestRequests(t *testing.T) {
	h := &canned{status: 200, body: `{}`}
	c := newClient(t, h)
	ctx := context.Background()
	calls := []struct {
		do         func() error
		method     string
		path, body string
	}{
		{do: func() error {
			_, err := c.EnsureLoadBalancer(ctx, "web", api.LoadBalancerSpec{ClusterName: "k"})
			return err
		},
			method: "PUT", path: "/v1/loadbalancers/web", body: `"clusterName":"k"`},
		{do: func() error { _, err := c.UpdateLoadBalancerBackends(ctx, "web", nil); return err },
			method: "PUT", path: "/v1/loadbalancers/web/backends", body: `{"backends":[]}`},
		{do: func() error {
			_, err := c.CreateRoute(ctx, "k", api.RouteSpec{DestinationCIDR: "10.0.0.0/24"})
			return err
		},
			method: "POST", path: "/v1/clusters/k/routes", body: `"destinationCIDR":"10.0.0.0/24"`},
		{do: func() error { return c.DeleteRoute(ctx, "k", "r 1") }, method: "DELETE", path: "/v1/clusters/k/routes/r 1"},
		{do: func() error { _, err := c.StopInstance(ctx, "i-1"); return err }, method: "POST", path: "/v1/instances/i-1/stop"},
		{do: func() error { _, err := c.GetInstanceByName(ctx, "node-1"); return err }, method: "GET", path: "/v1/instances/by-name/node-1"},
		{do: func() error { return c.DeleteFault(ctx, "lb.*") }, method: "DELETE", path: "/admin/faults/lb.*"},
		{do: func() error { return c.SetFaults(ctx, nil) }, method: "PUT", path: "/admin/faults", body: `{"faults":[]}`},
	}
	for i, call := range calls {
		if err := call.do(); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		r, body := h.request[i], h.bodies[i]
		if r.Method != call.method || r.URL.Path != call.path {
			t.Errorf("call %d: %s %s, want %s %s", i, r.Method, r.URL.Path, call.method, call.path)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer secret" {
			t.Errorf("call %d: Authorization %q", i, got)
		}
		if !strings.Contains(body, call.body) {
			t.Errorf("call %d: body %s, want it to contain %s", i, body, call.body)
		}
	}
}

func TestNewChecksArguments(t *testing.T) {
	for _, tt := range []struct{ url, token string }{
		{"127.0.0.1:8990", "t"}, {"ftp://x", "t"}, {"http://", "t"}, {"http://127.0.0.1:1", ""},
	} {
		if _, err := New(tt.url, tt.token); err == nil {
			t.Errorf("New(%q, %q) succeeded", tt.url, tt.token)
		}
	}
}

func TestWithCA(t *testing.T) {
	for _, tt := range []struct {
		name   string
		ca     []byte
		wantOK bool
	}{
		{"nil changes nothing", nil, true},
		{"not PEM", []byte("a certificate"), false},
		{"empty", []byte{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New("https://127.0.0.1:1", "t", WithCA(tt.ca))
			if (err == nil) != tt.wantOK {
				t.Errorf("New with WithCA(%q): %v, want ok %t", tt.ca, err, tt.wantOK)
			}
		})
	}
}

func TestCallCounts(t *testing.T) {
	body := `# HELP localcloud_requests_total x
# TYPE localcloud_requests_total counter
localcloud_requests_total{code="200",operation="instances.list"} 3
localcloud_requests_total{code="429",operation="instances.list"} 2
localcloud_requests_total{code="201",operation="lb.ensure"} 1
# HELP other_total y
# TYPE other_total counter
other_total 9
`
	c := newClient(t, &canned{status: 200, header: map[string]string{"Content-Type": "text/plain; version=0.0.4"}, body: body})
	cc, err := c.CallCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cc.Total("instances.list") != 5 || cc.Code("instances.list", 429) != 2 || cc.Total("lb.ensure") != 1 || cc.Total("lb.get") != 0 {
		t.Fatalf("CallCounts = %v", cc)
	}
	before := CallCounts{"instances.list": {200: 1, 429: 2}}
	d := cc.Since(before)
	if d.Code("instances.list", 200) != 2 || d.Code("instances.list", 429) != 0 || d.Total("lb.ensure") != 1 {
		t.Fatalf("Since = %v", d)
	}
}

// TestWithTimeout checks that WithTimeout bounds a request that hangs, that the failure
// is temporary (never NotFound), and that the option leaves other clients alone.
func TestWithTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	bounded, err := New(srv.URL, "secret", WithTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := New(srv.URL, "secret")
	if err != nil {
		t.Fatal(err)
	}
	if plain.hc.Timeout != 0 || bounded.hc.Timeout != 50*time.Millisecond {
		t.Fatalf("timeouts: plain %s, bounded %s; want 0 and 50ms", plain.hc.Timeout, bounded.hc.Timeout)
	}
	_, err = bounded.GetInstance(context.Background(), "i-1")
	if err == nil || cloud.IsNotFound(err) || cloud.IsInvalid(err) {
		t.Fatalf("a request past WithTimeout = %v, want a temporary error", err)
	}
}
